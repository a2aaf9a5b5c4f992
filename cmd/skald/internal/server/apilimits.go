package server

import (
	"flag"
	"fmt"
	"time"

	"github.com/skalddb/skald/rpc"
)

// apiLimitFlags are the API port's per-client bounds (rpc.Limits and the
// connection cap); docs/security.md lists them.
type apiLimitFlags struct {
	maxConnections                         int
	maxConnectionsPerIP                    int
	readTimeout, writeTimeout, idleTimeout time.Duration
	pageBytes                              int
	replyBudget                            int64
	scanBudget                             int
	streamInFlight                         int
}

func (a *apiLimitFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&a.maxConnections, "max-connections", 0, fmt.Sprintf("most client connections open at once, of the API port and --kurrentdb-addr together (one cap for both); past it a new one is closed at once and counted in skald_rpc_connections_refused_total or skald_kurrentdb_connections_refused_total (0: the fd limit less what storage may need for --max-open-namespaces, at most %d)", maxDefaultConnections))
	fs.IntVar(&a.maxConnectionsPerIP, "max-connections-per-ip", 0,
		"most client connections open at once from one remote IP address, API port and --kurrentdb-addr together, "+
			"so that one address cannot take all of --max-connections; past it a new one is closed at once and counted in "+
			"skald_rpc_connections_refused_per_ip_total or skald_kurrentdb_connections_refused_per_ip_total (0: 256, or half of --max-connections when less, at least 64; "+
			"clients behind one NAT or a proxy that hides their addresses share one: raise it, or set it to "+
			"--max-connections to turn it off)")
	fs.DurationVar(&a.readTimeout, "read-timeout", rpc.DefaultReadTimeout, "longest an API or KurrentDB request may take to arrive, headers and body (/import: per MiB of body; KurrentDB's persistent-subscription reads: none)")
	fs.DurationVar(&a.writeTimeout, "write-timeout", rpc.DefaultWriteTimeout, "longest a unary API or KurrentDB reply may take from the request's start (KurrentDB: also the deadline of a unary call or Append whose client sets a later one or none); for downloads and streamed replies, each write (API streams such as Subscribe have none)")
	fs.DurationVar(&a.idleTimeout, "idle-timeout", rpc.DefaultIdleTimeout, "API and KurrentDB connections with no request for this long are closed")
	fs.IntVar(&a.pageBytes, "read-page-bytes", rpc.DefaultPageBytes, "most bytes of messages in one read's reply (Connect: truncated, read on; EventoDB: a shorter batch)")
	fs.Int64Var(&a.replyBudget, "reply-budget-bytes", rpc.DefaultReplyBudgetBytes,
		"most bytes of read replies the node holds for all clients at once, read and not yet written (each read "+
			"counts its page, at most --read-page-bytes; the heap they take is about twice this); past it a read "+
			"waits a second, then is refused RESOURCE_EXHAUSTED (EventoDB: 503 SERVER_BUSY). The default lets 341 "+
			"full pages wait for slow clients")
	fs.IntVar(&a.scanBudget, "read-scan-budget", rpc.DefaultScanBudget, "most entries one Connect read (or one subscription page) examines without returning them, for filters that match rarely; past it the reply says where to read on (resume_from)")
	fs.IntVar(&a.streamInFlight, "append-stream-in-flight", rpc.DefaultAppendStreamInFlight, "most appends in flight (received, not yet answered) on one EventStore.AppendStream; one more is answered RESOURCE_EXHAUSTED, not applied, and the stream goes on")
}

func (a *apiLimitFlags) validate() error {
	switch {
	case a.maxConnections < 0:
		return fmt.Errorf("--max-connections must not be negative, got %d", a.maxConnections)
	case a.maxConnectionsPerIP < 0:
		return fmt.Errorf("--max-connections-per-ip must not be negative, got %d", a.maxConnectionsPerIP)
	case a.readTimeout < time.Second:
		return fmt.Errorf("--read-timeout must be at least 1s, got %s", a.readTimeout)
	case a.writeTimeout < time.Second:
		return fmt.Errorf("--write-timeout must be at least 1s, got %s", a.writeTimeout)
	case a.idleTimeout < time.Second:
		return fmt.Errorf("--idle-timeout must be at least 1s, got %s", a.idleTimeout)
	case a.pageBytes < 64<<10 || a.pageBytes > 64<<20:
		return fmt.Errorf("--read-page-bytes must be between 64 KiB and 64 MiB, got %d", a.pageBytes)
	case a.replyBudget < int64(a.pageBytes) || a.replyBudget > 1<<40:
		return fmt.Errorf("--reply-budget-bytes must be between --read-page-bytes (%d) and 1 TiB, got %d",
			a.pageBytes, a.replyBudget)
	case a.scanBudget < 1000 || a.scanBudget > 100_000_000:
		return fmt.Errorf("--read-scan-budget must be between 1000 and 100000000, got %d", a.scanBudget)
	case a.streamInFlight < 1 || a.streamInFlight > 65536:
		return fmt.Errorf("--append-stream-in-flight must be between 1 and 65536, got %d", a.streamInFlight)
	}
	return nil
}

// rpcLimits returns the limits the handler and server get.
func (a *apiLimitFlags) rpcLimits() rpc.Limits {
	return rpc.Limits{ReadTimeout: a.readTimeout, WriteTimeout: a.writeTimeout, IdleTimeout: a.idleTimeout, PageBytes: a.pageBytes, ScanBudget: a.scanBudget,
		AppendStreamInFlight: a.streamInFlight, ReplyBudgetBytes: a.replyBudget}
}

// connections returns --max-connections, or its default under the
// process's fd limit.
func (a *apiLimitFlags) connections(maxOpenNamespaces int) int {
	if a.maxConnections > 0 {
		return a.maxConnections
	}
	soft, _, err := fdLimit()
	if err != nil {
		soft = 0
	}
	n, _ := defaultMaxConnections(soft, maxOpenNamespaces)
	return n
}

// connectionsPerIP returns --max-connections-per-ip, or its default for
// maxConns connections in all.
func (a *apiLimitFlags) connectionsPerIP(maxConns int) int {
	if a.maxConnectionsPerIP > 0 {
		return a.maxConnectionsPerIP
	}
	return rpc.DefaultMaxConnectionsPerIP(maxConns)
}
