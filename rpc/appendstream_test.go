package rpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
)

// openAppendStream opens an AppendStream on s over h2c (gRPC or Connect)
// with token.
func openAppendStream(t *testing.T, s *server, token string, grpc bool) *connect.BidiStreamForClient[skaldv1.AppendStreamRequest, skaldv1.AppendStreamResponse] {
	t.Helper()
	return openAppendStreamCtx(t, ctxT(t), s, token, grpc)
}

func openAppendStreamCtx(t *testing.T, ctx context.Context, s *server, token string, grpc bool) *connect.BidiStreamForClient[skaldv1.AppendStreamRequest, skaldv1.AppendStreamResponse] {
	t.Helper()
	opts := []connect.ClientOption{connect.WithInterceptors(bearerInterceptor(token))}
	if grpc {
		opts = append(opts, connect.WithGRPC())
	}
	stream := skaldv1connect.NewEventStoreClient(h2c(), "http://"+s.addr, opts...).AppendStream(ctx)
	t.Cleanup(func() { stream.CloseRequest(); stream.CloseResponse() })
	return stream
}

func appendReq(id uint64, stream string, n int) *skaldv1.AppendStreamRequest {
	return &skaldv1.AppendStreamRequest{Id: id, Append: &skaldv1.AppendRequest{Stream: stream,
		Messages: []*skaldv1.NewMessage{{Id: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Type: "Placed", Data: []byte(fmt.Sprintf(`{"n":%d}`, n))}}}}
}

// receiveAll reads n answers, by id.
func receiveAll(t *testing.T, stream *connect.BidiStreamForClient[skaldv1.AppendStreamRequest, skaldv1.AppendStreamResponse], n int) map[uint64]*skaldv1.AppendStreamResponse {
	t.Helper()
	out := map[uint64]*skaldv1.AppendStreamResponse{}
	for len(out) < n {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("after %d of %d answers: %v", len(out), n, err)
		}
		if _, dup := out[resp.Id]; dup {
			t.Fatalf("request %d answered twice", resp.Id)
		}
		out[resp.Id] = resp
	}
	return out
}

// Many appends sent at once over one stream, to the leader and through a
// follower (which forwards each), in both stream protocols: each gets
// its own answer, the positions are 0..n-1 once each, and the stream
// holds each request's message at the position its answer gave.
func TestAppendStreamPositions(t *testing.T) {
	t.Parallel()
	servers, leader := clusterOfThree(t)
	follower := servers[0]
	if follower == leader {
		follower = servers[1]
	}
	const n = 100
	for _, tc := range []struct {
		name string
		s    *server
		grpc bool
	}{{"leader, connect", leader, false}, {"follower, grpc", follower, true}} {
		base := 0
		if tc.grpc {
			base = n // message ids differ between the cases
		}
		t.Run(tc.name, func(t *testing.T) {
			name := "order-" + map[bool]string{false: "connect", true: "grpc"}[tc.grpc]
			stream := openAppendStream(t, tc.s, adminToken, tc.grpc)
			for i := range n {
				if err := stream.Send(appendReq(uint64(1000+i), name, base+i)); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			answers := receiveAll(t, stream, n)
			idAt := map[int64]string{}
			for i := range n {
				a := answers[uint64(1000+i)].GetAppend()
				if a == nil {
					t.Fatalf("request %d: %v", i, answers[uint64(1000+i)])
				}
				if a.FirstPosition != a.LastPosition || a.Index == 0 {
					t.Fatalf("request %d: %+v", i, a)
				}
				want := "" // the leader names nobody, a follower the leader
				if tc.s == follower {
					want = leader.addr
				}
				if l := answers[uint64(1000+i)].Leader; l != want {
					t.Fatalf("request %d answered by the %s names the leader %q, want %q", i, tc.name, l, want)
				}
				if prev, dup := idAt[a.FirstPosition]; dup {
					t.Fatalf("position %d answered to %s and request %d", a.FirstPosition, prev, i)
				}
				idAt[a.FirstPosition] = fmt.Sprintf("00000000-0000-4000-8000-%012d", base+i)
			}
			read, err := newClients(leader, protocols[1], adminToken).events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{
				Stream: name, Limit: n + 1, Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LINEARIZABLE}}))
			if err != nil {
				t.Fatal(err)
			}
			if len(read.Msg.Messages) != n {
				t.Fatalf("the stream holds %d messages, want %d", len(read.Msg.Messages), n)
			}
			for i, m := range read.Msg.Messages {
				if m.Position != int64(i) || m.Id != idAt[m.Position] {
					t.Fatalf("message %d: id %s at position %d, the answers put %s there", i, m.Id, m.Position, idAt[m.Position])
				}
			}
			if tc.s == follower && stream.ResponseHeader().Get(LeaderHeader) == "" {
				t.Error("a follower's stream does not name the leader")
			}
		})
	}
}

