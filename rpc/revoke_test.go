package rpc

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
)

// Rotation on a 3-node cluster: a credential created through follower A
// works at once through follower C; once its revocation through A
// returns, C refuses it, and a subscription, a consumer and an EventoDB
// /subscribe that hold it through C end with the authentication error.
// The namespace's initial token, meanwhile, keeps working as its owner.
func TestRevokeOnEveryNode(t *testing.T) {
	t.Parallel()
	servers, l := clusterOfThree(t)
	var fs []*server
	for _, s := range servers {
		if s != l {
			fs = append(fs, s)
		}
	}
	a, c := fs[0], fs[1]
	appToken, _ := nstoken.New("app")
	if _, err := l.n.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "app", TokenHash: nstoken.Hash(appToken)}); err != nil {
		t.Fatal(err)
	}
	token := createCredential(t, a, appToken, "svc", fsm.RoleOwner, false)
	if code := connectCode(t, c.addr, token, "skald.v1.EventStore/Append", `{"stream":"order-1","messages":[{"type":"T","data":"e30="}]}`); code != "" {
		t.Fatalf("append through C with the new credential: %q", code)
	}
	cc := newClients(c, protocols[0], token)
	if _, err := cc.subs.CreateGroup(ctxT(t), connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_All{All: true}})); err != nil {
		t.Fatalf("create group: %v", err)
	}

	// Three long calls through C, each holding the credential.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := cc.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Stream{Stream: "order-1"}}))
	if err != nil {
		t.Fatal(err)
	}
	subDone := make(chan error, 1)
	go func() {
		for sub.Receive() {
		}
		subDone <- sub.Err()
	}()
	consumer := startConsumer(t, cc, "g", "c1")
	consumer.next(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+"/subscribe?stream=order-1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	sse, err := http.DefaultClient.Do(req)
	if err != nil || sse.StatusCode != 200 {
		t.Fatalf("GET /subscribe: %v %v", sse, err)
	}
	defer sse.Body.Close()
	sseDone := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := sse.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				sseDone <- b.String()
				return
			}
		}
	}()

	status, out := connectCall(t, a.addr, appToken, "skald.v1.Credentials/Revoke", `{"name":"svc"}`, nil)
	if status != 200 {
		t.Fatalf("revoke through A: %d %s", status, out)
	}
	// The next request through C is refused: no wait.
	if code := connectCode(t, c.addr, token, "skald.v1.EventStore/ReadStream", `{"stream":"order-1"}`); code != "unauthenticated" {
		t.Fatalf("read through C after the revoke: %q, want unauthenticated", code)
	}
	if status, code := evCallCode(t, c.addr, token, "stream.get", `"order-1"`); status != http.StatusForbidden || code != "AUTH_UNAUTHORIZED" {
		t.Fatalf("EventoDB read through C after the revoke: %d %s", status, code)
	}
	wait := func(what string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), `credential "svc" of namespace "app" was revoked`) {
				t.Fatalf("%s ended with %v, want unauthenticated naming the credential", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still runs 10 s after the revoke", what)
		}
	}
	wait("the subscription", subDone)
	wait("the consumer", consumer.done)
	select {
	case body := <-sseDone:
		if !strings.Contains(body, "event: error") || !strings.Contains(body, "AUTH_UNAUTHORIZED") {
			t.Fatalf("GET /subscribe ended with %q, want an error event AUTH_UNAUTHORIZED", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("GET /subscribe still runs 10 s after the revoke")
	}
	if code := connectCode(t, c.addr, appToken, "skald.v1.EventStore/ReadStream", `{"stream":"order-1"}`); code != "" {
		t.Fatalf("the initial token through C: %q", code)
	}
}

// An expired credential is refused with a message naming it and when it
// expired; the credentials list shows it with its expiry.
func TestExpiredCredential(t *testing.T) {
	t.Parallel()
	s := single(t)
	appToken, _ := nstoken.New("app")
	if _, err := s.n.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "app", TokenHash: nstoken.Hash(appToken)}); err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(1500 * time.Millisecond).UTC()
	creds := skaldv1connect.NewCredentialsClient(http.DefaultClient, "http://"+s.addr, connect.WithInterceptors(bearerInterceptor(appToken)))
	res, err := creds.Create(ctxT(t), connect.NewRequest(&skaldv1.CredentialsCreateRequest{Name: "brief", Role: skaldv1.Role_ROLE_READER,
		ExpiresAt: timestamp(expires.UnixNano())}))
	if err != nil {
		t.Fatal(err)
	}
	token := res.Msg.Token
	if code := connectCode(t, s.addr, token, "skald.v1.EventStore/ReadStream", `{"stream":"x-1"}`); code != "" {
		t.Fatalf("before expiry: %q", code)
	}
	var last error
	testutil.Eventually(t, waitTimeout, "the credential to expire", func() bool {
		_, last = newClients(s, protocols[0], token).events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "x-1"}))
		return last != nil
	})
	var ce *connect.Error
	if !errors.As(last, &ce) || ce.Code() != connect.CodeUnauthenticated || !strings.Contains(ce.Message(), `credential "brief" of namespace "app" expired at`) {
		t.Fatalf("after expiry: %v", last)
	}
	list, err := creds.List(ctxT(t), connect.NewRequest(&skaldv1.CredentialsListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Msg.Credentials {
		names = append(names, c.Name+":"+c.Role.String())
		if c.Name == "brief" && !c.ExpiresAt.AsTime().Equal(expires) {
			t.Errorf("brief expires at %v, want %v", c.ExpiresAt.AsTime(), expires)
		}
		if c.Name == "initial" && (!c.Initial || c.LastUsed == nil) {
			t.Errorf("initial: %v", c)
		}
	}
	if got := strings.Join(names, " "); got != "brief:ROLE_READER initial:ROLE_OWNER" {
		t.Fatalf("list: %s", got)
	}
}
