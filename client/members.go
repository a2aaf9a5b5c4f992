package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// member is one node's API, with the generated clients that call it.
type member struct {
	url        string // scheme://host:port
	events     skaldv1connect.EventStoreClient
	namespaces skaldv1connect.NamespacesClient
	cluster    skaldv1connect.ClusterClient
	subs       skaldv1connect.SubscriptionsClient
	creds      skaldv1connect.CredentialsClient
	indexes    skaldv1connect.IndexesClient
}

// view is what the client knows of the cluster: the members to call, the
// leader when known, and which members failed lately.
//
// Writes go to the leader; without one known (a namespace token cannot
// ask Cluster.Status), to the member the last write succeeded on, and that
// member forwards them. Reads go round robin over the members that have
// not failed within Config.DownFor.
type view struct {
	newMember func(url string) *member
	downFor   time.Duration

	mu struct {
		sync.Mutex
		seeds   []*member // the configured endpoints
		members []*member // the discovered ones and the seeds
		known   map[string]*member
		leader  *member // nil when unknown
		writer  *member // where the last write succeeded
		failed  map[*member]failure
		next    int // round robin
	}
}

func newView(seeds []string, newMember func(string) *member, downFor time.Duration) *view {
	v := &view{newMember: newMember, downFor: downFor}
	v.mu.known = make(map[string]*member)
	v.mu.failed = make(map[*member]failure)
	for _, s := range seeds {
		v.mu.seeds = append(v.mu.seeds, v.memberLocked(s))
	}
	v.mu.members = v.mu.seeds
	return v
}

func (v *view) memberLocked(url string) *member {
	m := v.mu.known[url]
	if m == nil {
		m = v.newMember(url)
		v.mu.known[url] = m
	}
	return m
}

// pick returns the member for the next attempt, skipping those in tried.
// It returns nil when every member has been tried.
func (v *view) pick(write bool, tried map[*member]bool) *member {
	v.mu.Lock()
	defer v.mu.Unlock()
	if write {
		for _, m := range []*member{v.mu.leader, v.mu.writer} {
			if m != nil && !tried[m] && !v.downLocked(m) {
				return m
			}
		}
	}
	// Members that have not failed lately first, then the others.
	for _, wantDown := range []bool{false, true} {
		n := len(v.mu.members)
		for i := range n {
			m := v.mu.members[(v.mu.next+i)%n]
			if tried[m] || v.downLocked(m) != wantDown {
				continue
			}
			v.mu.next = (v.mu.next + i + 1) % n
			return m
		}
	}
	return nil
}

// failure is a member's run of failures since it last answered.
type failure struct {
	last  time.Time
	count int
}

// downLocked reports whether m failed lately: within DownFor after its
// first failure, doubling with each further one up to 32 times DownFor,
// so a dead member costs a probe now and then, not every second.
func (v *view) downLocked(m *member) bool {
	f, ok := v.mu.failed[m]
	return ok && time.Since(f.last) < v.downFor<<min(f.count-1, 5)
}

// failed records that m did not answer; a failed leader is forgotten.
func (v *view) failed(m *member) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.mu.failed[m]
	v.mu.failed[m] = failure{last: time.Now(), count: f.count + 1}
	if v.mu.leader == m {
		v.mu.leader = nil
	}
	if v.mu.writer == m {
		v.mu.writer = nil
	}
}

// refusedWrite records that m refused a write for want of leadership: it
// is not the leader, whatever the client thought.
func (v *view) refusedWrite(m *member) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.leader == m {
		v.mu.leader = nil
	}
	if v.mu.writer == m {
		v.mu.writer = nil
	}
}

// answered records that m answered; after a write, m keeps the writes.
func (v *view) answered(m *member, write bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.mu.failed, m)
	if write {
		v.mu.writer = m
	}
}

// hint takes addr (host:port) as the leader if it is one of the members
// and has not failed lately: a server's hint never adds a member, so a
// client behind a load balancer does not chase internal addresses.
func (v *view) hint(addr string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range v.mu.members {
		if strings.HasSuffix(m.url, "://"+addr) && !v.downLocked(m) {
			v.mu.leader = m
			return
		}
	}
}

func (v *view) hasLeader() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.leader != nil
}

