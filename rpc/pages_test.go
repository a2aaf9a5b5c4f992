package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

// Finding 4 of issue 28: with 1 MiB messages one read returned 133 MB,
// and readers that never read their replies, EventoDB batchSize -1 calls
// and stalled Subscribe streams each held their whole reply in memory.

const (
	bigMessages = 100
	// stalledMessages is the fill of the stalled-reader tests: 40 MiB,
	// more than any of their heap bounds, so a reply or a group that held
	// everything would fail them as surely as 100 MiB would.
	stalledMessages = 40
	// bigData is a data object of 1 MiB less room for a few metadata
	// bytes: data + metadata at most 1 MiB (maxMessageBytes).
	bigDataBytes = 1<<20 - 64
)

// bigNamespace appends n messages of about 1 MiB to the admin namespace
// of s: streams blob-0..2 (category blob), tag blob:1.
func bigNamespace(t *testing.T, s *server, n int) {
	t.Helper()
	c := newClients(s, protocols[1], adminToken)
	data := []byte(`{"x":"` + strings.Repeat("a", bigDataBytes-8) + `"}`)
	for i := range n {
		_, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("blob-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "Big", Data: data, Tags: []string{"blob:1"}}}}))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// pageBytes is what a page of msgs weighs as the server counts it.
func pageBytes(msgs []*skaldv1.Message) int {
	n := 0
	for _, m := range msgs {
		n += proto.Size(m)
	}
	return n
}

// TestReadPagesCapped reads 100 messages of 1 MiB in one call of every
// read, Connect and EventoDB: a Connect reply stays within the page cap
// and says truncated, an EventoDB batch is shorter, and reading on from
// the last message returns the rest once. EventoDB batchSize -1 returns
// every message from its position in one reply (streamed).
func TestReadPagesCapped(t *testing.T) {
	t.Parallel()
	s := single(t)
	bigNamespace(t, s, bigMessages)
	c := newClients(s, protocols[1], adminToken)
	type page struct {
		msgs      []*skaldv1.Message
		truncated bool
	}
	reads := []struct {
		name  string
		read  func(ctx context.Context, from, limit int64) (page, error)
		next  func(m *skaldv1.Message) int64
		tail  int64 // where reading on starts: near the end, to keep the test short
		total int   // messages from tail on
	}{
		{"ReadAll", func(ctx context.Context, from, limit int64) (page, error) {
			r, err := c.events.ReadAll(ctx, connect.NewRequest(&skaldv1.ReadAllRequest{GlobalPosition: from, Limit: limit}))
			if err != nil {
				return page{}, err
			}
			return page{r.Msg.Messages, r.Msg.Truncated}, nil
		}, func(m *skaldv1.Message) int64 { return m.GlobalPosition + 1 }, 81, 20},
		{"ReadCategory", func(ctx context.Context, from, limit int64) (page, error) {
			r, err := c.events.ReadCategory(ctx, connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "blob", GlobalPosition: from, Limit: limit}))
			if err != nil {
				return page{}, err
			}
			return page{r.Msg.Messages, r.Msg.Truncated}, nil
		}, func(m *skaldv1.Message) int64 { return m.GlobalPosition + 1 }, 81, 20},
		{"ReadStream", func(ctx context.Context, from, limit int64) (page, error) {
			r, err := c.events.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "blob-0", Position: from, Limit: limit}))
			if err != nil {
				return page{}, err
			}
			return page{r.Msg.Messages, r.Msg.Truncated}, nil
		}, func(m *skaldv1.Message) int64 { return m.Position + 1 }, 24, 10},
		{"Query", func(ctx context.Context, from, limit int64) (page, error) {
			r, err := c.events.Query(ctx, connect.NewRequest(&skaldv1.QueryRequest{After: from, Limit: limit,
				Query: &skaldv1.Query{Items: []*skaldv1.QueryItem{{Tags: []string{"blob:1"}}}}}))
			if err != nil {
				return page{}, err
			}
			return page{r.Msg.Messages, r.Msg.Truncated}, nil
		}, func(m *skaldv1.Message) int64 { return m.GlobalPosition }, 80, 20},
	}
	for _, r := range reads {
		for _, limit := range []int64{-1, 100} {
			t.Run(fmt.Sprintf("%s limit %d", r.name, limit), func(t *testing.T) {
				ctx := ctxT(t)
				p, err := r.read(ctx, 0, limit)
				if err != nil {
					t.Fatal(err)
				}
				if n := pageBytes(p.msgs); len(p.msgs) == 0 || n > DefaultPageBytes || !p.truncated {
					t.Fatalf("one call: %d messages, %d bytes, truncated %v; want at most %d bytes, truncated", len(p.msgs), n, p.truncated, DefaultPageBytes)
				}
				seen := map[int64]bool{}
				from := r.tail
				for calls := 0; ; calls++ {
					if calls > 2*bigMessages {
						t.Fatal("no end")
					}
					p, err := r.read(ctx, from, limit)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range p.msgs {
						if seen[m.GlobalPosition] {
							t.Fatalf("message %d twice", m.GlobalPosition)
						}
						seen[m.GlobalPosition] = true
					}
					if !p.truncated {
						break
					}
					from = r.next(p.msgs[len(p.msgs)-1])
				}
				if len(seen) != r.total {
					t.Fatalf("read on: %d messages, want %d", len(seen), r.total)
				}
			})
		}
	}

	ev := evClient{t: t, addr: s.addr, token: adminToken}
	for _, c := range []struct {
		name, method string
		args         []any
		want         int // messages; 0: a shorter batch within the cap
	}{
		{"category.get 100", "category.get", []any{"blob", map[string]any{"batchSize": 100}}, 0},
		{"stream.get 100", "stream.get", []any{"blob-0", map[string]any{"batchSize": 100}}, 0},
		{"category.get -1 from 61", "category.get", []any{"blob", map[string]any{"batchSize": -1, "position": 61}}, bigMessages - 60},
		{"stream.get -1 from 20", "stream.get", []any{"blob-0", map[string]any{"batchSize": -1, "position": 20}}, (bigMessages+2)/3 - 20},
		{"category.get -1 from 95", "category.get", []any{"blob", map[string]any{"batchSize": -1, "position": 95}}, bigMessages - 94},
	} {
		t.Run("EventoDB "+c.name, func(t *testing.T) {
			status, body := ev.call(c.method, c.args...)
			var msgs [][]json.RawMessage
			if status != http.StatusOK || json.Unmarshal(body, &msgs) != nil {
				t.Fatalf("%d %.200s", status, body)
			}
			if c.want == 0 {
				if len(msgs) == 0 || len(body) > DefaultPageBytes+len(msgs)*200 || len(msgs) >= 100 {
					t.Fatalf("%d messages in %d bytes: want a shorter batch within %d bytes", len(msgs), len(body), DefaultPageBytes)
				}
				return
			}
			if len(msgs) != c.want {
				t.Fatalf("%d messages, want %d", len(msgs), c.want)
			}
			last := int64(0)
			for _, m := range msgs {
				var gp int64
				json.Unmarshal(m[len(m)-4], &gp) // global position: 4th from the end in both formats
				if gp <= last {
					t.Fatalf("global positions out of order: %d after %d", gp, last)
				}
				last = gp
			}
		})
	}
}

