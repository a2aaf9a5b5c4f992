package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// nsState is what a node serves of a namespace: every message, the
// listing and the counters.
type nsState struct {
	Messages []fsm.Message
	Streams  []fsm.StreamInfo
	Stats    fsm.NamespaceStats
}

func stateOf(t *testing.T, n *Node, ns string) nsState {
	t.Helper()
	var st nsState
	_, err := n.Read(ctxT(t), ns, nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
		if st.Messages, err = v.ReadAll(1, -1); err != nil {
			return err
		}
		if st.Streams, _, err = v.ListStreams(fsm.StreamsQuery{Limit: 1000}); err != nil {
			return err
		}
		st.Stats, err = v.Stats()
		return err
	})
	if err != nil {
		t.Fatalf("read %s on %s: %v", ns, n.ID(), err)
	}
	return st
}

// TestStreamDeletionSameOnEveryNode: deletes and truncates, sent through a
// follower (forwarded), leave every node in the same state, including a
// follower that was down while they were applied and one that was wiped
// and rebuilt from a snapshot.
func TestStreamDeletionSameOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, smallSnapshots)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	writeN(t, l.Node, "app", 100) // s-0..s-4, 20 messages each
	c.WaitConverged()
	others := c.Others(l) // not Followers: l may have lost leadership since
	down, via := others[0], others[1]
	down.Stop()

	res, err := via.TruncateStream(ctxT(t), &fsmv1.TruncateStream{Namespace: "app", Stream: "s-1", Before: 15})
	if err != nil || res.GetStreamDeletion().MessagesDeleted != 15 || res.GetStreamDeletion().Version != 19 {
		t.Fatalf("truncate through a follower: %+v, %v; want 15 removed, version 19", res, err)
	}
	if res, err = via.DeleteStream(ctxT(t), &fsmv1.DeleteStream{Namespace: "app", Stream: "s-2"}); err != nil || res.GetStreamDeletion().MessagesDeleted != 20 {
		t.Fatalf("soft delete: %+v, %v", res, err)
	}
	if _, err = via.DeleteStream(ctxT(t), &fsmv1.DeleteStream{Namespace: "app", Stream: "s-3", Hard: true}); err != nil {
		t.Fatalf("hard delete: %v", err)
	}
	// Rejections cross the peer service with their kind.
	if _, err = via.DeleteStream(ctxT(t), &fsmv1.DeleteStream{Namespace: "app", Stream: "nobody-1"}); !errors.Is(err, fsm.ErrStreamNotFound) {
		t.Fatalf("delete of an unknown stream through a follower: %v, want ErrStreamNotFound", err)
	}
	if _, err = appendOne(ctxT(t), via.Node, "app", "s-3", ""); !errors.Is(err, fsm.ErrStreamDeleted) {
		t.Fatalf("append to a hard-deleted stream through a follower: %v, want ErrStreamDeleted", err)
	}
	if _, err = appendOne(ctxT(t), via.Node, "app", "s-2", ""); err != nil {
		t.Fatalf("append to a soft-deleted stream: %v", err)
	}
	writeOther(t, l.Node, 100) // the leader compacts its log past the deletes
	c.WaitConverged()

	want := stateOf(t, c.Leader().Node, "app")
	if want.Stats.MessageCount != 100-15-20-20+1+100 || want.Stats.StreamCount != 5 {
		t.Fatalf("leader counts %+v, want 146 messages in 5 streams (s-0, s-1, s-2 again, s-4, other-1)", want.Stats)
	}
	down.Restart()
	c.WaitConverged()
	if got := stateOf(t, down.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the follower that was down serves %d messages %+v, the leader %d %+v", len(got.Messages), got.Stats, len(want.Messages), want.Stats)
	}
	if got := stateOf(t, via.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the forwarding follower differs from the leader")
	}

	// Wipe a follower: it comes back from the leader's snapshot.
	via.Stop()
	for _, d := range []string{"raft", "fsm"} {
		if err := os.RemoveAll(filepath.Join(via.Dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeOther(t, c.Leader().Node, 50)
	l = c.Leader()
	testutil.Eventually(t, waitTimeout, "the leader to compact its log", func() bool {
		first, _ := l.logs.FirstIndex()
		return first > 10
	})
	via.Restart()
	c.WaitConverged()
	want = stateOf(t, l.Node, "app")
	if got := stateOf(t, via.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the follower restored from a snapshot serves %d messages %+v, the leader %d %+v", len(got.Messages), got.Stats, len(want.Messages), want.Stats)
	}
}

// writeOther appends count messages to the stream other-1.
func writeOther(t *testing.T, n *Node, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		appendRetrying(t, n, "app", "other-1", fmt.Sprintf("append %d", i))
	}
}
