package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestStorageErrorStopsApply injects a WAL write failure into a namespace
// database: apply must panic (the node stops) rather than skip the entry,
// and after a restart on healthy storage the entry applies normally.
func TestStorageErrorStopsApply(t *testing.T) {
	t.Parallel()
	mem := vfs.NewCrashableMem()
	var armed atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.Contains(op.Path, "/ns/") && strings.HasSuffix(op.Path, ".log") {
			return errorfs.ErrInjected
		}
		return nil
	}))
	s, err := Open(Options{Dir: "/data/fsm", FS: fs, SyncApply: true})
	if err != nil {
		t.Fatal(err)
	}
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "s-1", newMsg("T", `{}`)))

	armed.Store(true)
	panicked := func() (p any) {
		defer func() { p = recover() }()
		f.apply(appendCmd("app", "s-1", newMsg("T", `{}`)))
		return nil
	}()
	// Pebble treats a failed WAL write as fatal and calls Logger.Fatalf,
	// which panics; a failure Pebble returns instead panics in apply.
	if panicked == nil || !strings.Contains(fmt.Sprint(panicked), errorfs.ErrInjected.Error()) {
		t.Fatalf("apply with a failing disk returned instead of stopping (panic: %v)", panicked)
	}
	// The process would exit here. A process crash keeps everything the OS
	// was given; restart on healthy storage.
	r := openTestStore(t, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))}))
	if r.AppliedIndex() != 1 {
		t.Fatalf("applied index %d after restart", r.AppliedIndex())
	}
	ns, err := r.acquire("app")
	if err != nil {
		t.Fatal(err)
	}
	applied := ns.applied.index
	r.release(ns)
	if applied != 2 {
		t.Fatalf("namespace applied index %d: the failed entry 3 must not count as applied", applied)
	}
	res := r.ApplyBatch(commandEntries(t, 3, appendCmd("app", "s-1", newMsg("T", `{}`))))
	if a, ok := memberOK[*fsmv1.AppendResult](res[0]); !ok || a.FirstPosition != 1 {
		t.Fatalf("re-delivered entry after restart: %v", res[0])
	}
}
