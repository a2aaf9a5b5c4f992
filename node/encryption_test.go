package node

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/atrest"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// canary is written in every payload; with encryption on no file under the
// data directory may hold it.
const canary = "AT-REST-CANARY-5d1e9b"

func writeKeyFile(t *testing.T) string {
	t.Helper()
	key := make([]byte, atrest.StoreKeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "store.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// filesHolding lists the files under dir that hold s, and counts the files.
func filesHolding(t *testing.T, dir, s string) (holding []string, files int) {
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
			holding = append(holding, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return holding, files
}

func noteIndex(ns string) *fsmv1.CreateIndex {
	return &fsmv1.CreateIndex{Namespace: ns, Definition: &fsmv1.IndexDefinition{
		Name: "note", Version: 1, Category: "acct",
		Fields: []*fsmv1.IndexField{{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/note",
			Type: fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING}},
	}}
}

// fillNode writes canary payloads to a fresh namespace, indexes them, takes
// a Raft snapshot and more writes after it (so the log, the snapshot, the
// namespace store, the metadata store and the index store all hold them).
func fillNode(t *testing.T, n *Node) int {
	t.Helper()
	createNamespace(t, n, "app")
	if _, err := n.CreateIndex(ctxT(t), noteIndex("app")); err != nil {
		t.Fatal(err)
	}
	write := func(i int) {
		data := fmt.Sprintf(`{"note":"%s-%d","pad":"%s"}`, canary, i, strings.Repeat("x", 200))
		if _, err := n.Append(ctxT(t), &fsmv1.Append{Namespace: "app", Stream: fmt.Sprintf("acct-%d", i%5),
			Messages: []*fsmv1.NewMessage{{Type: "T", Data: []byte(data)}}}); err != nil {
			t.Fatal(err)
		}
	}
	const before, after = 60, 20
	for i := range before {
		write(i)
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for i := range after {
		write(before + i)
	}
	if _, err := n.Backup(ctxT(t), io.Discard, func(int64, fsm.SnapshotMeta) {}); err != nil {
		t.Fatalf("backup: %v", err)
	}
	return before + after
}

// TestEncryptionAtRest runs a node with and without a key and searches every
// file of its data directory for the payload: absent with the key, present
// without (so the search can fail). With the key it restarts and reads the
// data back, and refuses a wrong key and a missing one.
func TestEncryptionAtRest(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
			keyFile := ""
			if encrypted {
				keyFile = writeKeyFile(t)
			}
			c := newCluster(t, 1, func(cfg *Config) { cfg.EncryptionKeyFile = keyFile })
			tn := c.Nodes[0]
			written := fillNode(t, tn.Node)
			tn.Stop()

			holding, files := filesHolding(t, tn.Dir, canary)
			for _, sub := range []string{"raft/wal", "fsm"} {
				if _, n := filesHolding(t, filepath.Join(tn.Dir, sub), canary); n == 0 {
					t.Fatalf("no files under %s: the test does not cover it", sub)
				}
			}
			if !encrypted {
				if len(holding) == 0 {
					t.Fatalf("none of %d files holds the plaintext without encryption: the search cannot fail", files)
				}
				return
			}
			if len(holding) > 0 {
				t.Fatalf("with encryption on, %d of %d files hold the plaintext: %v", len(holding), files, holding)
			}

			tn.Restart()
			testutil.Eventually(t, waitTimeout, "the node to lead again", tn.IsLeader)
			msgs := readAll(t, tn.Node, "app", nodeapi.ReadOptions{})
			if len(msgs) != written || !strings.Contains(string(msgs[written-1].Data), canary) {
				t.Fatalf("after a restart with the key: %d messages, want %d holding the payload", len(msgs), written)
			}
			tn.Stop()

			for _, tc := range []struct {
				name, keyFile, want string
			}{
				{"wrong key", writeKeyFile(t), "store.key"},
				{"no key", "", atrest.KeysFile},
				{"missing key file", "/nonexistent/skald.key", "/nonexistent/skald.key"},
			} {
				cfg := tn.config(false)
				cfg.EncryptionKeyFile = tc.keyFile
				n, err := Open(cfg)
				if err == nil {
					n.Close()
					t.Fatalf("%s: the node started", tc.name)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: %v; want it to name %s", tc.name, err, tc.want)
				}
			}
		})
	}
}

// TestEncryptionRefusesUnencryptedDir: a key given to a node whose data
// directory already holds plaintext data is refused, saying what to do.
func TestEncryptionRefusesUnencryptedDir(t *testing.T) {
	c := newCluster(t, 1, nil)
	tn := c.Nodes[0]
	createNamespace(t, tn.Node, "app")
	tn.Stop()
	cfg := tn.config(false)
	cfg.EncryptionKeyFile = writeKeyFile(t)
	n, err := Open(cfg)
	if err == nil {
		n.Close()
		t.Fatal("a key was accepted for an unencrypted data directory")
	}
	if !strings.Contains(err.Error(), "unencrypted data") || !strings.Contains(err.Error(), "empty directory") {
		t.Fatalf("Open = %v; want it to say the directory is unencrypted and what to do", err)
	}
	if ok, _ := atrest.HasKeysFile(tn.Dir); ok {
		t.Fatal("the refused start left a keys file")
	}
}

func TestEncryptionRefusesBolt(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), APIAddr: "127.0.0.1:1", RaftAddr: testutil.FreeAddr(t),
		LogStore: LogStoreBolt, EncryptionKeyFile: writeKeyFile(t)}
	n, err := Open(cfg)
	if err == nil {
		n.Close()
		t.Fatal("bolt with encryption started")
	}
	if !errors.Is(err, errEncryptedBolt) {
		t.Fatalf("Open = %v, want errEncryptedBolt", err)
	}
	// An existing bolt directory is refused too, even without --raft-log-store.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	stable, _, _, err := openLogStore(filepath.Join(dir, "raft"), LogStoreBolt, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stable.Close()
	_, _, _, err = openLogStore(filepath.Join(dir, "raft"), "", &atrest.Keyring{}, nil, nil)
	if !errors.Is(err, errEncryptedBolt) {
		t.Fatalf("openLogStore on a bolt directory with keys = %v, want errEncryptedBolt", err)
	}
}

