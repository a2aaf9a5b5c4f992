package transport

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/internal/testutil"
)

func loadTLS(t *testing.T, dir, name string) *TLS {
	t.Helper()
	tl, err := NewTLS(
		TLSFiles{
			CertFile: filepath.Join(dir, name+".pem"),
			KeyFile:  filepath.Join(dir, name+"-key.pem"),
			CAFile:   filepath.Join(dir, "ca.pem"),
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// Ports with the operator's certificates trust the CA that signed them
// and nothing else, in either direction.
func TestFileCredsTrustOnlyTheCA(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if err := GenerateTLS(dir, []string{"node"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := GenerateTLS(other, []string{"stranger"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	openPort := func(tl *TLS) *Port {
		p, err := Open("127.0.0.1:0", "", FileCreds(tl), nil, testutil.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		go func() { // Raft's side: take what the port hands over
			for {
				c, err := p.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return p
	}
	a, b := openPort(loadTLS(t, dir, "node")), openPort(loadTLS(t, dir, "node"))
	stranger := openPort(loadTLS(t, other, "stranger"))
	addr := func(p *Port) raft.ServerAddress { return raft.ServerAddress(p.Addr().String()) }
	conn, err := a.Dial(addr(b), time.Second)
	if err != nil {
		t.Fatalf("a member cannot dial another with the same CA: %v", err)
	}
	conn.Close()
	if conn, err := stranger.Dial(addr(a), time.Second); err == nil {
		conn.Close()
		t.Fatal("a node with another CA completed a TLS handshake with a member")
	}
	if conn, err := a.Dial(addr(stranger), time.Second); err == nil {
		conn.Close()
		t.Fatal("a member accepted the stranger's certificate")
	}
}

func TestTLSReloadsCertificates(t *testing.T) {
	dir := t.TempDir()
	if err := GenerateTLS(dir, []string{"node"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	tl := loadTLS(t, dir, "node")
	first, _ := tl.current()
	// Rotate: a new CA and certificate in place of the old files.
	if err := GenerateTLS(dir, []string{"node"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(2 * time.Second)
	for _, f := range []string{"node.pem", "node-key.pem", "ca.pem"} {
		os.Chtimes(filepath.Join(dir, f), future, future)
	}
	tl.mu.Lock()
	tl.checked = time.Time{} // skip the once-a-second throttle
	tl.mu.Unlock()
	second, _ := tl.current()
	if string(first.Certificate[0]) == string(second.Certificate[0]) {
		t.Fatal("certificate not reloaded after the files changed")
	}
}

// A reload that fails keeps the last good certificate and says so in the
// log, once per distinct error, and once more when the files load again.
func TestTLSReloadFailureIsLogged(t *testing.T) {
	dir := t.TempDir()
	if err := GenerateTLS(dir, []string{"node"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	tl := loadTLS(t, dir, "node")
	var buf bytes.Buffer
	tl.LogTo(slog.New(slog.NewTextHandler(&buf, nil)))
	good, _ := tl.current()
	keyPEM, err := os.ReadFile(filepath.Join(dir, "node-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	changes := 0
	check := func(touch func()) *tls.Certificate {
		touch()
		changes++ // a new modification time each change, so each is reread
		future := time.Now().Add(time.Duration(changes) * time.Second)
		os.Chtimes(filepath.Join(dir, "node-key.pem"), future, future)
		tl.mu.Lock()
		tl.checked = time.Time{} // skip the once-a-second throttle
		tl.mu.Unlock()
		c, _ := tl.current()
		return c
	}
	broken := func() {
		if err := os.WriteFile(filepath.Join(dir, "node-key.pem"), []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []string{"broken", "broken again"} {
		if c := check(broken); string(c.Certificate[0]) != string(good.Certificate[0]) {
			t.Fatalf("%s: the last good certificate is no longer served", step)
		}
	}
	if got := strings.Count(buf.String(), "TLS files not reloaded"); got != 1 {
		t.Fatalf("logged the same reload failure %d times, want 1:\n%s", got, buf.String())
	}
	check(func() {
		if err := os.WriteFile(filepath.Join(dir, "node-key.pem"), keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if !strings.Contains(buf.String(), "TLS files reloaded after an earlier failure") {
		t.Fatalf("no line when the files loaded again:\n%s", buf.String())
	}
}
