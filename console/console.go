// Package console serves Skald's web console: the static assets in dist/,
// built from src/ by `make console` and embedded in the binary, so every
// node serves the same console at /ui/. The assets need no token; the
// console's API calls carry the one the user signs in with.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed dist
var dist embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// contentTypes is fixed here rather than taken from package mime, whose
// table the system's mime.types can change.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// asset is one file of dist, with its gzip form when that is smaller.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

// loadAssets reads and compresses dist once per process (every node of
// an in-process test cluster shares them).
var loadAssets = sync.OnceValue(func() map[string]*asset {
	assets := map[string]*asset{}
	err := fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &asset{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, contentType: contentTypes[path.Ext(p)]}
		if a.contentType == "" {
			a.contentType = http.DetectContentType(body)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		if buf.Len() < len(body) {
			a.gz = buf.Bytes()
		}
		assets[strings.TrimPrefix(p, "dist/")] = a
		return nil
	})
	if err != nil {
		panic("console: embedded assets: " + err.Error()) // cannot happen: embed checked them at build
	}
	return assets
})

// Handler serves the console under Prefix: GET and HEAD only, gzip when
// the client accepts it, an ETag from the content (the assets change
// only with the binary) and, for paths that name no file, index.html.
func Handler() http.Handler {
	assets := loadAssets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			if strings.Contains(path.Base(name), ".") {
				http.NotFound(w, r) // a missing asset, not a page of the console
				return
			}
			a = assets["index.html"]
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes that cheap
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Vary", "Accept-Encoding")
		if a.contentType == "text/html; charset=utf-8" {
			h.Set("Content-Security-Policy", "default-src 'self'; connect-src *; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
			h.Set("Referrer-Policy", "no-referrer")
		}
		body, etag := a.body, a.etag
		if a.gz != nil && acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			body, etag = a.gz, a.etag[:len(a.etag)-1]+`-gzip"` // another representation, another tag
		}
		h.Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
