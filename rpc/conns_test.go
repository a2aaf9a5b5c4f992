package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/skalddb/skald/internal/testutil"
)

func TestDefaultMaxConnectionsPerIP(t *testing.T) {
	t.Parallel()
	cases := []struct{ maxConns, want int }{
		{0, 256},     // no cap on all
		{16384, 256}, // the largest computed --max-connections
		{1000, 256},  // 256 is less than half
		{300, 150},   // half
		{100, 64},    // half is less than 64
		{64, 64},     // the smallest computed --max-connections
		{10, 10},     // never more than the cap on all
	}
	for _, tc := range cases {
		if got := DefaultMaxConnectionsPerIP(tc.maxConns); got != tc.want {
			t.Errorf("DefaultMaxConnectionsPerIP(%d) = %d, want %d", tc.maxConns, got, tc.want)
		}
	}
}

// One address holding every connection it may, each with a request head
// it never finishes (a header slowloris), and dialing more: its extra
// connections are closed at once and counted, and another address's calls
// are served all the while. The hog dials from 127.0.0.2, the client from
// 127.0.0.1. Without the per-address cap the hog holds all of
// --max-connections and every call is refused.
func TestConnectionCapPerIP(t *testing.T) {
	t.Parallel()
	const maxConns, perIP = 8, 4
	s := single(t)
	ls := serveCapped(t, s.n, defaultOptions, maxConns, perIP)
	hogDialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: waitTimeout}
	var hog []net.Conn
	t.Cleanup(func() {
		for _, c := range hog {
			c.Close()
		}
	})
	for range maxConns { // as many as the whole cap
		c, err := hogDialer.Dial("tcp", ls.addr)
		if err != nil {
			continue // refused at once: the close may reach the dial
		}
		hog = append(hog, c)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ") // never finished
	}
	refusedPerIP := func() float64 {
		var m dto.Metric
		if err := ls.ln.refusedPerIP.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	testutil.Until(t, waitTimeout, "every connection of the hog to be taken or refused", func() (bool, string) {
		open, refused := ls.ln.Open(), refusedPerIP()
		return open+int64(refused) == maxConns, fmt.Sprintf("%d open, %v refused", open, refused)
	})
	if open, refused := ls.ln.Open(), refusedPerIP(); open != perIP || refused != maxConns-perIP {
		t.Fatalf("the hog holds %d connections and %v were refused, want %d and %d", open, refused, perIP, maxConns-perIP)
	}

	// Each call on a connection of its own: the client's new connections
	// are accepted while the hog holds its share.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		body, _ := json.Marshal([]any{"stream.write", "free-1", map[string]any{"type": "T", "data": map[string]int{"i": i}}})
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+ls.addr+"/rpc", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("call %d from another address while the hog holds its cap: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d from another address: %d %s", i, resp.StatusCode, b)
		}
	}
	var m dto.Metric
	if err := ls.ln.refused.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 0 {
		t.Fatalf("skald_rpc_connections_refused_total = %v, want 0: the cap on all was never reached", got)
	}

	// The hog's slots come back when its connections close.
	for _, c := range hog {
		c.Close()
	}
	testutil.Eventually(t, waitTimeout, "the hog's slots to be freed", func() bool {
		ls.ln.caps.mu.Lock()
		defer ls.ln.caps.mu.Unlock()
		return ls.ln.Open() == 0 && len(ls.ln.caps.byIP) == 0
	})
	c, err := hogDialer.Dial("tcp", ls.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.Eventually(t, waitTimeout, "the hog's new connection to be held", func() bool { return ls.ln.Open() == 1 })
	if got := refusedPerIP(); got != maxConns-perIP {
		t.Fatalf("skald_rpc_connections_refused_per_ip_total = %v after the hog's slots were freed, want %d",
			got, maxConns-perIP)
	}
}
