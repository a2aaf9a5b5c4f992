package fsm

import (
	randv2 "math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// A retention entry commits inside itself (a policy's walk of its scope,
// an expiry between its walks), before its applied index is stored with
// its last commit. A node that crashes after such a commit replays the
// entry from the log, and the replay must leave exactly what a node that
// never crashed holds.
func TestRetentionCrashMidEntry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		why  string
		// setup is applied and made durable; crashing is applied in one
		// call that crashes after its crashAt-th commit, then replayed
		// with after.
		setup, crashing, after []*fsmv1.Command
		crashAt                int
	}{{
		// Before, the first commit carried the policy itself, so the
		// replay found it already set, skipped queueing the category's
		// streams, and that replica kept messages past the count limit
		// that every other replica removed.
		name: "policy",
		setup: []*fsmv1.Command{
			createNS("a"),
			appendCmd("a", "c-1", newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`)),
			appendCmd("a", "c-2", newMsg("T", `{}`), newMsg("T", `{}`)),
		},
		// A write, then the policy, in one apply call: the policy's walk
		// of the category commits the write first.
		crashing: []*fsmv1.Command{
			appendCmd("a", "c-2", newMsg("T", `{}`)),
			policyCmd("a", scopeCat, "c", 0, 1),
		},
		after:   []*fsmv1.Command{expireCmd("a", testTime, 0)},
		crashAt: 1,
	}, {
		// Before, the replay started its bound afresh: the messages the
		// first run removed were gone, so it spent the bound on the next
		// queued stream, which every other replica kept queued; relaxing
		// the policy then left that stream trimmed on this replica only.
		name: "expiry with a bound",
		setup: []*fsmv1.Command{
			createNS("a"),
			appendCmd("a", "c-1", newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`)),
			appendCmd("a", "c-2", newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`), newMsg("T", `{}`)),
			policyCmd("a", scopeCat, "c", 0, 1),
		},
		// Bound 5: c-1 loses 4 and is visited, which spends it; c-2
		// stays queued. The crash comes after the count pass's commit.
		crashing: []*fsmv1.Command{expireCmd("a", testTime, 5)},
		after: []*fsmv1.Command{
			policyCmd("a", scopeCat, "c", 0, 0),
			expireCmd("a", testTime, 0),
		},
		crashAt: 2,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all := commandEntries(t, 1, append(append(append([]*fsmv1.Command{}, tc.setup...), tc.crashing...), tc.after...)...)
			setupEntries := all[:len(tc.setup)]
			crashEntries := all[len(tc.setup) : len(tc.setup)+len(tc.crashing)]
			afterEntries := all[len(tc.setup)+len(tc.crashing):]

			ref := openTestStore(t, nil)
			ref.ApplyBatch(all)

			fs := vfs.NewCrashableMem()
			// Not closed: a store whose apply panicked is abandoned, as
			// the process would be. SyncApply: each commit reaches the
			// file system before the crash (without it Pebble may still
			// hold it in its WAL buffer).
			s, err := Open(Options{Dir: "/data/fsm", FS: fs, SyncApply: true})
			if err != nil {
				t.Fatal(err)
			}
			s.ApplyBatch(setupEntries)
			if _, err := s.SyncFloor(); err != nil { // the setup is durable
				t.Fatal(err)
			}
			flushes := 0
			s.afterFlush = func() {
				if flushes++; flushes == tc.crashAt {
					panic("crash")
				}
			}
			crashed := func() (p any) {
				defer func() { p = recover() }()
				s.ApplyBatch(crashEntries)
				return nil
			}()
			if crashed == nil {
				t.Fatalf("the entries made %d commits, none the %dth to crash after; the test sees nothing", flushes, tc.crashAt)
			}

			// Everything written survives (the worst case for a replay);
			// Raft replays the log from the store's floor.
			r := openTestStore(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: randv2.New(randv2.NewPCG(1, 0))}))
			r.ApplyBatch(crashEntries)
			r.ApplyBatch(afterEntries)
			if got, want := contentHash(t, r), contentHash(t, ref); got != want {
				t.Fatalf("after a crash inside the entry and its replay, the store differs from one that never crashed:\n got %v\nwant %v",
					describeStreams(t, r), describeStreams(t, ref))
			}
		})
	}
}

// describeStreams lists namespace a's streams with their message counts.
func describeStreams(t *testing.T, s *Store) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, stream := range []string{"c-1", "c-2"} {
		msgs, err := view(t, s, "a").ReadStream(StreamQuery{Stream: stream, Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		out[stream] = len(msgs)
	}
	return out
}
