package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

// smallBuffers hands out connections whose kernel send buffer is small,
// so a reply larger than a few KiB blocks its writer until the client
// reads.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// stalledRequest sends one HTTP/1.1 request on a connection with a small
// receive buffer and never reads the reply; the connection closes with
// the test.
func stalledRequest(t *testing.T, addr, path, contentType, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: skald\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: %s\r\nContent-Length: %d\r\n\r\n%s", path, adminToken, contentType, len(body), body)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gaugeValue is the value of the unlabelled gauge name in reg.
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// Readers that never read their replies hold the node's reply budget,
// and no more: once they hold it, a new read of either API is refused
// (Connect ResourceExhausted, EventoDB 503 SERVER_BUSY) without reading,
// more stalled readers add nothing to the heap, and when the stalled
// clients go the budget comes back and reads are served again.
func TestStalledReadersSpendReplyBudget(t *testing.T) {
	const (
		pageCap = 1 << 20
		stalled = 4 // one per kind below, each holding a page
		budget  = stalled * (pageCap + replyOverhead)
	)
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	// Pages of three messages of 330 KiB: each stalled read keeps 990 KiB
	// of its reservation, so what the four leave is less than a page.
	data := []byte(`{"x":"` + strings.Repeat("a", 330<<10) + `"}`)
	for i := range 24 {
		if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("blob-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "Big", Data: data}}})); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts := defaultOptions
	opts.Registerer, opts.Gatherer = reg, reg
	opts.Limits = Limits{PageBytes: pageCap, ReplyBudgetBytes: budget, ReplyBudgetWait: 20 * time.Millisecond}
	srv := &http.Server{Handler: NewHandler(s.n, opts)}
	opts.Limits.Configure(srv)
	go srv.Serve(smallBuffers{ln})
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	warmUp(t, s)
	base := heapInUse()

	kinds := []struct{ path, contentType, body string }{
		{"/skald.v1.EventStore/ReadCategory", "application/json", `{"category":"blob","limit":1000}`},
		{"/skald.v1.EventStore/ReadAll", "application/json", `{"limit":1000}`},
		{"/rpc", "application/json", `["category.get","blob",{"batchSize":1000}]`},
		{"/rpc", "application/json", `["category.get","blob",{"batchSize":-1}]`},
	}
	var conns []net.Conn
	for _, k := range kinds {
		conns = append(conns, stalledRequest(t, addr, k.path, k.contentType, k.body))
	}
	const held = stalled * 3 * (330 << 10)
	testutil.Eventually(t, waitTimeout, "the stalled readers hold their pages", func() bool {
		return gaugeValue(t, reg, "skald_rpc_reply_budget_bytes") >= held
	})

	api := newClients(&server{n: s.n, addr: addr}, protocols[1], adminToken)
	read := connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "blob", Limit: 10})
	_, err = api.events.ReadCategory(ctxT(t), read)
	wantCode(t, "a Connect read with the budget spent", err, connect.CodeResourceExhausted)
	ev := evClient{t: t, addr: addr, token: adminToken}
	ev.fails(http.StatusServiceUnavailable, "SERVER_BUSY", "category.get", "blob", map[string]any{"batchSize": 10})

	// More stalled readers are refused at once and hold nothing.
	for i := range 8 {
		k := kinds[i%len(kinds)]
		conns = append(conns, stalledRequest(t, addr, k.path, k.contentType, k.body))
	}
	testutil.Eventually(t, waitTimeout, "the readers past the budget are refused", func() bool {
		return testCounter(t, reg, "skald_rpc_reply_budget_refused_total") >= 2+8
	})
	if n := gaugeValue(t, reg, "skald_rpc_reply_budget_bytes"); n > budget {
		t.Fatalf("replies hold %.0f bytes of the budget of %d", n, budget)
	}
	heap := int64(heapInUse()) - int64(base)
	// Each stalled reply: its page and its JSON encoding (base64 data).
	const bound = 3 * budget
	t.Logf("%d stalled readers over a budget of %d hold %.1f MiB of heap (bound %.1f MiB)", len(conns), budget,
		float64(heap)/(1<<20), float64(bound)/(1<<20))
	if heap > bound {
		t.Fatalf("%d stalled readers hold %d bytes of heap, over %d", len(conns), heap, bound)
	}

	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, waitTimeout, "the budget comes back", func() bool {
		return gaugeValue(t, reg, "skald_rpc_reply_budget_bytes") == 0
	})
	r, err := api.events.ReadCategory(ctxT(t), read)
	if err != nil || len(r.Msg.Messages) != 3 {
		t.Fatalf("a read once the stalled clients went: %v", err)
	}
}

// testCounter is the value of the unlabelled counter name in reg.
func testCounter(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// A hold reserves up to the whole budget and no more, a reservation past
// what is left waits and is refused with errReplyBudget (counted), or
// ends with its context, and what a hold keeps or releases is free for
// the next one.
func TestReplyHold(t *testing.T) {
	t.Parallel()
	const total = 1000
	for _, tc := range []struct {
		name     string
		first    int // what a first hold reserves
		keep     int // and keeps
		second   int // what a second hold then asks for
		canceled bool
		want     error
		inUse    int64 // held by both afterwards
	}{
		{"room", 400, 400, 600, false, nil, 1000},
		{"spent", 400, 400, 601, false, errReplyBudget, 400},
		{"kept less", 1000, 300, 700, false, nil, 1000},
		{"clamped to the budget", 5000, 5000, 1, false, errReplyBudget, 1000},
		{"released", 1000, 0, 1000, false, nil, 1000},
		{"caller gone", 1000, 1000, 1, true, context.Canceled, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newReplyBudget(total, time.Millisecond, prometheus.NewRegistry())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first, second := b.hold(), b.hold()
			if err := first.reserve(ctx, tc.first); err != nil {
				t.Fatal(err)
			}
			first.keep(tc.keep)
			if tc.canceled {
				cancel()
			}
			err := second.reserve(ctx, tc.second)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("second reservation: %v, want %v", err, tc.want)
			}
			if got := b.inUse.Load(); got != tc.inUse || got != first.held+second.held {
				t.Fatalf("in use %d (holds %d + %d), want %d", got, first.held, second.held, tc.inUse)
			}
			refused := testutilCounter(b.refused)
			if wantRefused := errors.Is(tc.want, errReplyBudget); (refused == 1) != wantRefused {
				t.Fatalf("refused counted %v, want %v", refused, wantRefused)
			}
			first.release()
			second.release()
			if got := b.inUse.Load(); got != 0 || !b.sem.TryAcquire(total) {
				t.Fatalf("after release: %d in use, or the semaphore is not whole", got)
			}
		})
	}
}

// testutilCounter is a counter's value.
func testutilCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
