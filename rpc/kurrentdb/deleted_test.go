package kurrentdb

import (
	"strings"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestHardDeletedStream: a stream hard-deleted through Skald is
// KurrentDB's deleted stream to reads and appends, named in the error.
func TestHardDeletedStream(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "gone-1", 2)
	if _, err := f.leader.tn.DeleteStream(ctxT(t), &fsmv1.DeleteStream{Namespace: testNamespace, Stream: "gone-1",
		Hard: true}); err != nil {
		t.Fatal(err)
	}
	_, err := readStream(t, cl, "gone-1", kurrentdb.ReadStreamOptions{}, 10)
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeStreamDeleted || !strings.Contains(err.Error(), "gone-1") {
		t.Errorf("read: %v (code %d), want the stream deleted, named", err, code)
	}
	for _, state := range []kurrentdb.StreamState{kurrentdb.Any{}, kurrentdb.StreamExists{}} {
		_, err = cl.AppendToStream(ctxT(t), "gone-1", kurrentdb.AppendToStreamOptions{StreamState: state},
			jsonEvent("Late", `{}`))
		if code := errorCode(t, err); code != kurrentdb.ErrorCodeStreamDeleted || !strings.Contains(err.Error(), "gone-1") {
			t.Errorf("append expecting %T: %v (code %d), want the stream deleted, named", state, err, code)
		}
	}
}

// TestSoftDeletedStream: a stream soft-deleted through Skald reads as
// not found, as KurrentDB's deleted streams do, until an append; that
// append continues the stream's revisions.
func TestSoftDeletedStream(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "soft-1", 2)
	soft := &fsmv1.DeleteStream{Namespace: testNamespace, Stream: "soft-1"}
	if _, err := f.leader.tn.DeleteStream(ctxT(t), soft); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []kurrentdb.ReadStreamOptions{
		{From: kurrentdb.Start{}},
		{Direction: kurrentdb.Backwards, From: kurrentdb.End{}},
	} {
		_, err := readStream(t, cl, "soft-1", opts, 10)
		if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
			t.Errorf("read %v after the delete: %v, want the stream not found", opts.Direction, err)
		}
	}
	res, err := cl.AppendToStream(ctxT(t), "soft-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.Revision(1)},
		jsonEvent("Again", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.NextExpectedVersion != 2 {
		t.Errorf("next expected version %d, want 2 (revisions continue)", res.NextExpectedVersion)
	}
	evs, err := readStream(t, cl, "soft-1", kurrentdb.ReadStreamOptions{}, 10)
	if got := numbers(evs); err != nil || len(got) != 1 || got[0] != 2 {
		t.Errorf("read after the append: %v (%v), want [2]", got, err)
	}
	evs, err = readStream(t, cl, "soft-1", kurrentdb.ReadStreamOptions{From: kurrentdb.End{}}, 10)
	if err != nil || len(evs) != 0 {
		t.Errorf("read forwards from the end: %d events (%v), want none and no error", len(evs), err)
	}
}

// TestDelete: Delete is a soft delete (reads find no stream, a later
// append continues the revisions) and Tombstone a hard one (reads and
// appends find the stream deleted), each with a position and checking
// the expected revision.
func TestDelete(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "del-1", 2) // global positions 1, 2
	_, err := cl.DeleteStream(ctxT(t), "del-1", kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.Revision(0)})
	if err == nil || !strings.Contains(err.Error(), "FailedPrecondition") ||
		!strings.Contains(err.Error(), "wrong expected version") {
		t.Errorf("delete at a stale revision: %v, want FailedPrecondition: wrong expected version", err)
	}
	res, err := cl.DeleteStream(ctxT(t), "del-1", kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.Revision(1)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Position.Commit != 2 || res.Position.Prepare != 2 {
		t.Errorf("delete position %v, want 2/2 (the stream's last event)", res.Position)
	}
	_, err = readStream(t, cl, "del-1", kurrentdb.ReadStreamOptions{}, 10)
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("read after the delete: %v, want the stream not found", err)
	}
	exists := kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.StreamExists{}}
	next, err := cl.AppendToStream(ctxT(t), "del-1", exists, jsonEvent("Again", `{}`))
	if err != nil || next.NextExpectedVersion != 2 {
		t.Fatalf("append after the delete: %+v (%v), want revision 2", next, err)
	}

	appendN(t, cl, "tomb-1", 1) // global position 4
	tombExists := kurrentdb.TombstoneStreamOptions{StreamState: kurrentdb.StreamExists{}}
	tomb, err := cl.TombstoneStream(ctxT(t), "tomb-1", tombExists)
	if err != nil {
		t.Fatal(err)
	}
	if tomb.Position.Commit != 4 {
		t.Errorf("tombstone position %v, want 4", tomb.Position)
	}
	_, err = readStream(t, cl, "tomb-1", kurrentdb.ReadStreamOptions{}, 10)
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeStreamDeleted {
		t.Errorf("read after the tombstone: %v, want the stream deleted", err)
	}
	_, err = cl.TombstoneStream(ctxT(t), "tomb-1", kurrentdb.TombstoneStreamOptions{StreamState: kurrentdb.Any{}})
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeStreamDeleted {
		t.Errorf("a second tombstone: %v, want the stream deleted", err)
	}
	_, err = cl.DeleteStream(ctxT(t), "never-1", kurrentdb.DeleteStreamOptions{StreamState: kurrentdb.Any{}})
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("delete of a stream that never had an event: %v, want not found", err)
	}
}
