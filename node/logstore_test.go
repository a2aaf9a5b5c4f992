package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"
)

func TestChooseLogStore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		has       []string // what the directory already holds
		want, got string
		err       string
	}{
		{"new dir, default", nil, "", LogStoreWAL, ""},
		{"new dir, bolt", nil, LogStoreBolt, LogStoreBolt, ""},
		{"new dir, wal", nil, LogStoreWAL, LogStoreWAL, ""},
		{"bolt dir, default", []string{boltFile}, "", LogStoreBolt, ""},
		{"wal dir, default", []string{walDir}, "", LogStoreWAL, ""},
		{"wal dir, wal", []string{walDir}, LogStoreWAL, LogStoreWAL, ""},
		{"bolt dir, wal asked", []string{boltFile}, LogStoreWAL, "", "holds a bolt raft log, but the wal store was asked for"},
		{"wal dir, bolt asked", []string{walDir}, LogStoreBolt, "", "holds a wal raft log, but the bolt store was asked for"},
		{"both", []string{boltFile, walDir}, "", "", "holds both a bolt (raft.db) and a wal (wal/) raft log"},
		{"unknown store", nil, "rocks", "", `raft log store "rocks": want "bolt" or "wal"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, h := range tc.has {
				var err error
				if h == walDir {
					err = os.Mkdir(filepath.Join(dir, h), 0o755)
				} else {
					err = os.WriteFile(filepath.Join(dir, h), nil, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := chooseLogStore(dir, tc.want)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.got {
				t.Fatalf("got %q, %v; want %q", got, err, tc.got)
			}
		})
	}
}

// Each store keeps what Raft stores in it across a close and reopen: log
// entries and the stable keys (term, vote).
func TestLogStoreReopen(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			stable, logs, got, err := openLogStore(dir, kind, nil, nil, nil)
			if err != nil || got != kind {
				t.Fatalf("open: %q, %v", got, err)
			}
			var batch []*raft.Log
			for i := uint64(1); i <= 100; i++ {
				batch = append(batch, &raft.Log{Index: i, Term: 1 + i/50, Type: raft.LogCommand, Data: []byte{byte(i)}})
			}
			if err := logs.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
			if err := logs.DeleteRange(1, 10); err != nil { // head truncation, as after a snapshot
				t.Fatal(err)
			}
			if err := stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := stable.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
				t.Fatal(err)
			}
			if err := stable.Close(); err != nil {
				t.Fatal(err)
			}

			stable, logs, got, err = openLogStore(dir, "", nil, nil, nil)
			if err != nil || got != kind {
				t.Fatalf("reopen: %q, %v", got, err)
			}
			defer stable.Close()
			first, _ := logs.FirstIndex()
			last, _ := logs.LastIndex()
			term, _ := stable.GetUint64([]byte("CurrentTerm"))
			vote, _ := stable.Get([]byte("LastVoteCand"))
			var l raft.Log
			if err := logs.GetLog(77, &l); err != nil || l.Index != 77 || l.Term != 2 || l.Data[0] != 77 {
				t.Fatalf("entry 77: %+v, %v", l, err)
			}
			if first != 11 || last != 100 || term != 7 || string(vote) != "n2" {
				t.Fatalf("reopened: log %d..%d, term %d, vote %q", first, last, term, vote)
			}

			// The reopened tail takes more entries, and keeps them too.
			if err := logs.StoreLog(&raft.Log{Index: 101, Term: 3, Type: raft.LogCommand, Data: []byte{101}}); err != nil {
				t.Fatal(err)
			}
			if err := stable.Close(); err != nil {
				t.Fatal(err)
			}
			stable, logs, _, err = openLogStore(dir, "", nil, nil, nil)
			if err != nil {
				t.Fatalf("second reopen: %v", err)
			}
			last, _ = logs.LastIndex()
			if err := logs.GetLog(101, &l); err != nil || last != 101 || l.Term != 3 || l.Data[0] != 101 {
				t.Fatalf("after second reopen: last %d, entry 101 %+v, %v", last, l, err)
			}
		})
	}
}

// Segments raft-wal creates or reopens sync with fdatasync (walFS).
func TestWALSegmentsUseDataSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := newWALFS(nil)
	for _, c := range []struct {
		name string
		open func() (types.WritableFile, error)
	}{
		{"create", func() (types.WritableFile, error) { return fs.Create(dir, "seg", 1<<20) }},
		{"reopen", func() (types.WritableFile, error) { return fs.OpenWriter(dir, "seg") }},
	} {
		name := c.name
		f, err := c.open()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := f.(*dataSyncFile); !ok {
			t.Errorf("%s: segment file is %T, want *dataSyncFile", name, f)
		}
		if _, err := f.WriteAt([]byte("entry"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("%s: sync: %v", name, err)
		}
		f.Close()
	}
}
