package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// newTestClient connects to the cluster with token (the admin token when
// empty) and closes the client at the end of the test.
func newTestClient(t *testing.T, endpoints []string, token string) *client.Client {
	t.Helper()
	if token == "" {
		token = testcluster.AdminToken
	}
	c, err := client.New(ctxT(t), client.Config{Endpoints: endpoints, Token: token})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// namespaceClient creates a namespace and returns a client with its token.
func namespaceClient(t *testing.T, admin *client.Client, endpoints []string, name string) *client.Client {
	t.Helper()
	ns, err := admin.CreateNamespace(ctxT(t), name, "", "")
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return newTestClient(t, endpoints, ns.Token)
}

func event(i int) client.NewMessage {
	return client.NewMessage{Type: "Placed", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
}

// observer records the members that answered a client's calls, as
// Config.Observe reports them.
type observer struct {
	mu   sync.Mutex
	urls []string
}

// observe sets cfg.Observe to record into a new observer.
func observe(cfg *client.Config) *observer {
	o := &observer{}
	cfg.Observe = func(url string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.urls = append(o.urls, url)
	}
	return o
}

// take returns the members reported since the last take, in order, and
// forgets them.
func (o *observer) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	urls := o.urls
	o.urls = nil
	return urls
}

// count is how many calls each member answered since the last take.
func (o *observer) count() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := map[string]int{}
	for _, u := range o.urls {
		n[u]++
	}
	return n
}

// observedClient is newTestClient with an observer of the members that
// answer its calls.
func observedClient(t *testing.T, cfg client.Config) (*client.Client, *observer) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testcluster.AdminToken
	}
	o := observe(&cfg)
	c, err := client.New(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, o
}

// writeTarget appends one message to the stream "route-probe" and returns
// the member that answered it (the one the client sent it to), with
// everything the observer saw before it forgotten.
func writeTarget(t *testing.T, c *client.Client, o *observer) string {
	t.Helper()
	o.take()
	if _, err := c.Append(ctxT(t), "route-probe", []client.NewMessage{event(0)}); err != nil {
		t.Fatalf("probe write: %v", err)
	}
	urls := o.take()
	if len(urls) != 1 {
		t.Fatalf("one write observed as answered by %v, want one member", urls)
	}
	return urls[0]
}

// checkLog fails unless stream holds exactly the ids of want, in order,
// at positions 0, 1, ...
func checkLog(t *testing.T, c *client.Client, stream string, want []string) {
	t.Helper()
	got, err := c.ReadStream(ctxT(t), client.StreamQuery{Stream: stream, Limit: -1}, client.WithLinearizable())
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

// h2c is a transport like the client's own: HTTP/2 without TLS.
func h2c() *http.Transport {
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: time.Second}).DialContext, ForceAttemptHTTP2: true}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP2(true)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

// calls counts the requests sent through it per path (a Connect
// procedure).
type calls struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func countCalls(next http.RoundTripper) *calls { return &calls{next: next, n: map[string]int{}} }

func (c *calls) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[req.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// count is how many requests went to procedure.
func (c *calls) count(procedure string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[procedure]
}
