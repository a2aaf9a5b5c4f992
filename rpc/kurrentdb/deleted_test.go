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
