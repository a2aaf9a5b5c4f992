package rpc

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

// recordingBackend is a node as the API sees it, keeping a copy of every
// CreateCredential the API hands it: what a follower forwards to the
// leader as it is (only the leader stamps a command).
// With oldLeader it answers as a leader older than
// CredentialResult.created_unix_nano does: without the time.
type recordingBackend struct {
	*node.Node
	oldLeader bool
	mu        sync.Mutex
	creates   []*fsmv1.CreateCredential
}

func (b *recordingBackend) CreateCredential(ctx context.Context, c *fsmv1.CreateCredential) (*fsmv1.Result, error) {
	b.mu.Lock()
	b.creates = append(b.creates, proto.Clone(c).(*fsmv1.CreateCredential))
	b.mu.Unlock()
	res, err := b.Node.CreateCredential(ctx, c)
	if err == nil && b.oldLeader {
		res = proto.Clone(res).(*fsmv1.Result)
		res.GetCredential().CreatedUnixNano = 0
	}
	return res, err
}

func (b *recordingBackend) created() []*fsmv1.CreateCredential {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fsmv1.CreateCredential(nil), b.creates...)
}

// TestCredentialCreatedAtIsTheLeaders: a credential created through a
// follower carries the creation time the leader stamped. The follower
// forwards a command without a time, and its reply's created_at is the
// one the stored record holds (the leader's result carries it back).
func TestCredentialCreatedAtIsTheLeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	backends := map[*node.Node]*recordingBackend{}
	c := node.StartTestCluster(t, 3, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.ReadWait = 2 * time.Second },
		Handler: func(tn *node.TestNode) http.Handler {
			b := &recordingBackend{Node: tn.Node}
			mu.Lock()
			backends[tn.Node] = b
			mu.Unlock()
			o := defaultOptions
			o.Registerer, o.Gatherer = tn.Registry, tn.Registry
			return NewHandler(b, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	var f *node.TestNode
	for _, tn := range c.Nodes {
		if tn != l {
			f = tn
			break
		}
	}
	testutil.Eventually(t, waitTimeout, "the follower to know the leader", func() bool { id, _ := f.Node.Leader(); return id == l.Node.ID() })

	opts := []connect.ClientOption{connect.WithInterceptors(bearerInterceptor(adminToken))}
	creds := skaldv1connect.NewCredentialsClient(http1(), "http://"+f.Addr, opts...)
	resp, err := creds.Create(ctxT(t), connect.NewRequest(&skaldv1.CredentialsCreateRequest{Name: "svc", Role: skaldv1.Role_ROLE_WRITER}))
	if err != nil {
		t.Fatalf("create a credential through a follower: %v", err)
	}
	replied := resp.Msg.Credential.GetCreatedAt().AsTime().UnixNano()

	mu.Lock()
	fb, lb := backends[f.Node], backends[l.Node]
	mu.Unlock()
	sent := fb.created()
	if len(sent) != 1 || sent[0].Name != "svc" || sent[0].CreatedUnixNano != 0 {
		t.Fatalf("the follower's API handed the node %v, want one command for svc without a creation time", sent)
	}
	if got := lb.created(); len(got) != 0 {
		t.Fatalf("the leader's API created %v: the call was not the follower's", got)
	}
	// The reply came once the leader applied the entry: its store holds it.
	stored, err := l.Node.Credentials(nstoken.AdminNamespace)
	if err != nil {
		t.Fatal(err)
	}
	var at int64
	for _, cr := range stored {
		if cr.Name == "svc" {
			at = cr.CreatedAt
		}
	}
	if at == 0 || at != replied {
		t.Fatalf("stored record created at %d, reply says %d: want the same leader-stamped time", at, replied)
	}
}

// TestCredentialCreatedAtFromAnOldLeader: during a rolling upgrade a
// leader older than CredentialResult.created_unix_nano answers without
// the time; the reply then says this node's clock at the call, not 0.
func TestCredentialCreatedAtFromAnOldLeader(t *testing.T) {
	t.Parallel()
	c := node.StartTestCluster(t, 1, node.TestClusterOptions{
		Handler: func(tn *node.TestNode) http.Handler {
			o := defaultOptions
			o.Registerer, o.Gatherer = tn.Registry, tn.Registry
			return NewHandler(&recordingBackend{Node: tn.Node, oldLeader: true}, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	opts := []connect.ClientOption{connect.WithInterceptors(bearerInterceptor(adminToken))}
	creds := skaldv1connect.NewCredentialsClient(http1(), "http://"+l.Addr, opts...)
	before := time.Now()
	resp, err := creds.Create(ctxT(t), connect.NewRequest(&skaldv1.CredentialsCreateRequest{Name: "svc", Role: skaldv1.Role_ROLE_WRITER}))
	after := time.Now()
	if err != nil {
		t.Fatalf("create a credential: %v", err)
	}
	if got := resp.Msg.Credential.GetCreatedAt().AsTime(); got.Before(before) || got.After(after) {
		t.Fatalf("created_at %v, want this node's clock during the call (%v..%v)", got, before, after)
	}
}
