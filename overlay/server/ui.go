package server

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/allot-sched/allot/ui"
)

// uiCSP keeps the pages to what the binary serves: no CDN, no network at
// run time. Scripts come only from the server; styles may be inline because
// uPlot writes style attributes on the elements it builds.
const uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// serveUI registers the read-only web UI at /ui/. Every server serves it,
// followers included; its pages call the API with relative URLs, so it
// works behind a path prefix (a proxy serving /allot/ui/ for /ui/).
func (s *Server) serveUI(mux *http.ServeMux) {
	files := http.FileServerFS(ui.Dist())
	mux.Handle("GET /ui/", s.instrument("ui", http.StripPrefix("/ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", uiCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Asset names carry no hash: always revalidate, so an upgraded
		// server never serves a stale script against a new API.
		h.Set("Cache-Control", "no-cache")
		if _, err := fs.Stat(ui.Dist(), strings.TrimPrefix(r.URL.Path, "/")); err != nil && r.URL.Path != "/" {
			writeError(w, errorf(http.StatusNotFound, "no UI file %s", r.URL.Path))
			return
		}
		files.ServeHTTP(w, r)
	}))))
	// /ui without the slash: a relative redirect keeps any path prefix
	// (http.Redirect would make it absolute).
	mux.Handle("GET /ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "ui/")
		w.WriteHeader(http.StatusMovedPermanently)
	}))
	s.addPath("GET /ui/")
}
