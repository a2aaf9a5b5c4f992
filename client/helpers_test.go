package client

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/skalddb/skald/internal/testcluster"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// newTestClient connects to the cluster with token (the admin token when
// empty) and closes the client at the end of the test.
func newTestClient(t *testing.T, endpoints []string, token string) *Client {
	t.Helper()
	if token == "" {
		token = testcluster.AdminToken
	}
	c, err := New(ctxT(t), Config{Endpoints: endpoints, Token: token})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// namespaceClient creates a namespace and returns a client with its token.
func namespaceClient(t *testing.T, admin *Client, endpoints []string, name string) *Client {
	t.Helper()
	ns, err := admin.CreateNamespace(ctxT(t), name, "", "")
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return newTestClient(t, endpoints, ns.Token)
}

func event(i int) NewMessage {
	return NewMessage{Type: "Placed", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
}

// writeTarget is the member the client would send a write to now.
func (c *Client) writeTarget() string {
	if m := c.view.pick(true, map[*member]bool{}); m != nil {
		return m.url
	}
	return ""
}

// checkLog fails unless stream holds exactly the ids of want, in order,
// at positions 0, 1, ...
func checkLog(t *testing.T, c *Client, stream string, want []string) {
	t.Helper()
	got, err := c.ReadStream(ctxT(t), StreamQuery{Stream: stream, Limit: -1}, WithLinearizable())
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s holds %d messages, want the %d acknowledged", stream, len(got), len(want))
	}
	for i, m := range got {
		if m.ID != want[i] || m.Position != int64(i) {
			t.Fatalf("%s[%d] = id %s at position %d, want id %s at position %d", stream, i, m.ID, m.Position, want[i], i)
		}
	}
}