// TestEncryptionOnBySnapshotRebuild turns encryption on for a member of an
// unencrypted cluster the way docs/security.md says: stop it, empty its data
// directory, start it with the key. It rebuilds from the leader's snapshot,
// and nothing under its data directory holds the plaintext afterwards, while
// the other members' do (so the search can fail).
func TestEncryptionOnBySnapshotRebuild(t *testing.T) {
	keyFile := writeKeyFile(t)
	encrypted := -1
	c := StartTestCluster(t, 3, TestClusterOptions{Config: func(i int, cfg *Config) {
		smallSnapshots(cfg)
		if i == encrypted {
			cfg.EncryptionKeyFile = keyFile
		}
	}})
	write := func(from, count int) {
		for i := from; i < from+count; i++ {
			msg := &fsmv1.NewMessage{Type: "T", Data: []byte(fmt.Sprintf(`{"note":"%s-%d"}`, canary, i))}
			testutil.Until(t, waitTimeout, "append", func() (bool, string) {
				_, err := c.Leader().Append(ctxT(t),
					&fsmv1.Append{Namespace: "app", Stream: "s", Messages: []*fsmv1.NewMessage{msg}})
				return err == nil, fmt.Sprint(err)
			})
		}
	}
	createNamespace(t, c.Leader().Node, "app")
	write(0, 100)
	c.WaitConverged()
	f := c.Followers()[0]
	f.Stop()
	// Everything but the node id: the same member on an empty disk.
	for _, d := range []string{"raft", "fsm"} {
		if err := os.RemoveAll(filepath.Join(f.Dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	write(100, 100)
	l := c.Leader()
	testutil.Until(t, waitTimeout, "the leader to compact its log", func() (bool, string) {
		first, err := l.logs.FirstIndex()
		return err == nil && first > 10, fmt.Sprintf("first index %d, %v", first, err)
	})
	encrypted = f.index
	f.Restart()
	c.WaitConverged()
	testutil.Eventually(t, waitTimeout, "the rebuilt follower to record an installed snapshot", func() bool {
		snap := f.raft.Stats()["last_snapshot_index"]
		return snap != "0" && snap != ""
	})
	want := readAll(t, l.Node, "app", nodeapi.ReadOptions{})
	if got := readAll(t, f.Node, "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}); len(got) != 200 ||
		len(want) != 200 {
		t.Fatalf("the rebuilt follower holds %d messages, the leader %d; want 200", len(got), len(want))
	}
	f.Stop()
	if ok, err := atrest.HasKeysFile(f.Dir); err != nil || !ok {
		t.Fatalf("the rebuilt follower has no keys file (%v): it is not encrypted", err)
	}
	if holding, files := filesHolding(t, f.Dir, canary); len(holding) > 0 || files == 0 {
		t.Fatalf("%d of %d files of the rebuilt follower hold the plaintext: %v", len(holding), files, holding)
	}
	if holding, _ := filesHolding(t, l.Dir, canary); len(holding) == 0 {
		t.Fatal("no file of an unencrypted member holds the plaintext: the search cannot fail")
	}
}
