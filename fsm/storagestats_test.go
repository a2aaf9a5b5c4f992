package fsm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// StorageStats counts the open namespaces and what their databases hold,
// and leaves every reference it took: a deleted namespace still closes.
func TestStorageStats(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	if st := s.StorageStats(); st.OpenNamespaces != 0 || st.DiskBytes != 0 {
		t.Fatalf("empty store: %+v", st)
	}
	cmds := []*fsmv1.Command{createNS("a"), createNS("b")}
	for range 50 {
		cmds = append(cmds, appendCmd("a", "s-1", newMsg("T", `{"x":1}`)))
	}
	s.ApplyBatch(commandEntries(t, 1, cmds...))
	st := s.StorageStats()
	if st.OpenNamespaces != 2 || st.DiskBytes == 0 {
		t.Fatalf("two namespaces open, one written: %+v", st)
	}
	s.ApplyBatch(commandEntries(t, uint64(len(cmds)+1), &fsmv1.Command{Kind: &fsmv1.Command_DeleteNamespace{DeleteNamespace: &fsmv1.DeleteNamespace{Name: "b"}}}))
	if st := s.StorageStats(); st.OpenNamespaces != 1 {
		t.Fatalf("after deleting b: %+v (a reference StorageStats took kept it open?)", st)
	}
}

// The event listener counts the flushes and compactions of a namespace's
// database and what they wrote, StorageStats reports its level-0 tables,
// and a write stall is counted, timed and logged naming the database.
func TestPebbleEvents(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := openTestStore(t, nil, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	if st := s.StorageStats(); st.Events != (PebbleEventCounts{}) || st.L0Files != 0 {
		t.Fatalf("empty store: %+v", st)
	}
	cmds := []*fsmv1.Command{createNS("a")}
	for range 50 {
		cmds = append(cmds, appendCmd("a", "s-1", newMsg("T", `{"x":1}`)))
	}
	s.ApplyBatch(commandEntries(t, 1, cmds...))
	ns, err := s.acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(ns)
	before := s.StorageStats().Events
	if err := ns.db.Flush(); err != nil {
		t.Fatal(err)
	}
	st := s.StorageStats()
	if st.Events.Flushes != before.Flushes+1 || st.Events.FlushBytes <= before.FlushBytes || st.L0Files < 1 || st.L0SublevelsMax < 1 {
		t.Fatalf("after a flush: %+v (before %+v)", st, before)
	}
	if err := ns.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	after := s.StorageStats()
	if after.Events.Compactions <= st.Events.Compactions || after.Events.CompactionBytes <= st.Events.CompactionBytes || after.L0Files != 0 {
		t.Fatalf("after a manual compaction: %+v (before %+v)", after, st)
	}

	l := s.pc.events.listener(`namespace "a"`)
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	l.WriteStallEnd()
	l.WriteStallEnd() // an end without a begin adds nothing
	ev := s.StorageStats().Events
	if ev.WriteStalls != after.Events.WriteStalls+1 || ev.WriteStallTime <= after.Events.WriteStallTime {
		t.Fatalf("after one stall: %+v (before %+v)", ev, after.Events)
	}
	for _, want := range []string{`msg="pebble write stall: `, `db="namespace \"a\""`, `reason="memtable count limit reached"`, `msg="pebble write stall ended"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}
