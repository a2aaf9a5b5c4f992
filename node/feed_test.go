package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// subscribe follows the nodeapi.Feed's documented pattern with watch w of ns on n
// until it has seen want messages (or the watch ends), returning their
// global positions.
func subscribe(ctx context.Context, n *Node, w *nodeapi.Watch, ns string, want int) ([]int64, bool) {
	var seen []int64
	next := int64(1)
	for len(seen) < want {
		changed, ended := w.Changed()
		if ended {
			return seen, true
		}
		var msgs []fsm.Message
		n.Read(ctx, ns, nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
			msgs, err = v.ReadAll(next, 100)
			return err
		})
		for _, m := range msgs {
			seen = append(seen, m.GlobalPosition)
			next = m.GlobalPosition + 1
		}
		if len(msgs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return seen, false
		}
	}
	return seen, false
}

func TestFeedDeliversEveryMessageOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	c.WaitConverged()
	const writers, each = 4, 50
	f := c.Followers()[0]
	// A watch nobody reads must not hold anything up.
	f.Feed().Watch("app")
	results := make(chan []int64, 2)
	for _, n := range []*Node{l.Node, f.Node} { // on the leader and on a follower
		w := n.Feed().Watch("app")
		go func(n *Node) {
			seen, _ := subscribe(ctxT(t), n, w, "app", writers*each)
			results <- seen
		}(n)
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := appendOne(ctxT(t), c.Nodes[(w+i)%3].Node, "app", fmt.Sprintf("s-%d", w), ""); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	for i := 0; i < 2; i++ {
		select {
		case seen := <-results:
			if len(seen) != writers*each {
				t.Fatalf("subscriber saw %d messages, want %d", len(seen), writers*each)
			}
			for j, gp := range seen {
				if gp != int64(j+1) {
					t.Fatalf("subscriber saw global position %d at %d: skipped or repeated", gp, j)
				}
			}
		case <-time.After(waitTimeout):
			t.Fatal("subscriber did not see every message")
		}
	}
}

func TestFeedEndsOnDelete(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	c.WaitConverged()
	f := c.Followers()[0]
	done := make(chan bool, 1)
	w := f.Feed().Watch("app")
	go func() {
		_, ended := subscribe(ctxT(t), f.Node, w, "app", 1_000_000)
		done <- ended
	}()
	if _, err := l.DeleteNamespace(ctxT(t), &fsmv1.DeleteNamespace{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ended := <-done:
		if !ended {
			t.Fatal("subscription stopped without the watch ending")
		}
	case <-time.After(waitTimeout):
		t.Fatal("watch did not end when the namespace was deleted")
	}
}