// TestPagedReplyMatchesBatch checks that a streamed (batchSize -1) reply
// is the same bytes as the one built in memory, small messages, many
// pages.
func TestPagedReplyMatchesBatch(t *testing.T) {
	t.Parallel()
	opts := defaultOptions
	opts.Limits.PageBytes = 1000 // a few messages per page
	s := singleWith(t, opts)
	ev := evClient{t: t, addr: s.addr, token: adminToken}
	for i := range 50 {
		ev.ok(nil, "stream.write", fmt.Sprintf("small-%d", i%2), map[string]any{"type": "T", "data": map[string]any{"i": i, "html": "<&>"}})
	}
	for _, c := range []struct{ method, name string }{{"category.get", "small"}, {"stream.get", "small-1"}} {
		_, whole := ev.call(c.method, c.name, map[string]any{"batchSize": -1})
		var all []json.RawMessage
		if err := json.Unmarshal(whole, &all); err != nil || len(all) == 0 {
			t.Fatalf("%s -1: %v %.200s", c.method, err, whole)
		}
		// The same messages in one in-memory batch: raise the cap with a
		// server of its own.
		big := defaultOptions
		ls := serveLimited(t, s.n, big, 0)
		_, batch := evClient{t: t, addr: ls.addr, token: adminToken}.call(c.method, c.name, map[string]any{"batchSize": 10000})
		if string(whole) != string(batch) {
			t.Fatalf("%s: streamed reply differs from the batch:\n%s\n%s", c.method, whole, batch)
		}
	}
}

