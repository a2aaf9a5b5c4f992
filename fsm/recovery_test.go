package fsm

import (
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// randomLog returns n random log entries (from index 1): namespace
// creates, appends with and without (sometimes wrong) expected versions,
// and, when churn is set, imports, deletes and re-creates, node info and
// configuration entries.
func randomLog(t testing.TB, rng *rand.Rand, n int, churn bool) []Entry {
	t.Helper()
	nss := []string{"a", "b", "c"}
	logs := make([]Entry, 0, n)
	add := func(c *fsmv1.Command) {
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, Entry{Index: uint64(len(logs) + 1), Term: 1 + uint64(len(logs)/50), Data: data})
	}
	for _, ns := range nss {
		add(createNS(ns))
	}
	gp := int64(1_000_000)
	now := testTime
	var sent []*fsmv1.Command // appends with client-given ids
	for len(logs) < n {
		ns := nss[rng.Intn(len(nss))]
		stream := fmt.Sprintf("%s-%d", []string{"acct", "order", "wf"}[rng.Intn(3)], rng.Intn(8))
		r := rng.Intn(100)
		switch {
		case churn && r < 3:
			add(deleteNS(ns))
			add(createNS(ns))
		case churn && r < 6:
			gp += int64(rng.Intn(3) + 1)
			add(importCmd(ns, false, rec(stream, 1000+gp, gp, "Imported")))
		case churn && r < 8:
			add(nodeInfo(fmt.Sprintf("node-%d", rng.Intn(3)), fmt.Sprintf("127.0.0.1:%d", 8000+rng.Intn(100))))
		case churn && r < 9:
			logs = append(logs, Entry{Index: uint64(len(logs) + 1), Term: 1, Kind: EntryConfiguration, Data: []byte(fmt.Sprintf("cfg-%d", len(logs)))})
		case churn && r < 11:
			add(truncateCmd(ns, stream, int64(rng.Intn(4))))
		case churn && r < 12:
			add(deleteStreamCmd(ns, stream, rng.Intn(4) == 0))
		case churn && r < 13:
			var types []string
			if rng.Intn(2) == 0 {
				types = []string{"Moved"}
			}
			add(watermarkCmd(ns, Category(stream), types, stream, rng.Intn(5)))
		case churn && r < 14:
			scope := fsmv1.RetentionScope(1 + rng.Intn(3))
			name := map[fsmv1.RetentionScope]string{1: "", 2: Category(stream), 3: stream}[scope]
			add(policyCmd(ns, scope, name, time.Duration(rng.Intn(4))*20*time.Second, int64(rng.Intn(6))))
		case churn && r < 16:
			add(expireCmd(ns, now, int64(rng.Intn(2)*3)))
		case len(sent) > 0 && r < 20:
			// A client retry (idempotent writes) of an earlier append, now
			// and then changed (a content clash, a mixed batch).
			c := proto.Clone(sent[rng.Intn(len(sent))]).(*fsmv1.Command)
			a := c.GetAppend()
			a.TimeUnixNano = now
			switch rng.Intn(5) {
			case 0:
				a.Messages[0].Data = []byte(`{"changed":true}`)
			case 1:
				m := newMsg("Extra", `{}`)
				m.ClientId = true
				a.Messages = append(a.Messages, m)
			}
			add(c)
		default:
			// Entry time moves about a second per append and now and then
			// back (a new leader's clock), so ids expire from the 2-minute
			// window at different points of the log.
			now += int64(rng.Intn(2000)) * int64(time.Millisecond)
			if rng.Intn(40) == 0 {
				now -= int64(30 * time.Second)
			}
			client := rng.Intn(2) == 0
			msgs := make([]*fsmv1.NewMessage, 1+rng.Intn(3))
			for i := range msgs {
				msgs[i] = newMsg([]string{"Opened", "Moved", "Closed"}[rng.Intn(3)], fmt.Sprintf(`{"v":%d}`, rng.Intn(1000)))
				msgs[i].ClientId = client
				if rng.Intn(4) == 0 {
					msgs[i].Metadata = []byte(`{"correlationStreamName":"wf-1"}`)
				}
				if rng.Intn(2) == 0 {
					msgs[i].Tags = []string{fmt.Sprintf("k:%d", rng.Intn(4)), "all"}[:1+rng.Intn(2)]
				}
			}
			// Now and then a condition (DCB) on a tag, maybe past the head.
			var cond *fsmv1.AppendCondition
			if rng.Intn(4) == 0 {
				cond = &fsmv1.AppendCondition{After: int64(rng.Intn(200)), FailIfEventsMatch: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Tags: []string{fmt.Sprintf("k:%d", rng.Intn(4))}}}}}
			}
			var c *fsmv1.Command
			if rng.Intn(8) == 0 {
				// Two streams at once, each maybe with an expected version.
				other := fmt.Sprintf("%s-%d", []string{"acct", "order", "wf"}[rng.Intn(3)], 8+rng.Intn(4))
				var exp *int64
				if rng.Intn(2) == 0 {
					exp = proto.Int64(int64(rng.Intn(4)) - 1)
				}
				c = multiCmd(ns, streamPart(stream, nil, msgs...), streamPart(other, exp, newMsg("Multi", `{}`)))
				c.GetAppendMulti().TimeUnixNano = now
				c.GetAppendMulti().Condition = cond
				add(c)
				continue
			}
			if rng.Intn(3) == 0 {
				c = appendExpect(ns, stream, int64(rng.Intn(6))-1, msgs...)
			} else {
				c = appendCmd(ns, stream, msgs...)
			}
			c.GetAppend().TimeUnixNano = now
			c.GetAppend().Condition = cond
			if client {
				sent = append(sent, c)
			}
			add(c)
		}
	}
	return logs[:n]
}

