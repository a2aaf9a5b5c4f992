package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const atRestCanary = "CLI-AT-REST-CANARY-93c0"

func writeStoreKey(t *testing.T, dir, name string) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// stopServer sends SIGTERM and waits (with a deadline) for a clean exit.
func stopServer(t *testing.T, p *serverProc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("server exited with %v: %s", err, p.stderr)
		}
		p.done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop on SIGTERM")
	}
}

// holding lists the files under dir whose bytes contain s.
func holding(t *testing.T, dir, s string) (found []string, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(s)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// TestServerEncryptionAtRest runs skald server with and without
// --encryption-key-file, appends payloads holding a canary through the CLI,
// stops it and searches every file under the data directory: none holds the
// canary with the key, some do without (so the search can fail). The
// encrypted directory then restarts with its key and serves the data, and
// refuses to start with another key or none, naming the file.
func TestServerEncryptionAtRest(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
			dir, keys := t.TempDir(), t.TempDir()
			args := []string{"--admin-token", testAdmin}
			if encrypted {
				args = append(args, "--encryption-key-file", writeStoreKey(t, keys, "store.key"))
			}
			p := startServer(t, dir, args...)
			admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
			out, _, code := runCLI(t, admin, "ns", "create", "vault", "-o", "json")
			var created struct{ Token string }
			if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
				t.Fatalf("ns create: exit %d, %q", code, out)
			}
			env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
			for i := range 5 {
				if _, errOut, code := runCLI(t, env, "append", "s-1", "T",
					fmt.Sprintf(`{"secret":"%s-%d"}`, atRestCanary, i)); code != 0 {
					t.Fatalf("append: %d %s", code, errOut)
				}
			}
			stopServer(t, p)
			found, files := holding(t, dir, atRestCanary)
			if !encrypted {
				if len(found) == 0 {
					t.Fatalf("none of %d files holds the canary without encryption: the search cannot fail", files)
				}
				return
			}
			if len(found) > 0 {
				t.Fatalf("%d of %d files hold the canary with encryption on: %v", len(found), files, found)
			}
			q := startServer(t, dir, args...)
			env[0] = "SKALD_ADDR=" + q.addr
			if out, errOut, code := runCLI(t, env, "read", "s-1", "-o", "json"); code != 0 ||
				!strings.Contains(out, atRestCanary+"-4") {
				t.Fatalf("read after a restart with the key: exit %d, %q %s", code, out, errOut)
			}
			stopServer(t, q)

			wrong := writeStoreKey(t, keys, "wrong.key")
			for _, tc := range []struct {
				name string
				args []string
				want string
			}{
				{"wrong key", []string{"--encryption-key-file", wrong}, wrong},
				{"no key", nil, "ENCRYPTION-KEYS"},
				{"bolt", []string{"--encryption-key-file", wrong, "--raft-log-store", "bolt"}, "needs --raft-log-store wal"},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cmd := exec.CommandContext(ctx, binary, append([]string{"server", "--data-dir", dir,
					"--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}, tc.args...)...)
				var errb bytes.Buffer
				cmd.Stderr = &errb
				err := cmd.Run()
				timedOut := ctx.Err() != nil
				cancel()
				if err == nil || timedOut || !strings.Contains(errb.String(), tc.want) {
					t.Fatalf("%s: exit %v (timed out: %v), stderr %q; want a refusal naming %s", tc.name, err, timedOut,
						errb.String(), tc.want)
				}
			}
		})
	}
}