// stallListener hands out connections whose writes stop after allow
// bytes, as a client that stops reading does once the socket buffers are
// full: the writing goroutine blocks until the connection closes or its
// write deadline passes. blocked receives one value per connection that
// stalled.
type stallListener struct {
	net.Listener
	allow   int
	blocked chan *stallConn
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, l: l, closed: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	l         *stallListener
	written   int
	stallOnce sync.Once
	closeOnce sync.Once
	closed    chan struct{}
	mu        sync.Mutex
	deadline  time.Time
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) Write(b []byte) (int, error) {
	room := c.l.allow - c.written
	if room >= len(b) {
		n, err := c.Conn.Write(b)
		c.written += n
		return n, err
	}
	n := 0
	if room > 0 {
		n, _ = c.Conn.Write(b[:room])
		c.written += n
	}
	c.stallOnce.Do(func() { c.l.blocked <- c })
	c.mu.Lock()
	deadline := c.deadline
	c.mu.Unlock()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-c.closed:
		return n, net.ErrClosed
	case <-expired:
		return n, os.ErrDeadlineExceeded
	}
}

func (c *stallConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// serveStalled serves s's API on a listener whose connections stall
// after 1 KiB of reply; blocked receives one value per stalled
// connection (room for n).
func serveStalled(t *testing.T, s *server, n int, opts Options) (string, chan *stallConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stall := &stallListener{Listener: ln, allow: 1024, blocked: make(chan *stallConn, n)}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	srv := &http.Server{Handler: NewHandler(s.n, opts), Protocols: p}
	opts.Limits.Configure(srv)
	go srv.Serve(stall)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), stall.blocked
}

// waitStalled waits until n connections have stalled.
func waitStalled(t *testing.T, blocked chan *stallConn, n int) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for i := range n {
		select {
		case <-blocked:
		case <-deadline:
			t.Fatalf("%d of %d requests stalled in time", i, n)
		}
	}
}

// warmUp reads every message of s's admin namespace once, before a heap
// baseline: in race builds Pebble allocates part of its block cache and
// memtables on the Go heap, and a cache still filling would count as held
// by whatever the test measures.
func warmUp(t *testing.T, s *server) {
	t.Helper()
	c := newClients(s, protocols[1], adminToken)
	for from := int64(1); ; {
		r, err := c.events.ReadAll(ctxT(t), connect.NewRequest(&skaldv1.ReadAllRequest{GlobalPosition: from, Limit: -1}))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Msg.Truncated {
			return
		}
		from = r.Msg.Messages[len(r.Msg.Messages)-1].GlobalPosition + 1
	}
}

