package console_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skalddb/skald/console"
)

func TestHandler(t *testing.T) {
	h := console.Handler()
	do := func(method, path string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	index := do("GET", "/ui/")
	if index.Code != http.StatusOK || index.Header().Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(index.Body.String(), `src="app.js"`) {
		t.Fatalf("/ui/: %d %q %q", index.Code, index.Header().Get("Content-Type"), index.Body.String())
	}
	if csp := index.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("index CSP %q", csp)
	}
	// A page of the console (a deep link) is index.html too; a missing
	// asset is not.
	if w := do("GET", "/ui/cluster"); w.Code != http.StatusOK || w.Body.String() != index.Body.String() {
		t.Errorf("/ui/cluster: %d", w.Code)
	}
	if w := do("GET", "/ui/missing.js"); w.Code != http.StatusNotFound {
		t.Errorf("/ui/missing.js: %d", w.Code)
	}
	if w := do("POST", "/ui/"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d", w.Code)
	}

	plain := do("GET", "/ui/app.js")
	if plain.Code != http.StatusOK || plain.Header().Get("Content-Type") != "text/javascript; charset=utf-8" || plain.Header().Get("Content-Encoding") != "" {
		t.Fatalf("app.js: %d %q %q", plain.Code, plain.Header().Get("Content-Type"), plain.Header().Get("Content-Encoding"))
	}
	gz := do("GET", "/ui/app.js", "Accept-Encoding", "br, gzip")
	if gz.Header().Get("Content-Encoding") != "gzip" || gz.Body.Len() >= plain.Body.Len() {
		t.Fatalf("app.js with gzip: encoding %q, %d bytes (plain %d)", gz.Header().Get("Content-Encoding"), gz.Body.Len(), plain.Body.Len())
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); string(b) != plain.Body.String() {
		t.Fatal("gzipped app.js differs from app.js")
	}
	if w := do("GET", "/ui/app.js", "Accept-Encoding", "gzip;q=0"); w.Header().Get("Content-Encoding") != "" {
		t.Error("gzip sent to a client that refuses it")
	}
	etag, gzTag := plain.Header().Get("ETag"), gz.Header().Get("ETag")
	if etag == "" || gzTag == "" || etag == gzTag {
		t.Errorf("ETags %q (identity) and %q (gzip): want two different tags", etag, gzTag)
	}
	if w := do("GET", "/ui/app.js", "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Errorf("revalidation with ETag %q: %d", etag, w.Code)
	}
	if w := do("GET", "/ui/app.js", "If-None-Match", gzTag, "Accept-Encoding", "gzip"); w.Code != http.StatusNotModified {
		t.Errorf("revalidation with ETag %q: %d", gzTag, w.Code)
	}
}
