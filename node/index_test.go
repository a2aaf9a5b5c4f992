package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// amountIndex indexes category "acct" by data /amount (int).
func amountIndex(ns string) *fsmv1.CreateIndex {
	return &fsmv1.CreateIndex{Namespace: ns, Definition: &fsmv1.IndexDefinition{
		Name: "amount", Version: 1, Category: "acct",
		Fields: []*fsmv1.IndexField{{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/amount", Type: fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT}},
	}}
}

// latestIndex is amountIndex's stream kind: each acct stream's latest
// amount.
func latestIndex(ns string) *fsmv1.CreateIndex {
	c := amountIndex(ns)
	c.Definition.Name, c.Definition.Kind = "latest", fsmv1.IndexKind_INDEX_KIND_STREAM
	return c
}

var amountIDs atomic.Int64

// appendAmount appends one message through n, again with the same id
// (remembered by the namespace: written once) while the outcome is
// unknown or no leader is known: a loaded host loses leaders.
func appendAmount(t *testing.T, n *Node, ns, stream string, amount any) *fsmv1.Result {
	t.Helper()
	return appendTyped(t, n, ns, stream, "T", amount)
}

// appendTyped is appendAmount with a message type.
func appendTyped(t *testing.T, n *Node, ns, stream, typ string, amount any) *fsmv1.Result {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"amount": amount})
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", amountIDs.Add(1))
	var (
		res *fsmv1.Result
		err error
	)
	testutil.Eventually(t, waitTimeout, "an append to "+stream, func() bool {
		res, err = (n.Append(ctxT(t), &fsmv1.Append{Namespace: ns, Stream: stream,
			Messages: []*fsmv1.NewMessage{{Id: id, ClientId: true, Type: typ, Data: data}}}))
		return err == nil || !(errors.Is(err, nodeapi.ErrUnknownOutcome) || errors.Is(err, nodeapi.ErrNoLeader))
	})
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// indexedOn reads the whole index "amount" on n at LOCAL: global
// position -> amount.
func indexedOn(t *testing.T, n *Node, ns string) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	var cursor []byte
	for {
		var page fsm.IndexPage
		_, err := n.ReadIndexed(ctxT(t), ns, "", nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
			page, err = v.QueryIndex(fsm.IndexQuery{Index: "amount", Limit: 1000, Cursor: cursor, PositionsOnly: true})
			return err
		})
		if err != nil {
			t.Fatalf("query on %s: %v", n.ID(), err)
		}
		for _, h := range page.Hits {
			out[h.GlobalPosition] = h.Values[0].(int64)
		}
		if cursor = page.NextCursor; cursor == nil {
			return out
		}
	}
}

// latestOn reads the whole stream index "latest" on n at LOCAL: stream
// -> global position of its entry.
func latestOn(t *testing.T, n *Node, ns string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	var cursor []byte
	for {
		var page fsm.IndexPage
		_, err := n.ReadIndexed(ctxT(t), ns, "", nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
			page, err = v.QueryIndex(fsm.IndexQuery{Index: "latest", Limit: 1000, Cursor: cursor, PositionsOnly: true})
			return err
		})
		if err != nil {
			t.Fatalf("query on %s: %v", n.ID(), err)
		}
		for _, h := range page.Hits {
			out[h.Stream] = h.GlobalPosition
		}
		if cursor = page.NextCursor; cursor == nil {
			return out
		}
	}
}

// modelOn computes index "amount" from n's own messages, and the stream
// index "latest" (stream -> global position of its last indexed message).
func modelOn(t *testing.T, n *Node, ns string) (map[int64]int64, map[string]int64) {
	t.Helper()
	out, latest := map[int64]int64{}, map[string]int64{}
	for _, m := range readAll(t, n, ns, nodeapi.ReadOptions{Consistency: nodeapi.Local}) {
		if fsm.Category(m.Stream) != "acct" {
			continue
		}
		var d struct {
			Amount *json.Number `json:"amount"`
		}
		if json.Unmarshal(m.Data, &d) != nil || d.Amount == nil {
			continue
		}
		if v, err := d.Amount.Int64(); err == nil {
			out[m.GlobalPosition] = v
			latest[m.Stream] = m.GlobalPosition // in global order: the last wins
		}
	}
	return out, latest
}