// heapInUse is the live heap after two collections (the second empties
// the pools' victim caches).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestStalledReadersHoldBoundedMemory is finding 4's load: clients that
// stop reading — a Connect ReadAll of everything, an EventoDB
// category.get with batchSize -1, a Subscribe stream and an EventoDB
// /subscribe — while 40 messages of 1 MiB are there to send. The test
// waits until each request's writer is blocked on its stalled connection
// and measures what the server's heap holds then: a page each, not the
// 40 MiB (and its encoding) a whole reply would hold.
func TestStalledReadersHoldBoundedMemory(t *testing.T) {
	s := single(t)
	bigNamespace(t, s, stalledMessages)
	const each = 2 // requests of each kind
	const kinds = 4
	addr, blocked := serveStalled(t, s, each*kinds, defaultOptions)
	warmUp(t, s)

	base := heapInUse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	c := newClients(&server{n: s.n, addr: addr}, protocols[1], adminToken)
	start := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	for range each {
		start(func() {
			c.events.ReadAll(ctx, connect.NewRequest(&skaldv1.ReadAllRequest{Limit: -1}))
		})
		start(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/rpc",
				strings.NewReader(`["category.get","blob",{"batchSize":-1}]`))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				<-ctx.Done()
				resp.Body.Close()
			}
		})
		start(func() {
			stream, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Category{Category: "blob"}}))
			if err == nil {
				<-ctx.Done()
				stream.Close()
			}
		})
		start(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/subscribe?category=blob&token="+adminToken, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				<-ctx.Done()
				resp.Body.Close()
			}
		})
	}
	waitStalled(t, blocked, each*kinds)
	held := int64(heapInUse()) - int64(base)
	// Per request: a page (3 MiB for a read, 1 MiB for a subscriber) and
	// the encoding of what is being written.
	const bound = each * (2*DefaultPageBytes + 2*DefaultPageBytes + 3*DefaultSubscribePageBytes + 2*DefaultSubscribePageBytes)
	t.Logf("%d stalled requests hold %.1f MiB of heap (bound %.1f MiB)", each*kinds, float64(held)/(1<<20), float64(bound)/(1<<20))
	if held > bound {
		t.Fatalf("%d stalled requests hold %d bytes of heap, over %d", each*kinds, held, bound)
	}
}

// TestStalledConsumerHoldsBoundedMemory: a persistent subscription's
// consumer that stops reading, with 40 messages of 1 MiB to deliver.
// The group reads ahead at most 4 MiB and keeps at most 16 MiB in flight
// (node/delivery/dispatcher.go), not all 40 MiB.
func TestStalledConsumerHoldsBoundedMemory(t *testing.T) {
	s := single(t)
	bigNamespace(t, s, stalledMessages)
	addr, blocked := serveStalled(t, s, 1, defaultOptions)
	c := newClients(&server{n: s.n, addr: addr}, protocols[1], adminToken)
	if _, err := c.subs.CreateGroup(ctxT(t), connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "big", Source: &skaldv1.CreateGroupRequest_Category{Category: "blob"}})); err != nil {
		t.Fatal(err)
	}
	warmUp(t, s)
	base := heapInUse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.subs.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: "big", Consumer: "stalled"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	waitStalled(t, blocked, 1)
	// The owner goes on reading and delivering up to its bounds: wait
	// until 15 messages are in flight (16 MiB of them), the most allowed.
	admin := newClients(s, protocols[1], adminToken)
	testutil.Eventually(t, waitTimeout, "15 messages in flight", func() bool {
		g, err := admin.subs.GetGroup(ctxT(t), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "big"}))
		return err == nil && g.Msg.Group.GetState().GetInFlight() >= 15
	})
	held := int64(heapInUse()) - int64(base)
	const bound = 4<<20 + 16<<20 + 4*DefaultSubscribePageBytes
	t.Logf("a stalled consumer's group holds %.1f MiB of heap (bound %.1f MiB)", float64(held)/(1<<20), float64(bound)/(1<<20))
	if held > bound {
		t.Fatalf("a stalled consumer's group holds %d bytes of heap, over %d", held, bound)
	}
}
