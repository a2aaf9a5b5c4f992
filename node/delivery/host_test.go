package delivery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

const testTime = int64(1_700_000_000_000_000_000)

var errTestNotOwner = errors.New("test: not the owner")

// testHost is a Node without Raft: a bare fsm.Store that applies each
// proposal at once, and the change feed it publishes to.
type testHost struct {
	t      testing.TB
	store  *fsm.Store
	feed   *nodeapi.Feed
	owning atomic.Bool
	// saved receives each GroupProgress applied, in order.
	saved chan *fsmv1.GroupProgress

	mu    sync.Mutex // serializes applies, as Raft would
	index uint64
	ids   int
}

func newTestHost(t testing.TB) *testHost {
	t.Helper()
	s, err := fsm.Open(fsm.Options{Dir: "/data/fsm", FS: vfs.NewMem()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	h := &testHost{
		t: t, store: s, feed: nodeapi.NewFeed(), index: s.AppliedIndex(), saved: make(chan *fsmv1.GroupProgress, 100),
	}
	h.owning.Store(true)
	return h
}

func (h *testHost) Owning() bool                      { return h.owning.Load() }
func (h *testHost) View(ns string) (*fsm.View, error) { return h.store.View(ns) }
func (h *testHost) Watch(ns string) *nodeapi.Watch    { return h.feed.Watch(ns) }

func (h *testHost) Propose(ctx context.Context, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	if !h.Owning() {
		return nil, errTestNotOwner
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	h.mu.Lock()
	h.index++
	results := h.store.ApplyBatch([]fsm.Entry{{Index: h.index, Term: 1, Data: data}})
	h.mu.Unlock()
	h.feed.Publish(results)
	switch r := results[0].(type) {
	case error:
		return nil, r
	case *fsmv1.Result:
		if p := cmd.GetGroupProgress(); p != nil {
			h.saved <- p
		}
		return r, nil
	default:
		return nil, fmt.Errorf("apply %T: result %T", cmd.GetKind(), r)
	}
}

// must proposes cmd and fails the test on any error.
func (h *testHost) must(cmd *fsmv1.Command) *fsmv1.Result {
	h.t.Helper()
	r, err := h.Propose(context.Background(), cmd)
	if err != nil {
		h.t.Fatalf("propose %v: %v", cmd, err)
	}
	return r
}

func (h *testHost) createNamespace(name string) {
	h.t.Helper()
	tok := sha256.Sum256([]byte("token-" + name))
	h.must(&fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespace{
		Name: name, TokenHash: tok[:], CreatedUnixNano: testTime,
	}}})
}

// appendOne appends one message to stream and returns its global position.
func (h *testHost) appendOne(ns, stream string) int64 {
	h.t.Helper()
	h.ids++
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", h.ids)
	r := h.must(&fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{
		Namespace: ns, Stream: stream, TimeUnixNano: testTime,
		Messages: []*fsmv1.NewMessage{{Id: id, Type: "T", Data: []byte(`{}`)}},
	}}})
	return r.GetAppend().FirstGlobalPosition
}