// update replaces the members and the leader with a Cluster.Status reply.
func (v *view) update(st *skaldv1.StatusResponse, scheme string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var members []*member
	var leader *member
	for _, s := range st.Servers {
		if s.ApiAddress == "" {
			continue
		}
		m := v.memberLocked(scheme + "://" + s.ApiAddress)
		members = append(members, m)
		if s.Id == st.LeaderId {
			leader = m
		}
	}
	if len(members) == 0 {
		return
	}
	// The configured endpoints stay members: a client outside the
	// cluster's network may reach the nodes only through them (a load
	// balancer), not at the addresses the nodes advertise.
	for _, m := range v.mu.seeds {
		if !slices.Contains(members, m) {
			members = append(members, m)
		}
	}
	if leader != nil && v.downLocked(leader) {
		// The member answering has not noticed yet that its leader died.
		leader = nil
	}
	v.mu.members, v.mu.leader = members, leader
	if v.mu.writer != nil && leader != nil {
		v.mu.writer = nil
	}
}

// statusTargets are the members to ask for Cluster.Status, the likely
// live ones first.
func (v *view) statusTargets() []*member {
	v.mu.Lock()
	defer v.mu.Unlock()
	var up, down []*member
	seen := map[*member]bool{}
	for _, m := range append(append([]*member{v.mu.leader}, v.mu.members...), v.mu.seeds...) {
		if m == nil || seen[m] {
			continue
		}
		seen[m] = true
		if v.downLocked(m) {
			down = append(down, m)
		} else {
			up = append(up, m)
		}
	}
	return append(up, down...)
}

// discoverer keeps the view current from Cluster.Status when the token
// allows it (the admin token).
type discoverer struct {
	view    *view
	scheme  string
	timeout time.Duration
	kick    chan struct{}

	mu       sync.Mutex
	disabled bool // the token may not call Cluster.Status
}

// refresh asks the members for Cluster.Status until one answers. It
// returns a definite refusal (an auth error) and nil otherwise; when
// Status is not allowed for the token it disables discovery.
func (d *discoverer) refresh(ctx context.Context) error {
	if !d.enabled() {
		return nil
	}
	for _, m := range d.view.statusTargets() {
		cctx, cancel := context.WithTimeout(ctx, d.timeout)
		resp, err := m.cluster.Status(cctx, connect.NewRequest(&skaldv1.StatusRequest{}))
		cancel()
		if err == nil {
			d.view.answered(m, false)
			d.view.update(resp.Msg, d.scheme)
			return nil
		}
		switch connect.CodeOf(err) {
		case connect.CodePermissionDenied:
			d.mu.Lock()
			d.disabled = true
			d.mu.Unlock()
			return nil
		case connect.CodeUnauthenticated:
			return serverError(m.url, asConnect(err))
		}
		if !connect.IsWireError(err) && ctx.Err() == nil {
			d.view.failed(m) // unreachable or hung
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

func (d *discoverer) enabled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.disabled
}

// soon asks the loop for a refresh without waiting for it.
func (d *discoverer) soon() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// loop refreshes every interval and on request until ctx ends. While the
// members know no leader (an election, a transfer) it asks again soon,
// from 50 ms doubling to 1 s, so writes go straight to the new leader
// once there is one.
func (d *discoverer) loop(ctx context.Context, interval time.Duration) {
	timer := time.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	retry := time.Duration(0)
	for d.enabled() {
		switch {
		case retry > 0:
			timer.Reset(retry)
		case interval > 0:
			timer.Reset(interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-d.kick:
		}
		d.refresh(ctx)
		if d.view.hasLeader() {
			retry = 0
		} else {
			retry = min(max(2*retry, 50*time.Millisecond), time.Second)
		}
	}
}

// leaderHeader is rpc.LeaderHeader: the leader's API address on the reply
// to a write a follower forwarded.
const leaderHeader = "Skald-Leader"

// leaderHints passes the leader hints of replies to the view.
type leaderHints struct{ view *view }

func (h *leaderHints) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		var addr string
		var ce *connect.Error
		switch {
		case err == nil:
			addr = resp.Header().Get(leaderHeader)
		case errors.As(err, &ce):
			addr = ce.Meta().Get(leaderHeader)
		}
		if addr != "" {
			h.view.hint(addr)
		}
		return resp, err
	}
}

func (h *leaderHints) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (h *leaderHints) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func asConnect(err error) *connect.Error {
	if ce, ok := err.(*connect.Error); ok {
		return ce
	}
	return connect.NewError(connect.CodeOf(err), err)
}

func schemeOf(url string) string {
	scheme, _, _ := strings.Cut(url, "://")
	return scheme
}
