package rpc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/node/nodeapi"
)

// decodeCounter is a node whose reads count the message bytes they decode
// (fsm.View.DecodedBytes).
type decodeCounter struct {
	*node.Node
	decoded atomic.Int64
}

func (d *decodeCounter) Read(ctx context.Context, ns string, opts nodeapi.ReadOptions,
	fn func(*fsm.View) error) (uint64, error) {
	return d.Node.Read(ctx, ns, opts, func(v *fsm.View) error {
		err := fn(v)
		d.decoded.Add(v.DecodedBytes())
		return err
	})
}

// serveBackend serves NewHandler(b, opts) on a loopback listener of its
// own and returns its address.
func serveBackend(t *testing.T, b Backend, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewHandler(b, opts)}
	opts.Limits.Configure(srv)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// EventoDB's /subscribe sends pokes, so its catch-up reads where the
// messages are and never their payloads: every poke arrives, in order,
// and the reads behind them decode no message.
func TestSubscribePokesReadNoPayloads(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	data := []byte(`{"x":"` + strings.Repeat("a", 32<<10) + `"}`)
	var all []poke
	for i := range 30 {
		r, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("blob-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "Big", Data: data}}}))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, poke{Stream: fmt.Sprintf("blob-%d", i%3), Position: int64(i / 3),
			GlobalPosition: r.Msg.FirstGlobalPosition})
	}
	member := func(p poke) bool { return fsm.ConsumerGroupMember(p.Stream, 2) == 0 }
	for _, tc := range []struct {
		name  string
		query string
		keep  func(poke) bool
	}{
		{"stream", "stream=blob-1&position=2", func(p poke) bool { return p.Stream == "blob-1" && p.Position >= 2 }},
		{"category", "category=blob", func(poke) bool { return true }},
		{"category from a position", "category=blob&position=11", func(p poke) bool { return p.GlobalPosition >= 11 }},
		{"consumer group member", "category=blob&consumer=0&size=2", member},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := &decodeCounter{Node: s.n}
			addr := serveBackend(t, counter, defaultOptions)
			want := slices.DeleteFunc(slices.Clone(all), func(p poke) bool { return !tc.keep(p) })
			if len(want) == 0 {
				t.Fatal("no message matches")
			}
			ch, resp := sse(t, evClient{t: t, addr: addr, token: adminToken}, tc.query)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("subscribe?%s: %d", tc.query, resp.StatusCode)
			}
			var got []poke
			for range want {
				got = append(got, next(t, ch))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pokes %v, want %v", got, want)
			}
			if n := counter.decoded.Load(); n != 0 {
				t.Fatalf("catch-up of %d pokes decoded %d bytes of messages, want 0", len(want), n)
			}
		})
	}
}
