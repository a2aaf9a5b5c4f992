package client

import (
	"crypto/tls"
	"errors"
	"net/http"
	"time"
)

// Config configures a Client. Zero values mean the defaults stated per
// field.
type Config struct {
	// Endpoints are API addresses of some members, as host:port or
	// http(s):// URLs. Required. With the admin token the client learns
	// the rest from Cluster.Status; with a namespace token it uses only
	// these (list every member, or one load balancer).
	Endpoints []string

	// Token is the bearer token: a namespace's token, or the admin token
	// (the "default" namespace's), which also allows Namespaces and
	// Cluster calls and lets the client discover the members.
	Token string

	// Namespace, when set, is the namespace an admin token's calls act on
	// (the Skald-Namespace header): its data, groups and credentials. A
	// namespace token may name only its own. Empty: the token's own.
	Namespace string

	// TLS, when set, makes host:port endpoints (and the discovered ones)
	// https with this configuration. Without it they are plaintext HTTP/2
	// (h2c); https:// URLs then use the system's roots.
	TLS *tls.Config

	// HTTPClient replaces the client's own HTTP client (then TLS,
	// DialTimeout and KeepAlive are not used). Subscriptions need one
	// without an overall Timeout.
	HTTPClient *http.Client

	// Consistency is the default of every read; per call, WithLinearizable,
	// WithLocal and WithSession override it. Default Session.
	Consistency Consistency

	// DiscoveryInterval is how often the member list and the leader are
	// refreshed from Cluster.Status (admin token only; failures refresh at
	// once). Default 10 s; negative: only on failures.
	DiscoveryInterval time.Duration

	// DialTimeout bounds connecting to one member; a member that does not
	// accept in time is skipped for the next. Default 2 s.
	DialTimeout time.Duration

	// ReadAttemptTimeout bounds one read attempt on one member, so a hung
	// member is left for another; under a caller's deadline an attempt
	// also gets at most half of the time left. Writes have no such bound:
	// a write cut short has an unknown outcome. Default 5 s.
	ReadAttemptTimeout time.Duration

	// Pinned makes the client call only Endpoints, as given: it does not
	// learn the members from Cluster.Status, does not follow the leader a
	// follower names, and Status does not change its members. Writes go
	// to the endpoint that took the last write, else the next in turn,
	// and a member that is not the leader forwards them (one hop more).
	// For clients that must reach the cluster through a load balancer or
	// a proxy (one endpoint that is any member), and for tools that
	// choose which nodes serve (skald bench --target, the skald CLI's
	// --addr). Default false: cluster-aware routing.
	Pinned bool

	// FailFast makes a call give up once it has tried every member and
	// none answered for good, rather than pausing and trying again until
	// its context ends: it then returns ErrUnavailable (ErrUnknownOutcome
	// when a write may have been applied) wrapping the last attempt's
	// error, so errors.As finds the cause (a dial error for a member that
	// cannot be reached, the server's refusal). A subscription gives up
	// the same way when a round over the members delivers nothing. For
	// one-shot tools that report a failure at once (the skald CLI).
	// Default false.
	FailFast bool

	// DownFor is how long a member that failed to answer is tried only
	// after the others; it doubles with each further failure, up to 32
	// times, until the member answers again. Default 1 s.
	DownFor time.Duration

	// AppendStreams is how many EventStore.AppendStream streams the client
	// may open to one member for Append (appendstream.go): concurrent
	// appends then share a few HTTP/2 streams instead of making a request
	// each, which costs the server less per write. Each stream carries at
	// most 64 appends at once; past that, and to a server or transport
	// that cannot stream (an older server, HTTP/1.1), Append is a unary
	// call as before. Default 0: 4 streams; negative: off, every Append a
	// unary call.
	AppendStreams int

	// Observe, when set, is told the member (its URL, as the client calls
	// it) that answered each call successfully: a read, a write (the
	// member it was sent to, which forwarded it when it was not the
	// leader), Subscribe's first delivery from a member (not a group's
	// deliveries to Consume; its Ack and Nack are writes). It runs on
	// the calling goroutine before the call returns, so it must not block.
	// For tests and diagnostics (which member served what), not routing.
	Observe func(url string)
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Endpoints) == 0 {
		return c, errors.New("skald: Config.Endpoints is empty")
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = 10 * time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 2 * time.Second
	}
	if c.ReadAttemptTimeout <= 0 {
		c.ReadAttemptTimeout = 5 * time.Second
	}
	if c.DownFor <= 0 {
		c.DownFor = time.Second
	}
	if c.AppendStreams == 0 {
		c.AppendStreams = 4
	}
	return c, nil
}
