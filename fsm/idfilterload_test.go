package fsm

import (
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
)

// After a restart, the first appends must not wait for the id filter to
// be read from the database (seconds for millions of ids, which stalled
// every write after a restart): they are answered from the database while
// the filter loads, and the filter adopted afterwards holds the ids
// committed meanwhile.
func TestIDFilterLoadsInBackground(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNSWindow("app", int64(time.Hour)))
	const n = 300
	for i := range n {
		f.must(appendAt("app", "s-1", 0, clientMsg(uid(i), "T", `{}`)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	next := f.next
	s = openTestStore(t, fs)
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the store closes: closing waits for the load
	s.idfLoadBefore = func() { <-gate }
	f = newFeeder(t, s)
	f.next = next

	// The load is held at its start: each append below would hang if
	// apply waited for it.
	var batches [][]Entry
	for _, c := range []struct{ id, stream string }{{uid(7), "s-1"}, {uid(n), "s-2"}, {uid(n), "s-2"}} {
		batches = append(batches, commandEntries(t, f.next, appendAt("app", c.stream, 0, clientMsg(c.id, "T", `{}`))))
		f.next++
	}
	applied := make(chan []*fsmv1.AppendResult, 1)
	go func() {
		var out []*fsmv1.AppendResult
		for _, b := range batches {
			res := member[*fsmv1.AppendResult](s.ApplyBatch(b)[0])
			out = append(out, res)
		}
		applied <- out
	}()
	var got []*fsmv1.AppendResult
	select {
	case got = <-applied:
	case <-time.After(30 * time.Second):
		open() // let the hung apply finish before the store closes
		<-applied
		t.Fatal("appends waited for the id filter load")
	}
	want := []struct {
		dup   bool
		first int64
	}{{true, 7}, {false, 0}, {true, 0}} // a retry of an old id, a new id, a retry of it
	for i, w := range want {
		if got[i].GetDuplicate() != w.dup || got[i].GetFirstPosition() != w.first || got[i] == nil {
			t.Fatalf("append %d while the filter loads: %+v, want duplicate=%v at %d", i, got[i], w.dup, w.first)
		}
	}
	ns := s.mu.namespaces["app"]
	if ns.idf != nil || ns.idfLoad == nil {
		t.Fatalf("filter %v, load %v: want the load still running", ns.idf != nil, ns.idfLoad != nil)
	}

	open()
	load := ns.idfLoad
	testutil.Eventually(t, 30*time.Second, "the id filter load to finish", func() bool {
		select {
		case <-load.done:
			return true
		default:
			return false
		}
	})
	// The next lookup adopts the filter; it must hold the id committed
	// during the load (uid(n)), or the retry would be appended again.
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-2", 0, clientMsg(uid(n), "T", `{}`)))); !r.GetDuplicate() || r.GetFirstPosition() != 0 {
		t.Fatalf("retry of an id committed during the load, after adoption: %+v", r)
	}
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 0, clientMsg(uid(3), "T", `{}`)))); !r.GetDuplicate() || r.GetFirstPosition() != 3 {
		t.Fatalf("retry of an id loaded by the filter: %+v", r)
	}
	if ns.idf == nil || ns.idfLoad != nil {
		t.Fatalf("filter %v, load %v: want the filter adopted", ns.idf != nil, ns.idfLoad != nil)
	}
}

// Closing a namespace while its id filter loads cancels the load (its
// iterator must close before the database does).
func TestIDFilterLoadCancelledByClose(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNSWindow("app", int64(time.Hour)))
	for i := range 100 {
		f.must(appendAt("app", "s-1", 0, clientMsg(uid(i), "T", `{}`)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	next := f.next
	s = openTestStore(t, fs)
	started := make(chan struct{})
	s.idfLoadBefore = func() { close(started) }
	f = newFeeder(t, s)
	f.next = next
	f.must(appendAt("app", "s-1", 0, clientMsg(uid(1000), "T", `{}`)))
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no id filter load started")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close while the id filter loads: %v", err)
	}
	s = openTestStore(t, fs)
	f = newFeeder(t, s)
	f.next = next + 1
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 0, clientMsg(uid(1000), "T", `{}`)))); !r.GetDuplicate() || r.GetFirstPosition() != 100 {
		t.Fatalf("retry after reopening: %+v", r)
	}
}