// Requests refused on their own: a bad one is InvalidArgument naming its
// field, one outside the credential's scope PermissionDenied, and the
// others on the same stream, before and after, are written.
func TestAppendStreamRefusesOneRequest(t *testing.T) {
	t.Parallel()
	_, leader := clusterOfThree(t)
	appToken, _ := nstoken.New("app")
	if _, err := leader.n.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "app", TokenHash: nstoken.Hash(appToken)}); err != nil {
		t.Fatal(err)
	}
	s := &server{addr: leader.addr}
	scoped := createCredential(t, s, appToken, "invoicer", fsm.RoleWriter, true) // scope: category invoice

	bad := appendReq(2, "invoice-2", 2)
	bad.Append.Messages[0].Type = ""
	badVersion := appendReq(4, "invoice-4", 4)
	v := int64(-5)
	badVersion.Append.ExpectedVersion = &v
	noAppend := &skaldv1.AppendStreamRequest{Id: 6}
	reqs := []*skaldv1.AppendStreamRequest{
		appendReq(1, "invoice-1", 1), bad, appendReq(3, "order-1", 3), badVersion, appendReq(5, "invoice-1", 5), noAppend,
	}
	want := map[uint64]string{1: "", 2: "invalid_argument", 3: "permission_denied", 4: "invalid_argument", 5: "", 6: "invalid_argument"}
	field := map[uint64]string{2: "messages[0].type", 4: "expected_version", 6: "append"}
	stream := openAppendStream(t, leader, scoped, false)
	for _, r := range reqs {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	answers := receiveAll(t, stream, len(reqs))
	for id, code := range want {
		a := answers[id]
		if got := a.GetError().GetCode(); got != code {
			t.Errorf("request %d: code %q (%v), want %q", id, got, a, code)
		}
		if f := field[id]; f != "" && !fieldViolation(a.GetError(), f) {
			t.Errorf("request %d: %v does not name %s", id, a.GetError(), f)
		}
	}
	// Requests run concurrently, each its own append, so either may be
	// first: together they hold positions 0 and 1.
	if a1, a5 := answers[1].GetAppend(), answers[5].GetAppend(); a1 == nil || a5 == nil ||
		min(a1.FirstPosition, a5.FirstPosition) != 0 || max(a1.FirstPosition, a5.FirstPosition) != 1 {
		t.Errorf("invoice-1 written at %v and %v, want positions 0 and 1", answers[1], answers[5])
	}
	// The stream goes on.
	if err := stream.Send(appendReq(7, "invoice-7", 7)); err != nil {
		t.Fatal(err)
	}
	if a := receiveAll(t, stream, 1)[7]; a.GetAppend() == nil {
		t.Fatalf("after the refusals: %v", a)
	}
	// Revoking the credential ends the stream with the authentication
	// error, though its client keeps it open.
	if status, out := connectCall(t, leader.addr, appToken, "skald.v1.Credentials/Revoke", `{"name":"invoicer"}`, nil); status != 200 {
		t.Fatalf("revoke: %d %s", status, out)
	}
	done := make(chan error, 1)
	go func() { _, err := stream.Receive(); done <- err }()
	select {
	case err := <-done:
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("the stream of a revoked credential ended with %v, want unauthenticated", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the stream of a revoked credential still open after %v", waitTimeout)
	}
}

// fieldViolation reports whether e carries a google.rpc.BadRequest detail
// naming field, as the unary call's error would.
func fieldViolation(e *skaldv1.AppendStreamError, field string) bool {
	for _, d := range e.GetDetails() {
		var br errdetails.BadRequest
		if d.UnmarshalTo(&br) == nil && len(br.FieldViolations) == 1 && br.FieldViolations[0].Field == field {
			return true
		}
	}
	return false
}

// Past the cap of requests in flight a request is answered
// ResourceExhausted, not applied, and the stream goes on; a stream left
// idle ends at the idle timeout.
func TestAppendStreamBounds(t *testing.T) {
	t.Parallel()
	opts := defaultOptions
	opts.Limits = Limits{AppendStreamInFlight: 2, IdleTimeout: 2 * time.Second}
	_, leader := startCluster(t, 3, opts)
	createAdmin(t, leader.n)
	// No deadline of the client's: the server must end the idle stream.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := openAppendStreamCtx(t, ctx, leader, adminToken, false)
	const n = 20
	for i := range n {
		if err := stream.Send(appendReq(uint64(i), "capped", i)); err != nil {
			t.Fatal(err)
		}
	}
	answers := receiveAll(t, stream, n)
	written := 0
	for i := range n {
		a := answers[uint64(i)]
		switch {
		case a.GetAppend() != nil:
			written++
		case a.GetError().GetCode() == "resource_exhausted" && a.GetError().GetNotApplied():
		default:
			t.Errorf("request %d: %v", i, a)
		}
	}
	if written == 0 || written == n {
		t.Fatalf("%d of %d sent at once written, want some refused past the cap of 2", written, n)
	}
	read, err := newClients(leader, protocols[1], adminToken).events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "capped"}))
	if err != nil || read.Msg.GetVersion() != int64(written-1) {
		t.Fatalf("the stream's version is %v (%v), want %d: the refused requests were not written", read.Msg.GetVersion(), err, written-1)
	}
	if err := stream.Send(appendReq(100, "capped", 100)); err != nil {
		t.Fatal(err)
	}
	if a := receiveAll(t, stream, 1)[100]; a.GetAppend().GetFirstPosition() != int64(written) {
		t.Fatalf("after the refusals: %v", a)
	}
	// Idle: the server ends the stream; every wait here has a deadline.
	done := make(chan error, 1)
	go func() { _, err := stream.Receive(); done <- err }()
	select {
	case err := <-done:
		if err == nil || !connect.IsWireError(err) {
			t.Fatalf("an idle stream ended with %v, want the server's error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("an idle stream still open after %v (idle timeout 2s)", waitTimeout)
	}
}