// Every node's index equals the index computed from its own messages
// after appends, a truncate, a stream delete and retention, through the
// nodes' own loops; a restarted node resumes from its checkpoint.
func TestIndexEveryNodeMatchesItsLog(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RetentionInterval = 50 * time.Millisecond })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	for i := range 20 {
		appendAmount(t, l.Node, "app", fmt.Sprintf("acct-%d", i%4), i-5)
	}
	appendAmount(t, l.Node, "app", "acct-1", "not an int")
	appendAmount(t, l.Node, "app", "other-1", 7)
	// Created through a follower: forwarded to the leader.
	if _, err := c.Followers()[0].CreateIndex(ctxT(t), amountIndex("app")); err != nil {
		t.Fatalf("create index: %v", err)
	}
	if _, err := l.CreateIndex(ctxT(t), latestIndex("app")); err != nil {
		t.Fatalf("create stream index: %v", err)
	}
	for i := range 10 {
		appendAmount(t, l.Node, "app", fmt.Sprintf("acct-%d", i%4), 100+i)
	}
	if _, err := l.TruncateStream(ctxT(t), &fsmv1.TruncateStream{Namespace: "app", Stream: "acct-0", Before: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteStream(ctxT(t), &fsmv1.DeleteStream{Namespace: "app", Stream: "acct-1"}); err != nil {
		t.Fatal(err)
	}
	// acct-3's latest indexed message removed by type, an earlier one kept:
	// its stream index entry moves back.
	kept := appendAmount(t, l.Node, "app", "acct-3", 500)
	appendTyped(t, l.Node, "app", "acct-3", "Late", 501)
	if _, err := l.DeleteByWatermark(ctxT(t), &fsmv1.DeleteByWatermark{Namespace: "app", Category: "acct", Types: []string{"Late"},
		Watermarks: []*fsmv1.StreamWatermark{{Stream: "acct-3", Position: 1000}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SetRetentionPolicy(ctxT(t), &fsmv1.SetRetentionPolicy{Namespace: "app", Policy: &fsmv1.RetentionPolicy{
		Scope: fsmv1.RetentionScope_RETENTION_SCOPE_STREAM, Name: "acct-2", MaxCount: 2}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "retention to cap acct-2", func() bool {
		n := 0
		for _, m := range readAll(t, l.Node, "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}) {
			if m.Stream == "acct-2" {
				n++
			}
		}
		return n == 2
	})
	c.WaitConverged()
	check := func(step string) {
		t.Helper()
		for _, n := range c.Nodes {
			want, wantLatest := modelOn(t, n.Node, "app")
			testutil.Eventually(t, waitTimeout, step+": the indexes of "+n.ID()+" to equal its log", func() bool {
				return reflect.DeepEqual(indexedOn(t, n.Node, "app"), want) && reflect.DeepEqual(latestOn(t, n.Node, "app"), wantLatest)
			})
			if len(want) < 10 || len(wantLatest) != 3 {
				t.Fatalf("%s: the model holds only %d entries, %d streams: the test removed too much", step, len(want), len(wantLatest))
			}
			if wantLatest["acct-3"] < kept.GetAppend().FirstGlobalPosition {
				t.Fatalf("%s: acct-3's model entry is at %d, before the message kept at %d", step, wantLatest["acct-3"], kept.GetAppend().FirstGlobalPosition)
			}
		}
	}
	check("after removals")
	if got := latestOn(t, l.Node, "app")["acct-3"]; got != kept.GetAppend().FirstGlobalPosition {
		t.Fatalf("acct-3's entry is at %d, want %d: the Late message was removed", got, kept.GetAppend().FirstGlobalPosition)
	}

	// A restart resumes from the checkpoint: only new messages are read.
	f := c.Followers()[0]
	f.Stop()
	appendAmount(t, c.Leader().Node, "app", "acct-3", 999)
	f.Restart()
	c.WaitConverged()
	check("after a restart")
	if got := f.Node.store.IndexCounters().Read; got > 5 {
		t.Fatalf("the restarted node's loop read %d messages: it rebuilt instead of resuming", got)
	}

	// A rebuild: every node switches to the new definition once it has
	// built it, and it still equals the log.
	// The gate asks a server whose version is not recorded yet: the node
	// restarted above may not answer within the gate's second on a loaded
	// host, and the refusal says to retry.
	var (
		res *fsmv1.Result
		err error
	)
	testutil.Eventually(t, waitTimeout, "a rebuild past the version gate", func() bool {
		res, err = c.Leader().RebuildIndex(ctxT(t), &fsmv1.RebuildIndex{Namespace: "app", Name: "latest"})
		return !errors.Is(err, nodeapi.ErrUpgradeRequired)
	})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	for _, n := range c.Nodes {
		testutil.Eventually(t, waitTimeout, n.ID()+" to answer from the rebuilt index", func() bool {
			var info fsm.IndexInfo
			_, err := n.Node.Read(ctxT(t), "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
				info, err = v.Index("latest")
				return err
			})
			return err == nil && info.Definition.Id == res.Index && info.Rebuilding == nil
		})
	}
	check("after a rebuild")
}

// An index read at LINEARIZABLE on a follower sees a write acknowledged
// just before through the leader; at LOCAL it answers at once.
func TestIndexReadLinearizable(t *testing.T) {
	// A long interval: without the reader's kick and wait, a round would
	// come late.
	c := newCluster(t, 3, func(cfg *Config) { cfg.IndexInterval = 200 * time.Millisecond })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	if _, err := l.CreateIndex(ctxT(t), amountIndex("app")); err != nil {
		t.Fatal(err)
	}
	f := c.Followers()[0]
	for i := range 20 {
		res := appendAmount(t, l.Node, "app", "acct-1", 1000+i)
		var hits []fsm.IndexHit
		_, err := f.ReadIndexed(ctxT(t), "app", "amount", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(v *fsm.View) error {
			page, err := v.QueryIndex(fsm.IndexQuery{Index: "amount", Equal: []string{fmt.Sprint(1000 + i)}})
			hits = page.Hits
			return err
		})
		if err != nil {
			t.Fatalf("linearizable index read: %v", err)
		}
		if len(hits) != 1 || hits[0].GlobalPosition != res.GetAppend().FirstGlobalPosition {
			t.Fatalf("write %d (global position %d) acknowledged, the follower's linearizable index read finds %+v", i, res.GetAppend().FirstGlobalPosition, hits)
		}
	}
	// SESSION at the write's index, on another follower.
	res := appendAmount(t, l.Node, "app", "acct-2", 5)
	var n int
	if _, err := c.Followers()[1].ReadIndexed(ctxT(t), "app", "amount", nodeapi.ReadOptions{Consistency: nodeapi.Session, MinIndex: res.Index}, func(v *fsm.View) error {
		page, err := v.QueryIndex(fsm.IndexQuery{Index: "amount", Equal: []string{"5"}})
		n = len(page.Hits)
		return err
	}); err != nil || n != 1 {
		t.Fatalf("session index read: %d hits, %v", n, err)
	}
}

// Index definitions are refused while a server is not known to know them
// (one without a recorded version that does not answer counts as older),
// and accepted once it is.
func TestIndexGate(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.VersionInterval = -1 }) // no version is recorded
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	down := c.Followers()[0]
	down.Stop()
	_, err := l.CreateIndex(ctxT(t), amountIndex("app"))
	if !errors.Is(err, nodeapi.ErrUpgradeRequired) {
		t.Fatalf("create with a server down: %v, want ErrUpgradeRequired", err)
	}
	down.Restart()
	c.WaitConverged()
	testutil.Eventually(t, waitTimeout, "the create to be accepted with every server up", func() bool {
		_, err := c.Leader().CreateIndex(ctxT(t), amountIndex("app"))
		return err == nil
	})
	if _, err := c.Leader().CreateIndex(ctxT(t), amountIndex("app")); !errors.Is(err, fsm.ErrIndexExists) {
		t.Fatalf("second create: %v", err)
	}
	bad := amountIndex("app")
	bad.Definition.Fields[0].Pointer = "amount"
	var ve *fsm.ValidationError
	if _, err := c.Leader().CreateIndex(ctxT(t), bad); !errors.As(err, &ve) || ve.Field != "fields[0].pointer" {
		t.Fatalf("bad definition: %v", err)
	}
	if _, err := c.Leader().DeleteIndex(ctxT(t), &fsmv1.DeleteIndex{Namespace: "app", Name: "amount"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// The index series read each node's progress: summed without tenant
// labels, per namespace and index with them.
func TestIndexMetrics(t *testing.T) {
	for _, labels := range []bool{false, true} {
		t.Run(fmt.Sprintf("tenant labels %v", labels), func(t *testing.T) {
			c := newCluster(t, 1, func(cfg *Config) { cfg.MetricsTenantLabels = labels })
			l := c.Leader()
			createNamespace(t, l.Node, "app")
			for i := range 5 {
				appendAmount(t, l.Node, "app", "acct-1", i)
			}
			appendAmount(t, l.Node, "app", "acct-1", "x") // skipped
			if _, err := l.CreateIndex(ctxT(t), amountIndex("app")); err != nil {
				t.Fatal(err)
			}
			label, value := "", ""
			if labels {
				label, value = "index", "amount"
			}
			testutil.Eventually(t, waitTimeout, "the index series", func() bool {
				entries, ok1 := sampleValue(t, l.Registry, "skald_index_entries", label, value)
				skipped, ok2 := sampleValue(t, l.Registry, "skald_index_skipped_events", label, value)
				building, ok3 := sampleValue(t, l.Registry, "skald_index_building", label, value)
				progress, ok4 := sampleValue(t, l.Registry, "skald_index_build_progress", label, value)
				rebuild, ok5 := sampleValue(t, l.Registry, "skald_index_rebuild_progress", label, value)
				return ok1 && ok2 && ok3 && ok4 && ok5 && entries == 5 && skipped == 1 && building == 0 && progress == 1 && rebuild == 1
			})
			if v, _ := sampleValue(t, l.Registry, "skald_index_events_read_total", "", ""); v < 6 {
				t.Fatalf("skald_index_events_read_total = %v, want at least 6", v)
			}
			mfs, err := l.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "skald_index_entries" {
					continue
				}
				for _, m := range mf.GetMetric() {
					if named := len(m.GetLabel()) > 0; named != labels {
						t.Fatalf("skald_index_entries labels %v with tenant labels %v", m.GetLabel(), labels)
					}
				}
			}
		})
	}
}

// A string value longer than fsm.MaxIndexValueBytes is not indexed, and
// skald_index_values_too_large_total counts it (it is skipped too).
func TestIndexValuesTooLargeMetric(t *testing.T) {
	c := newCluster(t, 1, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	appendAmount(t, l.Node, "app", "acct-1", "short")
	appendAmount(t, l.Node, "app", "acct-1", strings.Repeat("x", fsm.MaxIndexValueBytes+1))
	ix := amountIndex("app")
	ix.Definition.Fields[0].Type = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING
	if _, err := l.CreateIndex(ctxT(t), ix); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the index series", func() bool {
		entries, ok1 := sampleValue(t, l.Registry, "skald_index_entries", "", "")
		skipped, ok2 := sampleValue(t, l.Registry, "skald_index_skipped_events", "", "")
		return ok1 && ok2 && entries == 1 && skipped == 1
	})
	if v, ok := sampleValue(t, l.Registry, "skald_index_values_too_large_total", "", ""); !ok || v != 1 {
		t.Fatalf("skald_index_values_too_large_total = %v (present %v), want 1", v, ok)
	}
}

// An in-memory node keeps its indexes in memory (its databases are): a
// query sees the events written, through a follower too.
func TestIndexInMemory(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.InMemory, cfg.DataDir = true, "" })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	if _, err := l.CreateIndex(ctxT(t), amountIndex("app")); err != nil {
		t.Fatal(err)
	}
	res := appendAmount(t, l.Node, "app", "acct-1", 42)
	var hits []fsm.IndexHit
	if _, err := c.Followers()[0].ReadIndexed(ctxT(t), "app", "amount", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(v *fsm.View) error {
		page, err := v.QueryIndex(fsm.IndexQuery{Index: "amount", Equal: []string{"42"}})
		hits = page.Hits
		return err
	}); err != nil || len(hits) != 1 || hits[0].GlobalPosition != res.GetAppend().FirstGlobalPosition {
		t.Fatalf("in-memory index read: %+v, %v", hits, err)
	}
	// Every index of an in-memory node is a memory index (fsm/indexmem.go).
	for _, n := range c.Nodes {
		testutil.Eventually(t, waitTimeout, n.ID()+"'s memory store to be measured", func() bool {
			v, ok := sampleValue(t, n.Registry, "skald_index_memory_bytes", "", "")
			return ok && v > 0
		})
	}
}

// A reader's kick starts an index round at once, whatever
// Config.IndexInterval: a LINEARIZABLE index read waits for one round,
// not for the interval that batches the rounds of busy namespaces.
func TestIndexReadKickSkipsInterval(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) { cfg.IndexInterval = time.Hour })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	if _, err := l.CreateIndex(ctxT(t), amountIndex("app")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res := appendAmount(t, l.Node, "app", "acct-1", 7000+i)
		var hits []fsm.IndexHit
		_, err := l.ReadIndexed(ctxT(t), "app", "amount", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(v *fsm.View) error {
			page, err := v.QueryIndex(fsm.IndexQuery{Index: "amount", Equal: []string{fmt.Sprint(7000 + i)}, PositionsOnly: true})
			hits = page.Hits
			return err
		})
		if err != nil {
			t.Fatalf("linearizable index read %d: %v", i, err)
		}
		if len(hits) != 1 || hits[0].GlobalPosition != res.GetAppend().FirstGlobalPosition {
			t.Fatalf("write %d at global position %d; the read finds %+v", i, res.GetAppend().FirstGlobalPosition, hits)
		}
	}
}

