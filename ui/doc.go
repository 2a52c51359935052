// Package ui holds allot's read-only web UI: the page sources under src/,
// served as they are, and under vendor/ the uPlot that `make ui` copies from
// the version pinned in package-lock.json. Both are embedded by the server
// and committed, so building and testing allot needs no Node. The pages only
// read the public HTTP API; this package holds no Go logic beyond the embed.
package ui
