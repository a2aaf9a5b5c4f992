package rpc

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// A write served by a follower names the leader's API address; reads do
// not, and neither does the leader.
func TestLeaderHintOnForwardedWrites(t *testing.T) {
	t.Parallel()
	f := followerOfThree(t)
	c := newClients(f, protocols[1], adminToken)
	lid, _ := f.n.Leader()
	want, ok := f.n.NodeAddr(lid)
	if !ok {
		t.Fatal("the follower does not know the leader's API address")
	}
	resp, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "hint-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header().Get(LeaderHeader); got != want {
		t.Fatalf("%s = %q on a forwarded write, want the leader's %q", LeaderHeader, got, want)
	}
	read, err := c.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "hint-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := read.Header().Get(LeaderHeader); got != "" {
		t.Fatalf("%s = %q on a read", LeaderHeader, got)
	}
	leader := &server{addr: want}
	lresp, err := newClients(leader, protocols[1], adminToken).events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "hint-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := lresp.Header().Get(LeaderHeader); got != "" {
		t.Fatalf("%s = %q on the leader's own write", LeaderHeader, got)
	}
}

// Every write kind a follower sends through the leader names it, on
// success and on a refusal alike (AppendMulti, deletes, policies and group
// operations once went without: the list named 3 of them).
func TestLeaderHintOnEveryForwardedKind(t *testing.T) {
	t.Parallel()
	f := followerOfThree(t)
	c := newClients(f, protocols[1], adminToken)
	lid, _ := f.n.Leader()
	want, _ := f.n.NodeAddr(lid)
	msg := []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}
	if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "kind-1", Messages: msg})); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func(context.Context) (http.Header, error)
	}{
		{"AppendMulti", func(ctx context.Context) (http.Header, error) {
			r, err := c.events.AppendMulti(ctx, connect.NewRequest(&skaldv1.AppendMultiRequest{Streams: []*skaldv1.StreamAppend{{Stream: "kind-2", Messages: msg}}}))
			return headerOf(r, err)
		}},
		{"DeleteStream", func(ctx context.Context) (http.Header, error) {
			r, err := c.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "kind-1"}))
			return headerOf(r, err)
		}},
		{"SetRetentionPolicy refused", func(ctx context.Context) (http.Header, error) {
			r, err := c.namespaces.SetRetentionPolicy(ctx, connect.NewRequest(&skaldv1.SetRetentionPolicyRequest{
				Namespace: "nope", Policy: &skaldv1.RetentionPolicy{Scope: skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, MaxCount: 1}}))
			return headerOf(r, err)
		}},
		{"CreateGroup", func(ctx context.Context) (http.Header, error) {
			r, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_Category{Category: "kind"}}))
			return headerOf(r, err)
		}},
		{"DeleteGroup", func(ctx context.Context) (http.Header, error) {
			r, err := c.subs.DeleteGroup(ctx, connect.NewRequest(&skaldv1.DeleteGroupRequest{Name: "g"}))
			return headerOf(r, err)
		}},
		{"TransferLeadership refused", func(ctx context.Context) (http.Header, error) {
			r, err := c.cluster.TransferLeadership(ctx, connect.NewRequest(&skaldv1.TransferLeadershipRequest{}))
			return headerOf(r, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := tc.call(ctxT(t))
			if got := h.Get(LeaderHeader); got != want {
				t.Fatalf("%s = %q (call error: %v), want the leader's %q", LeaderHeader, got, err, want)
			}
		})
	}
}

// headerOf is a reply's headers, or a Connect error's metadata.
func headerOf[T any](r *connect.Response[T], err error) (http.Header, error) {
	var ce *connect.Error
	switch {
	case err == nil:
		return r.Header(), nil
	case errors.As(err, &ce):
		return ce.Meta(), err
	}
	return http.Header{}, err
}

// Every procedure of the API is either sent through the leader (its
// replies from a follower name the leader) or served by any node: a new
// procedure in neither list fails here.
func TestEveryProcedureIsClassified(t *testing.T) {
	t.Parallel()
	files := []protoreflect.FileDescriptor{skaldv1.File_skald_v1_event_store_proto, skaldv1.File_skald_v1_namespaces_proto,
		skaldv1.File_skald_v1_subscriptions_proto, skaldv1.File_skald_v1_cluster_proto, skaldv1.File_skald_v1_credentials_proto,
		skaldv1.File_skald_v1_indexes_proto}
	n := 0
	for _, fd := range files {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				proc := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				n++
				if throughLeader[proc] == servedLocally[proc] {
					t.Errorf("%s: through the leader %v, served locally %v; it must be exactly one (leaderhint.go)", proc, throughLeader[proc], servedLocally[proc])
				}
			}
		}
	}
	if n != len(throughLeader)+len(servedLocally) {
		t.Errorf("the API has %d procedures, the lists %d + %d: one names a procedure that does not exist", n, len(throughLeader), len(servedLocally))
	}
}