// applyInBatches applies logs in random-sized ApplyBatch calls and returns
// the results.
func applyInBatches(s *Store, rng *rand.Rand, logs []Entry) []any {
	var out []any
	for len(logs) > 0 {
		k := min(len(logs), 1+rng.Intn(64))
		out = append(out, s.ApplyBatch(logs[:k])...)
		logs = logs[k:]
	}
	return out
}

func TestDeterminism(t *testing.T) {
	t.Parallel()
	expired := 0 // expiry entries that removed something, over every seed
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			logs := randomLog(t, rand.New(rand.NewSource(seed)), 1500, true)
			// The same log, cut into different batches, on two stores.
			a := openTestStore(t, nil)
			b := openTestStore(t, nil, func(o *Options) { o.MaxOpenNamespaces = 1 })
			ra := applyInBatches(a, rand.New(rand.NewSource(seed*10)), logs)
			rb := applyInBatches(b, rand.New(rand.NewSource(seed*10+1)), logs)
			if !sameAnswers(ra, rb) {
				for i := range ra {
					if !sameAnswer(ra[i], rb[i]) {
						t.Fatalf("entry %d: results differ: %#v vs %#v", i+1, ra[i], rb[i])
					}
				}
			}
			ha, hb := contentHash(t, a), contentHash(t, b)
			if ha != hb {
				t.Fatalf("content differs: %s vs %s", ha, hb)
			}
			// The log exercised what it should.
			kinds := map[string]int{}
			for _, r := range ra {
				kinds[answerKind(r)]++
				if ar, ok := memberOK[*fsmv1.AppendResult](r); ok && ar.Duplicate {
					kinds["duplicate"]++
				}
				if er, ok := memberOK[*fsmv1.ExpiryResult](r); ok && er.MessagesDeleted > 0 {
					expired++
				}
			}
			for _, k := range []string{"append_multi", "*fsm.VersionConflictsError", "duplicate", "*fsm.DuplicateIDError", "append", "*fsm.VersionConflictError", "delete_namespace", "import", "set_node_info", "retention_policy", "expiry"} {
				if kinds[k] == 0 {
					t.Fatalf("log produced no %s: %v", k, kinds)
				}
			}
		})
	}
	if expired == 0 {
		t.Fatal("no expiry entry of any log removed a message")
	}
}

func TestReplaySkipsApplied(t *testing.T) {
	t.Parallel()
	cmds := []*fsmv1.Command{createNS("app")}
	for i := 0; i < 150; i++ {
		cmds = append(cmds, appendCmd("app", fmt.Sprintf("s-%d", i%7), newMsg("T", fmt.Sprintf(`{"i":%d}`, i))))
	}
	logs := commandEntries(t, 1, cmds...) // indexes 1..151, 150 messages

	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	s.ApplyBatch(logs[:100])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, fs)
	if s.AppliedIndex() != 1 {
		// Only _metadata's A is global; namespace A records are per database.
		t.Fatalf("reopened applied index %d, want 1 (the create)", s.AppliedIndex())
	}
	// Raft re-delivers from its last snapshot: entries 50.. again.
	res := s.ApplyBatch(logs[49:])
	for i, r := range res[:51] { // indexes 50..100 were applied before
		if r != nil {
			t.Fatalf("re-delivered entry %d applied again: %v", 50+i, r)
		}
	}
	v := view(t, s, "app")
	all, err := v.ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 150 {
		t.Fatalf("%d messages after replay, want 150", len(all))
	}
	perStream := map[string][]int64{}
	for i, m := range all {
		if m.GlobalPosition != int64(i+1) {
			t.Fatalf("global positions not 1..150: %d at %d", m.GlobalPosition, i)
		}
		perStream[m.Stream] = append(perStream[m.Stream], m.Position)
	}
	for stream, pos := range perStream {
		for i, p := range pos {
			if p != int64(i) {
				t.Fatalf("stream %s positions %v", stream, pos)
			}
		}
	}
	if st, _ := v.Stats(); st.MessageCount != 150 || st.StreamCount != 7 {
		t.Fatalf("counters after replay %+v", st)
	}
	ref := openTestStore(t, nil)
	ref.ApplyBatch(logs)
	if contentHash(t, ref) != contentHash(t, s) {
		t.Fatal("replayed store differs from a store that applied the log once")
	}
}

