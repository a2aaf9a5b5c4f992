package fsm

import (
	"archive/tar"
	"bytes"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// populated returns a store that applied a random log with churn, and the
// log.
func populated(t *testing.T, seed int64, n int) (*Store, []Entry) {
	t.Helper()
	logs := randomLog(t, rand.New(rand.NewSource(seed)), n, true)
	s := openTestStore(t, nil)
	applyInBatches(s, rand.New(rand.NewSource(seed)), logs)
	return s, logs
}

func checkpointStream(t *testing.T, s *Store) (*CheckpointSet, []byte) {
	t.Helper()
	set, err := s.Checkpoint("/data/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Remove() })
	var buf bytes.Buffer
	n, err := set.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != set.Size || int64(buf.Len()) != set.Size {
		t.Fatalf("stream is %d bytes (%d counted), announced %d", buf.Len(), n, set.Size)
	}
	return set, buf.Bytes()
}

func TestCheckpointRestoreDir(t *testing.T) {
	t.Parallel()
	src, logs := populated(t, 7, 800)
	set, stream := checkpointStream(t, src)
	if set.Meta.Index != uint64(len(logs)) || set.Meta.Term != logs[len(logs)-1].Term {
		t.Fatalf("checkpoint meta %+v, want index %d", set.Meta, len(logs))
	}
	if set.Meta.Configuration == nil || set.Meta.ConfigurationIndex == 0 {
		t.Fatalf("checkpoint lost the configuration: %+v", set.Meta)
	}

	fs := vfs.NewMem()
	meta, err := RestoreDir(fs, "/restored/fsm", bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if meta.Index != set.Meta.Index {
		t.Fatalf("restored meta %+v", meta)
	}
	dst, err := Open(Options{Dir: "/restored/fsm", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if contentHash(t, dst) != contentHash(t, src) {
		t.Fatal("restored content differs from the source")
	}
	if floor, _ := dst.Floor(); floor.Index != set.Meta.Index {
		t.Fatalf("restored floor %+v, want the checkpoint index", floor)
	}
	if dst.AppliedIndex() > set.Meta.Index {
		t.Fatalf("restored applied %d beyond checkpoint %d", dst.AppliedIndex(), set.Meta.Index)
	}
	if _, err := RestoreDir(fs, "/restored/fsm", bytes.NewReader(stream)); err == nil {
		t.Fatal("RestoreDir into a non-empty directory succeeded")
	}
}

func TestRestoreReplacesLiveState(t *testing.T) {
	t.Parallel()
	src, logs := populated(t, 11, 600)
	_, stream := checkpointStream(t, src)

	// A store with other content, and an open view, takes the checkpoint.
	dst, _ := populated(t, 12, 300)
	f := newFeeder(t, dst)
	f.must(createNS("only-here"))
	if err := dst.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatal(err)
	}
	if contentHash(t, dst) != contentHash(t, src) {
		t.Fatal("restored content differs from the source")
	}
	if _, ok := dst.Namespace("only-here"); ok {
		t.Fatal("namespace from before the restore survived")
	}
	// Both continue identically from the checkpoint.
	more := randomLog(t, rand.New(rand.NewSource(99)), 900, true)[600:]
	for i, l := range more {
		l.Index = uint64(len(logs) + 1 + i)
	}
	src.ApplyBatch(more)
	dst.ApplyBatch(more)
	if contentHash(t, dst) != contentHash(t, src) {
		t.Fatal("stores diverged after applying the same entries past the checkpoint")
	}
}

func TestRestoreStaged(t *testing.T) {
	t.Parallel()
	src, _ := populated(t, 5, 400)
	_, stream := checkpointStream(t, src)
	dst := openTestStore(t, nil)
	staged, err := StageCheckpoint(dst.fs, "/data/incoming", bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(staged); err != nil {
		t.Fatal(err)
	}
	if contentHash(t, dst) != contentHash(t, src) {
		t.Fatal("restored content differs from the source")
	}
	if _, err := dst.fs.Stat("/data/incoming"); err == nil {
		t.Fatal("staged directory left behind")
	}
}

func TestInterruptedRestore(t *testing.T) {
	t.Parallel()
	src, _ := populated(t, 3, 300)
	_, stream := checkpointStream(t, src)
	const dir = "/data/fsm"
	cases := []struct {
		name string
		// crash leaves fs as a restore interrupted at some step would.
		crash    func(t *testing.T, fs vfs.FS)
		restored bool
	}{
		{"staged but not complete", func(t *testing.T, fs vfs.FS) {
			if _, err := stageCheckpoint(fs, stagingDir(dir), bytes.NewReader(stream)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"complete, not swapped", func(t *testing.T, fs vfs.FS) {
			if _, err := stageCheckpoint(fs, stagingDir(dir), bytes.NewReader(stream)); err != nil {
				t.Fatal(err)
			}
			markComplete(fs, stagingDir(dir))
		}, false},
		{"old moved aside, staged not moved in", func(t *testing.T, fs vfs.FS) {
			if _, err := stageCheckpoint(fs, stagingDir(dir), bytes.NewReader(stream)); err != nil {
				t.Fatal(err)
			}
			markComplete(fs, stagingDir(dir))
			if err := fs.Rename(dir, oldDir(dir)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"old moved aside, staging partial", func(t *testing.T, fs vfs.FS) {
			if _, err := stageCheckpoint(fs, stagingDir(dir), bytes.NewReader(stream)); err != nil {
				t.Fatal(err)
			}
			if err := fs.Rename(dir, oldDir(dir)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"swapped, old not removed", func(t *testing.T, fs vfs.FS) {
			if _, err := stageCheckpoint(fs, stagingDir(dir), bytes.NewReader(stream)); err != nil {
				t.Fatal(err)
			}
			if err := fs.Rename(dir, oldDir(dir)); err != nil {
				t.Fatal(err)
			}
			if err := fs.Rename(stagingDir(dir), dir); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := openTestStore(t, fs)
			newFeeder(t, s).must(createNS("before"))
			before := contentHash(t, s)
			s.Close()
			c.crash(t, fs)
			s = openTestStore(t, fs)
			want := before
			if c.restored {
				want = contentHash(t, src)
			}
			if got := contentHash(t, s); got != want {
				t.Fatalf("after recovery the store holds neither the expected state (restored=%v)", c.restored)
			}
			for _, p := range []string{stagingDir(dir), oldDir(dir)} {
				if _, err := fs.Stat(p); err == nil {
					t.Fatalf("%s left behind", p)
				}
			}
		})
	}
}

func TestStageRejectsForeignEntries(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../escape", "/abs", "ns/xyz/000001.sst", "_metadata/a/b", "other"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Size: 1, Mode: 0o644, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
		tw.Close()
		fs := vfs.NewMem()
		if _, err := stageCheckpoint(fs, "/s", &buf); err == nil || !strings.Contains(err.Error(), "unexpected entry") {
			t.Errorf("entry %q: %v", name, err)
		}
		if _, err := fs.Stat("/s"); err == nil {
			t.Errorf("entry %q: staging directory left behind", name)
		}
	}
	if _, err := stageCheckpoint(vfs.NewMem(), "/s", bytes.NewReader(nil)); err == nil {
		t.Error("empty stream staged")
	}
}

func TestSyncFloorAndRecordFloor(t *testing.T) {
	t.Parallel()
	s, logs := populated(t, 21, 200)
	synced, err := s.SyncFloor()
	if err != nil || synced.Index != uint64(len(logs)) {
		t.Fatalf("sync floor %+v %v", synced, err)
	}
	floor, err := s.Floor()
	if err != nil || floor.Index != uint64(len(logs)) {
		t.Fatalf("floor %+v %v", floor, err)
	}
	// Raft's snapshot index may be past the last applied command (no-ops).
	for _, c := range []struct{ index, want uint64 }{{uint64(len(logs)) + 2, uint64(len(logs)) + 2}, {5, uint64(len(logs)) + 2}} {
		if err := s.RecordFloor(SnapshotMeta{Index: c.index, Term: 9}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Floor(); got.Index != c.want {
			t.Fatalf("RecordFloor(%d): floor %d, want %d", c.index, got.Index, c.want)
		}
	}
}