// An index that fails on a node is logged there, once, with its name and
// reason, and FailedIndexes names it.
func TestIndexFailureLogged(t *testing.T) {
	var logs testutil.SyncBuffer
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		cfg.IndexMemoryLimit = 64 << 10
	})
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	ix := amountIndex("app")
	ix.Definition.Storage = fsmv1.IndexStorage_INDEX_STORAGE_MEMORY
	ix.Definition.Fields[0].Type = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING
	if _, err := l.CreateIndex(ctxT(t), ix); err != nil {
		t.Fatal(err)
	}
	for i := range 100 { // about 2 KB of keys per entry
		appendAmount(t, l.Node, "app", "acct-1", fmt.Sprintf("%04d%s", i, strings.Repeat("x", 900)))
	}
	testutil.Eventually(t, waitTimeout, "the failure's log line", func() bool {
		return strings.Contains(logs.String(), "index failed on this node")
	})
	line := logs.String()
	if !strings.Contains(line, "index=amount") || !strings.Contains(line, "namespace=app") ||
		!strings.Contains(line, "--index-memory-limit") || strings.Count(line, "index failed on this node") != 1 {
		t.Fatalf("log line of the failure: %s", line)
	}
	failed, err := l.FailedIndexes()
	if err != nil || len(failed) != 1 || failed[0].Namespace != "app" || failed[0].Index != "amount" {
		t.Fatalf("FailedIndexes = %+v, %v", failed, err)
	}
}