// TestCrashRecovery simulates power loss with Pebble's crashable in-memory
// FS: only synced data survives (plus a random share of unsynced data).
// The reopened store must be a consistent prefix (per namespace: exactly
// the entries up to its A index, counters matching content) holding at
// least the durable floor, and replay from the floor must restore
// everything.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		seed     int64
		unsynced int
	}{{1, 0}, {2, 30}, {3, 70}, {4, 100}} {
		t.Run(fmt.Sprintf("seed%d_unsynced%d", c.seed, c.unsynced), func(t *testing.T) {
			rng := rand.New(rand.NewSource(c.seed))
			logs := randomLog(t, rng, 600, false)
			const floorAt = 250

			fs := vfs.NewCrashableMem()
			s := openTestStore(t, fs)
			applyInBatches(s, rng, logs[:floorAt])
			floor, err := s.SyncFloor()
			if err != nil || floor.Index != floorAt {
				t.Fatalf("SyncFloor = %+v, %v", floor, err)
			}
			applyInBatches(s, rng, logs[floorAt:])

			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.unsynced, RNG: randv2.New(randv2.NewPCG(uint64(c.seed), 0))})
			r := openTestStore(t, crashed)
			if got, err := r.Floor(); err != nil || got.Index != floorAt {
				t.Fatalf("floor after crash %+v, %v", got, err)
			}

			// Reference: the whole log applied once; AppendResults tell
			// which entry wrote which global positions.
			ref := openTestStore(t, nil)
			results := ref.ApplyBatch(logs)
			for _, info := range r.Namespaces() {
				checkPrefix(t, r, ref, info.Name, results, floorAt)
			}

			// Raft replays from the floor.
			applyInBatches(r, rng, logs[floorAt:])
			if contentHash(t, r) != contentHash(t, ref) {
				t.Fatal("store after crash and replay differs from the reference")
			}
		})
	}
}

// checkPrefix asserts that namespace ns of the crashed store holds exactly
// what the reference holds from entries at or below its A index, with
// counters that match its content.
func checkPrefix(t *testing.T, crashed, ref *Store, ns string, results []any, floor uint64) {
	t.Helper()
	h, err := crashed.acquire(ns)
	if err != nil {
		t.Fatal(err)
	}
	applied := h.applied.index
	crashed.release(h)
	if applied < floor {
		// Every namespace in this log is written to often; below the
		// floor would mean the floor lied.
		lastWrite := uint64(0)
		for _, r := range results {
			if w, ok := writeOf(r); ok && w.ns == ns && w.index <= floor {
				lastWrite = max(lastWrite, w.index)
			}
		}
		if applied < lastWrite {
			t.Fatalf("namespace %s: applied %d below its last write %d under the floor %d", ns, applied, lastWrite, floor)
		}
	}
	var want []int64
	for _, r := range results {
		if w, ok := writeOf(r); ok && w.ns == ns && w.index <= applied {
			want = append(want, span(w.first, w.last)...)
		}
	}
	got, err := view(t, crashed, ns).ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gpsOf(got), append([]int64{}, want...)) {
		t.Fatalf("namespace %s at A=%d holds %v, want %v", ns, applied, gpsOf(got), want)
	}
	refAll, _ := view(t, ref, ns).ReadAll(1, int(len(want)))
	if !reflect.DeepEqual(got, refAll[:len(got)]) {
		t.Fatalf("namespace %s: messages differ from the reference", ns)
	}
	streams := map[string]int64{}
	for _, m := range got {
		streams[m.Stream]++
	}
	st, _ := view(t, crashed, ns).Stats()
	if st.MessageCount != int64(len(got)) || st.StreamCount != int64(len(streams)) {
		t.Fatalf("namespace %s: counters %+v for %d messages in %d streams", ns, st, len(got), len(streams))
	}
	for stream, n := range streams {
		if ver, _ := view(t, crashed, ns).StreamVersion(stream); ver != n-1 {
			t.Fatalf("namespace %s stream %s: version %d with %d messages", ns, stream, ver, n)
		}
	}
}

type written struct {
	ns          string
	index       uint64
	first, last int64
}

// writeOf is what an entry's result wrote: the global positions of an
// append or an AppendMulti, and nothing for a duplicate (an idempotent
// retry) or anything else.
func writeOf(r any) (written, bool) {
	res, _ := r.(*fsmv1.Result)
	if a := res.GetAppend(); a != nil {
		return written{a.Namespace, res.Index, a.FirstGlobalPosition, a.LastGlobalPosition}, !a.Duplicate
	}
	if a := res.GetAppendMulti(); a != nil {
		return written{a.Namespace, res.Index, a.FirstGlobalPosition, a.LastGlobalPosition}, !a.Duplicate
	}
	return written{}, false
}
