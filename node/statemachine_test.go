package node

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestStateMachineAdaptsRaftEntries: Raft's entries reach the store with
// their index, term, kind and bytes; the conversion reuses its buffer (no
// allocation per batch once grown) and keeps no log's bytes afterwards.
func TestStateMachineAdaptsRaftEntries(t *testing.T) {
	store, sm := memStateMachine(t)
	create, err := fsm.EncodeCommand(&fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespace{Name: "app"}}})
	if err != nil {
		t.Fatal(err)
	}
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("configuration")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: create},
		{Index: 3, Term: 2, Type: raft.LogNoop},
	}
	out := sm.ApplyBatch(logs)
	if r, ok := out[1].(*fsmv1.Result); !ok || r.GetCreateNamespace().GetName() != "app" || r.Index != 2 || out[0] != nil || out[2] != nil {
		t.Fatalf("results %v", out)
	}
	if _, ok := store.Namespace("app"); !ok || sm.appliedIndex() != 3 || store.AppliedIndex() != 3 {
		t.Fatalf("namespace not created or applied %d/%d, want 3", sm.appliedIndex(), store.AppliedIndex())
	}
	floor, err := store.SyncFloor()
	if err != nil || floor.Term != 2 || floor.ConfigurationIndex != 1 || !bytes.Equal(floor.Configuration, []byte("configuration")) {
		t.Fatalf("floor %+v %v", floor, err)
	}
	for _, e := range sm.entries {
		if e.Data != nil {
			t.Fatal("the buffer keeps a log's bytes after the batch")
		}
	}

	batch := make([]*raft.Log, 64)
	for i := range batch {
		batch[i] = &raft.Log{Index: uint64(i), Type: raft.LogCommand, Data: create}
	}
	if n := testing.AllocsPerRun(10, func() { sm.entriesOf(batch) }); n != 0 {
		t.Fatalf("converting a batch allocates %v times", n)
	}
	if kinds := [3]fsm.EntryKind{entryKind(raft.LogCommand), entryKind(raft.LogConfiguration), entryKind(raft.LogBarrier)}; kinds != [3]fsm.EntryKind{fsm.EntryCommand, fsm.EntryConfiguration, fsm.EntryOther} {
		t.Fatalf("kinds %v", kinds)
	}
}

// TestFloorSnapshotPersistsNothing: the FSM snapshot is the synced store
// itself, so Persist writes no byte and closes the sink.
func TestFloorSnapshotPersistsNothing(t *testing.T) {
	t.Parallel()
	sink := &memSink{}
	if err := (floorSnapshot{}).Persist(sink); err != nil || !sink.closed || sink.Len() != 0 {
		t.Fatalf("persist: %v closed=%v wrote %d bytes", err, sink.closed, sink.Len())
	}
}

// memStateMachine is a state machine over an in-memory store, closed at
// the end of the test.
func memStateMachine(t *testing.T) (*fsm.Store, *stateMachine) {
	t.Helper()
	store, err := fsm.Open(fsm.Options{Dir: "/fsm", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store, newStateMachine(store, nodeapi.NewFeed(), newMetrics(), 0)
}

type memSink struct {
	bytes.Buffer
	closed bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return errors.New("cancelled") }
func (m *memSink) Close() error  { m.closed = true; return nil }
