package fsm

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
)

const faultWait = 30 * time.Second

// faults injects an operating-system error into the file operations its
// current rule selects; no rule, no fault.
type faults struct {
	mu   sync.Mutex
	rule func(op errorfs.Op) syscall.Errno // 0: let op through
	hits int
}

func (f *faults) set(rule func(op errorfs.Op) syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule, f.hits = rule, 0
}

func (f *faults) injector() errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.rule == nil {
			return nil
		}
		if errno := f.rule(op); errno != 0 {
			f.hits++
			return &os.PathError{Op: "injected", Path: op.Path, Err: errno}
		}
		return nil
	})
}

func (f *faults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// underNS selects the operations on namespace id's directory (its
// creation included).
func underNS(id uint64, kinds ...errorfs.OpKind) func(errorfs.Op) bool {
	dir := "/ns/" + dirName(id)
	return func(op errorfs.Op) bool {
		if !strings.Contains(op.Path, dir) {
			return false
		}
		for _, k := range kinds {
			if op.Kind == k {
				return true
			}
		}
		return len(kinds) == 0
	}
}

// applyAsync runs ApplyBatch in a goroutine; the channel delivers its
// results.
func applyAsync(s *Store, entries []Entry) <-chan []any {
	done := make(chan []any, 1)
	go func() { done <- s.ApplyBatch(entries) }()
	return done
}

func results(t *testing.T, done <-chan []any) []any {
	t.Helper()
	select {
	case out := <-done:
		return out
	case <-time.After(faultWait):
		t.Fatal("ApplyBatch did not return")
		return nil
	}
}

// TestApplyWaitsOutResourceErrors: a resource error inside apply (no file
// descriptor, a full disk; while a namespace's database opens, while apply
// reads one, while Pebble writes its WAL) makes the node wait, report the
// stall and retry; once the resource is back the call completes by itself,
// with the results and the stored bytes of a store that never failed, each
// entry applied once. The call commits part way (the import commits the
// append before it) before the failure, so the retry must skip what it
// committed and keep those results.
func TestApplyWaitsOutResourceErrors(t *testing.T) {
	t.Parallel()
	// Namespace "a" exists and holds tables on disk; the call appends to
	// it, imports into it (a commit part way), creates "b" (at index
	// newID) and writes to both.
	const newID = 6
	prefix := []*fsmv1.Command{createNS("a"), appendCmd("a", "s-1", newMsg("T", `{"i":1}`)), appendCmd("a", "s-2", newMsg("T", `{"i":2}`))}
	call := []*fsmv1.Command{
		appendCmd("a", "s-1", newMsg("T", `{"i":3}`)),
		importCmd("a", false, rec("imp-1", 0, 100, "Imported")),
		createNS("b"),
		appendCmd("b", "s-1", newMsg("T", `{"i":4}`)),
		appendCmd("a", "s-3", newMsg("T", `{"i":5}`)),
	}
	prefixEntries := commandEntries(t, 1, prefix...)
	entries := commandEntries(t, uint64(len(prefix))+1, call...)
	if entries[2].Index != newID {
		t.Fatalf("b's create is entry %d, not %d", entries[2].Index, newID)
	}

	// What a store that never failed computes.
	clean := openTestStore(t, nil, func(o *Options) { o.SyncApply = true })
	clean.ApplyBatch(prefixEntries)
	want := clean.ApplyBatch(entries)
	wantHash := contentHash(t, clean)

	cases := []struct {
		name  string
		errno syscall.Errno
		on    func(errorfs.Op) bool
	}{
		{"no file descriptor opening a new namespace", syscall.EMFILE, underNS(newID)},
		{"disk full creating a new namespace's files", syscall.ENOSPC, underNS(newID, errorfs.OpCreate, errorfs.OpFileWrite)},
		// Pebble's Open calls Logger.Fatalf when it cannot move a new
		// database's MANIFEST marker: a resource error there must stall
		// like any other, not stop the node.
		{"no file descriptor moving a new namespace's MANIFEST marker", syscall.EMFILE, func(op errorfs.Op) bool {
			return underNS(newID, errorfs.OpCreate)(op) && strings.Contains(op.Path, "marker.manifest")
		}},
		{"no file descriptor reading a namespace's tables", syscall.EMFILE, func(op errorfs.Op) bool {
			return underNS(1, errorfs.OpOpen)(op) && strings.HasSuffix(op.Path, ".sst")
		}},
		{"disk full writing a namespace's WAL", syscall.ENOSPC, func(op errorfs.Op) bool {
			return underNS(1, errorfs.OpFileWrite)(op) && strings.HasSuffix(op.Path, ".log")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f faults
			fs := errorfs.Wrap(vfs.NewMem(), f.injector())
			s := openTestStore(t, fs, func(o *Options) { o.SyncApply = true })
			s.ApplyBatch(prefixEntries)
			// Flush a's memtable into a table and reopen the store, so that
			// apply reads a's state from a table file again.
			ns, err := s.acquire("a")
			if err != nil {
				t.Fatal(err)
			}
			if err := ns.db.Flush(); err != nil {
				t.Fatal(err)
			}
			s.release(ns)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTestStore(t, fs, func(o *Options) { o.SyncApply = true })

			f.set(func(op errorfs.Op) syscall.Errno {
				if tc.on(op) {
					return tc.errno
				}
				return 0
			})
			done := applyAsync(s, entries)
			testutil.Until(t, faultWait, "apply to report the stall", func() (bool, string) {
				st, ok := s.Stall()
				return ok && errors.Is(st.Err, tc.errno), fmt.Sprintf("stall %+v %v, %d faults injected", st, ok, f.count())
			})
			select {
			case out := <-done:
				t.Fatalf("ApplyBatch returned while the resource was missing: %v", out)
			default:
			}
			f.set(nil) // the resource is back
			got := results(t, done)
			if !sameAnswers(got, want) {
				t.Fatalf("results after the wait:\n got %s\nwant %s", describe(got), describe(want))
			}
			if h := contentHash(t, s); h != wantHash {
				t.Fatal("stored state differs from the store that never failed")
			}
			if st, ok := s.Stall(); ok {
				t.Fatalf("still stalled after resuming: %+v", st)
			}
			if s.AppliedIndex() != entries[len(entries)-1].Index {
				t.Fatalf("applied index %d", s.AppliedIndex())
			}
			if s.Stalls() != 1 {
				t.Fatalf("%d stalls counted, want 1", s.Stalls())
			}
		})
	}
}

func describe(results []any) string {
	var b strings.Builder
	for _, r := range results {
		if v := reflect.ValueOf(r); v.Kind() == reflect.Pointer && !v.IsNil() {
			fmt.Fprintf(&b, "%+v ", v.Elem().Interface())
		} else {
			fmt.Fprintf(&b, "%v ", r)
		}
	}
	return b.String()
}

// TestApplyInterruptedWhileWaiting: Interrupt (the node shutting down) ends
// a wait that would otherwise last as long as the resource is missing:
// the call answers ErrInterrupted for every entry and applies none, the
// store refuses to apply more or to raise its durable floor (Raft counts
// those entries as applied), and closes. On the next start the entries
// apply normally.
func TestApplyInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	var f faults
	fs := errorfs.Wrap(vfs.NewMem(), f.injector())
	s, err := Open(Options{Dir: "/data/fsm", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	fd := newFeeder(t, s)
	fd.must(createNS("a"))
	entries := commandEntries(t, 2, appendCmd("a", "s-1", newMsg("T", `{}`)), createNS("b"), appendCmd("b", "s-1", newMsg("T", `{}`)))
	f.set(func(op errorfs.Op) syscall.Errno {
		if underNS(3)(op) {
			return syscall.EMFILE
		}
		return 0
	})
	done := applyAsync(s, entries)
	testutil.Eventually(t, faultWait, "apply to stall", func() bool { _, ok := s.Stall(); return ok })
	s.Interrupt()
	for i, r := range results(t, done) {
		if !errors.Is(r.(error), ErrInterrupted) {
			t.Fatalf("entry %d: %v, want ErrInterrupted", i, r)
		}
	}
	if !s.Interrupted() || s.AppliedIndex() != 1 {
		t.Fatalf("interrupted %t, applied index %d, want true and 1", s.Interrupted(), s.AppliedIndex())
	}
	if err := s.RecordFloor(SnapshotMeta{Index: 4, Term: 1}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RecordFloor after an interrupted apply: %v", err)
	}
	if r := s.ApplyBatch(commandEntries(t, 5, appendCmd("a", "s-1", newMsg("T", `{}`)))); !errors.Is(r[0].(error), ErrInterrupted) {
		t.Fatalf("apply after an interrupted apply: %v", r[0])
	}
	if _, ok := s.Namespace("b"); ok {
		t.Fatal("namespace b exists after its create was interrupted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	f.set(nil)
	r := openTestStore(t, fs)
	if r.AppliedIndex() != 1 {
		t.Fatalf("applied index %d after restart", r.AppliedIndex())
	}
	out := r.ApplyBatch(entries)
	if a, ok := memberOK[*fsmv1.AppendResult](out[2]); !ok || a.Namespace != "b" || a.FirstGlobalPosition != 1 {
		t.Fatalf("entries replayed after the restart: %s", describe(out))
	}
	if a, ok := memberOK[*fsmv1.AppendResult](out[0]); !ok || a.FirstPosition != 0 {
		t.Fatalf("entries replayed after the restart: %s", describe(out))
	}
}

// TestApplyRetryOnlyWholeEntries: a resource error is retried only when no
// part of the failing entry is committed. A stream truncation commits what
// earlier entries staged before it walks the stream: a failure after that
// commit is retried, with the results of a store that never failed; so is
// a retention policy set after an append in the same call, whose walk of
// the category commits the append before the policy stages anything. An
// expiry commits after its count pass (expiry.go, counts): a failure
// after that commit finds its effects half in the database without its A
// record, so applying it again could differ, and the node stops.
func TestApplyRetryOnlyWholeEntries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		last   []*fsmv1.Command
		failAt int // the commit after which the storage error comes
		stops  bool
	}{
		{"failure after a commit of earlier entries", []*fsmv1.Command{truncateCmd("a", "c-1", 1)}, 1, false},
		{"failure after a policy's walk", []*fsmv1.Command{policyCmd("a", scopeCat, "c", 0, 1)}, 1, false},
		// 1: the policy's walk, 2: the expiry's commit of what came
		// before it, 3: after its count pass removed a message.
		{"failure after a commit of part of the entry", []*fsmv1.Command{policyCmd("a", scopeCat, "c", 0, 1), expireCmd("a", testTime, 0)}, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmds := append([]*fsmv1.Command{createNS("a"), appendCmd("a", "c-1", newMsg("T", `{}`), newMsg("T", `{}`))}, tc.last...)
			entries := commandEntries(t, 1, cmds...)
			want := openTestStore(t, nil).ApplyBatch(entries)

			// Not closed: a store whose apply panicked is abandoned, as the
			// process would be.
			s, err := Open(Options{Dir: "/data/fsm", FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			flushes := 0
			s.afterFlush = func() {
				if flushes++; flushes == tc.failAt {
					panic(&storageError{what: "walk", cause: &os.PathError{Op: "open", Path: "000004.sst", Err: syscall.EMFILE}})
				}
			}
			var got []any
			stopped := func() (p any) {
				defer func() { p = recover() }()
				got = s.ApplyBatch(entries)
				return nil
			}()
			if tc.stops {
				if err, ok := stopped.(error); !ok || !errors.Is(err, syscall.EMFILE) {
					t.Fatalf("apply went on after a storage error in a half-committed entry (panic: %v)", stopped)
				}
				return
			}
			if stopped != nil {
				t.Fatalf("apply stopped: %v", stopped)
			}
			if !sameAnswers(got, want) {
				t.Fatalf("results after the retry:\n got %s\nwant %s", describe(got), describe(want))
			}
		})
	}
}
