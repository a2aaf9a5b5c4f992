package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
	peerv1 "github.com/skalddb/skald/node/peerv1"
	"github.com/skalddb/skald/node/peerv1/peerv1connect"
)

// stubLeader is a peer service on a real socket that answers each append
// with its stream name echoed back, so a test can tell whose answer each
// caller got. Calls wait for release to be closed.
type stubLeader struct {
	peerv1connect.UnimplementedPeerServiceHandler
	release   chan struct{}
	batchErr  error              // returned by every ApplyBatch when set
	failure   peerv1.FailureKind // every outcome fails so when set
	mu        sync.Mutex
	calls     int             // ApplyBatch calls
	seen      map[string]bool // streams received
	singles   int             // Apply calls
	inBatches chan int        // size of each ApplyBatch as it arrives
}

func newStubLeader(t *testing.T) (*stubLeader, string) {
	s := &stubLeader{release: make(chan struct{}), seen: make(map[string]bool), inBatches: make(chan int, 1000)}
	_, h := peerv1connect.NewPeerServiceHandler(s)
	port := newTestPort(t, testClusterSecret)
	srv := port.ServePeers(h)
	t.Cleanup(func() { srv.Close() })
	return s, port.Addr().String()
}

func (s *stubLeader) answer(c *fsmv1.Command) *fsmv1.Result {
	a := c.GetAppend()
	return &fsmv1.Result{Index: 7, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Stream: a.Stream}}}
}

func (s *stubLeader) ApplyBatch(ctx context.Context, req *connect.Request[peerv1.ApplyBatchRequest]) (*connect.Response[peerv1.ApplyBatchResponse], error) {
	s.mu.Lock()
	s.calls++
	for _, c := range req.Msg.Commands {
		s.seen[c.GetAppend().Stream] = true
	}
	s.mu.Unlock()
	s.inBatches <- len(req.Msg.Commands)
	<-s.release
	if s.batchErr != nil {
		return nil, s.batchErr
	}
	out := make([]*peerv1.ApplyOutcome, len(req.Msg.Commands))
	for i, c := range req.Msg.Commands {
		if s.failure != peerv1.FailureKind_FAILURE_KIND_UNSPECIFIED {
			out[i] = &peerv1.ApplyOutcome{Outcome: &peerv1.ApplyOutcome_Failure{Failure: &peerv1.ApplyFailure{Kind: s.failure, Message: "stub"}}}
			continue
		}
		out[i] = &peerv1.ApplyOutcome{Outcome: &peerv1.ApplyOutcome_Response{Response: s.answer(c)}}
	}
	return connect.NewResponse(&peerv1.ApplyBatchResponse{Outcomes: out}), nil
}

func (s *stubLeader) Apply(ctx context.Context, req *connect.Request[peerv1.ApplyRequest]) (*connect.Response[fsmv1.Result], error) {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return connect.NewResponse(s.answer(req.Msg.Command)), nil
}

func appendTo(stream string) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{Namespace: "ns", Stream: stream}}}
}

func newTestForwarder(t *testing.T) *forwarder {
	return newForwarder(context.Background(), newPeerClients(testDialer(t, testClusterSecret).PeerTransport()), 5*time.Second, func(int) {})
}

// Writes that arrive while every call is busy share the next call, and
// each caller gets the outcome of its own write.
func TestForwarderCoalescesAndAnswersEachWrite(t *testing.T) {
	leader, addr := newStubLeader(t)
	f := newTestForwarder(t)
	type answer struct {
		stream string
		res    any
		err    error
	}
	answers := make(chan answer, 100)
	write := func(stream string) {
		res, err := f.apply(context.Background(), addr, appendTo(stream))
		answers <- answer{stream, res, err}
	}
	for i := 0; i < maxForwardCalls; i++ { // one at a time: each its own call
		go write("busy-" + string(rune('a'+i)))
		<-leader.inBatches // in flight and blocked
	}
	const queued = 60
	for i := 0; i < queued; i++ {
		go write("queued-" + strings.Repeat("x", i))
	}
	testutil.Eventually(t, 5*time.Second, "every write to queue", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.queues[addr].pending) == queued
	})
	close(leader.release)
	for i := 0; i < maxForwardCalls+queued; i++ {
		a := <-answers
		if a.err != nil {
			t.Fatalf("%s: %v", a.stream, a.err)
		}
		r, ok := a.res.(*fsmv1.Result)
		if !ok || r.GetAppend().GetStream() != a.stream {
			t.Fatalf("%s got the answer %+v", a.stream, a.res)
		}
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	if leader.calls > maxForwardCalls+1 {
		t.Fatalf("%d calls for %d writes, want at most %d", leader.calls, maxForwardCalls+queued, maxForwardCalls+1)
	}
}

// A write whose caller gives up before it is sent never reaches the
// leader, and the caller learns that nothing was proposed.
func TestForwarderCancelledWriteIsNeverSent(t *testing.T) {
	leader, addr := newStubLeader(t)
	f := newTestForwarder(t)
	var wg sync.WaitGroup
	for i := 0; i < maxForwardCalls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.apply(context.Background(), addr, appendTo("busy"))
		}()
		<-leader.inBatches
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := f.apply(ctx, addr, appendTo("given-up"))
		errc <- err
	}()
	testutil.Eventually(t, 5*time.Second, "the write to queue", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.queues[addr].pending) == 1
	})
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled itself (nothing proposed)", err)
	}
	close(leader.release)
	wg.Wait()
	leader.mu.Lock()
	defer leader.mu.Unlock()
	if leader.seen["given-up"] {
		t.Fatal("the leader received a write its caller had given up on")
	}
}

func TestForwarderFailures(t *testing.T) {
	cases := []struct {
		name     string
		batchErr error
		failure  peerv1.FailureKind
		want     error // nil: success through single Apply calls
	}{
		{"leader refuses the call: nothing proposed", notApplied(connect.CodeFailedPrecondition, errors.New("not leader")), 0, errNotLeader},
		{"call fails otherwise: outcome unknown", connect.NewError(connect.CodeInternal, errors.New("boom")), 0, nodeapi.ErrUnknownOutcome},
		{"older leader without ApplyBatch: single calls", connect.NewError(connect.CodeUnimplemented, errors.New("no such method")), 0, nil},
		{"outcome not leader", nil, peerv1.FailureKind_FAILURE_KIND_NOT_LEADER, errNotLeader},
		{"outcome no leader", nil, peerv1.FailureKind_FAILURE_KIND_NO_LEADER, nodeapi.ErrNoLeader},
		{"outcome unknown", nil, peerv1.FailureKind_FAILURE_KIND_UNKNOWN, nodeapi.ErrUnknownOutcome},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leader, addr := newStubLeader(t)
			leader.batchErr, leader.failure = tc.batchErr, tc.failure
			close(leader.release)
			res, err := newTestForwarder(t).apply(context.Background(), addr, appendTo("s"))
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil || res.GetAppend().GetStream() != "s" {
				t.Fatalf("got %+v, %v; want the append's result", res, err)
			}
			leader.mu.Lock()
			defer leader.mu.Unlock()
			if leader.singles != 1 {
				t.Fatalf("%d single Apply calls, want 1", leader.singles)
			}
		})
	}
}
