// Package version holds the build's version string, set by the linker
// (-X github.com/allot-sched/allot/internal/version.Version=...).
package version

// Version is the release or git description of this build; "dev" when built
// without the Makefile.
var Version = "dev"
