package main

import (
	"embed"
	"io/fs"
	"net/http"
)

// web is the dashboard: plain HTML, CSS and JavaScript, no build step. It holds nothing of the
// fleet: it asks the API as its user, with the token they give it, which it keeps in the tab's
// sessionStorage only.
//
//go:embed web
var web embed.FS

// pageCSP lets the page run its own script and style alone and talk only to this server: no
// inline script an injected text could become, no frame of it on another site.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// page serves the dashboard at / and its files under /ui/.
func page() http.Handler {
	files, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	static := http.StripPrefix("/ui/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", pageCSP)
		w.Header().Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, files, "index.html")
			return
		}
		static.ServeHTTP(w, r)
	})
}
