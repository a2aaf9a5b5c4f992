package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// benchGrace is how long after the measured window a call may still be
// retrying before it is cancelled (and counted as an error).
const benchGrace = 10 * time.Second

// selectTargets keeps the leader or the followers among addrs, by the
// API addresses Cluster.Status reports at addrs[0]; all and cluster keep
// every address.
func selectTargets(ctx context.Context, cf *command.Flags, addrs []string, target string) ([]string, error) {
	switch target {
	case "all", "cluster":
		return addrs, nil
	case "leader", "followers":
	default:
		return nil, command.Exit(command.ExitUsage, fmt.Errorf("--target %q: want all, leader, followers or cluster", target))
	}
	first := *cf
	first.Addr = addrs[0]
	c, err := first.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return nil, command.APIError(err)
	}
	leaderAPI := ""
	for _, s := range st.Servers {
		if s.ID == st.LeaderID {
			leaderAPI = s.APIAddress
		}
	}
	var out []string
	for _, a := range addrs {
		host := strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "https://")
		if (host == leaderAPI) == (target == "leader") {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s among %v (leader at %q)", target, addrs, leaderAPI)
	}
	return out, nil
}

// benchClients are the clients a run calls through: one pinned to each
// target node (caller w uses node w mod n), or for --target cluster one
// cluster-aware client over every --addr.
type benchClients []*client.Client

// dial makes the run's clients. Unless --http2, each client has its own
// HTTP/1.1 pool keeping a connection per concurrent caller: HTTP/1.1
// costs the server less CPU per request than HTTP/2. Appends are unary
// calls but in the append-stream workload, whose clients use their own
// HTTP/2 transport and AppendStreams (client.Config.AppendStreams).
//
// Pinned clients are FailFast: a refused or failed call is counted as an
// error, as the node answered it. The cluster client retries as an
// application's would (within benchGrace after the window).
func (c *benchConfig) dial(ctx context.Context, cf *command.Flags) (benchClients, error) {
	cfg := client.Config{Token: cf.Token, TLS: cf.TLSConfig(), Consistency: c.consistency}
	newClient := func(endpoints []string) (*client.Client, error) {
		cfg := cfg
		cfg.Endpoints = endpoints
		switch {
		case c.workload == "append-stream":
			// The client's own HTTP/2 transport, appends over its streams.
		case !c.http2:
			cfg.HTTPClient = benchHTTPClient(cf, c.concurrency)
			cfg.AppendStreams = -1
		default:
			cfg.AppendStreams = -1 // unary calls, as the workload says
		}
		cl, err := client.New(ctx, cfg)
		if err != nil {
			return nil, command.APIError(err)
		}
		return cl, nil
	}
	var urls []string
	for _, a := range c.addrs {
		urls = append(urls, (&command.Flags{Addr: a}).BaseURL())
	}
	if c.target == "cluster" {
		cl, err := newClient(urls)
		if err != nil {
			return nil, err
		}
		return benchClients{cl}, nil
	}
	cfg.Pinned, cfg.FailFast = true, true
	var out benchClients
	for _, u := range urls {
		cl, err := newClient([]string{u})
		if err != nil {
			out.close()
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// of is the client caller i calls through.
func (b benchClients) of(i int) *client.Client { return b[i%len(b)] }

func (b benchClients) close() {
	for _, c := range b {
		c.Close()
	}
}

// url is the base URL of the node caller i calls (evdb-append).
func (c *benchConfig) url(i int) string {
	return (&command.Flags{Addr: c.addrs[i%len(c.addrs)]}).BaseURL()
}

// benchHTTPClient is an HTTP client of its own (its own connections)
// keeping up to idle connections open per node: as many as will be used
// at once, or every call past them dials a new one.
func benchHTTPClient(cf *command.Flags, idle int) *http.Client {
	hc := cf.HTTPClient()
	if tr, ok := hc.Transport.(*http.Transport); ok {
		tr.MaxIdleConnsPerHost = idle
	} else {
		hc.Transport = &http.Transport{MaxIdleConnsPerHost: idle}
	}
	return hc
}
