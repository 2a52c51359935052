// Package ui holds allot's read-only web UI: the sources under src/, and
// the bundle under dist/ that `make ui` builds from them (with the uPlot
// pinned in package-lock.json) and that the server embeds. dist/ is
// committed, so building and testing allot needs no Node. The pages only
// read the public HTTP API; this package holds no Go logic beyond the embed.
package ui
