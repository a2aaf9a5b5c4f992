// Package nemesis owns the faults a chaos run injects and their schedule:
// a quiet start, then alternating fault and heal windows drawn from the
// chosen faults, then healing everything. Every start and stop is recorded
// in the history. It must never leave a fault active when Run returns.
package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/skalddb/skald/jepsen/internal/cluster"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// Faults is every fault name, in the order `-nemesis all` uses.
var Faults = []string{"kill", "pause", "partition", "leader-kill", "transfer", "membership"}

// Parse turns "-nemesis" into fault names: none, all, or a comma list.
func Parse(s string) ([]string, error) {
	switch s {
	case "", "none":
		return nil, nil
	case "all":
		return append([]string(nil), Faults...), nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !contains(Faults, f) {
			return nil, fmt.Errorf("unknown nemesis %q (known: none, all, %s)", f, strings.Join(Faults, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Config is a schedule.
type Config struct {
	Faults   []string
	Quiet    time.Duration // before the first fault
	Interval time.Duration // a fault lasts Interval±25%, then Interval/2 of calm
	Rng      *rand.Rand
	Logf     func(format string, args ...any)
}

// Nemesis injects faults into one cluster.
type Nemesis struct {
	c   *cluster.Cluster
	rec *history.Recorder
	cfg Config

	// what is active, so Heal can undo it
	killed []*cluster.Node
	paused []*cluster.Node
	cut    bool
}

// New prepares a nemesis; it injects nothing until Run.
func New(c *cluster.Cluster, rec *history.Recorder, cfg Config) *Nemesis {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Nemesis{c: c, rec: rec, cfg: cfg}
}

// Skipped returns the chosen faults the network cannot inject, and why
// (today every network can inject every fault).
func (n *Nemesis) Skipped(net cluster.Network) map[string]string {
	return map[string]string{}
}

// Run injects faults until ctx ends, then heals everything.
func (n *Nemesis) Run(ctx context.Context, skipped map[string]string) error {
	var faults []string
	for _, f := range n.cfg.Faults {
		if _, skip := skipped[f]; !skip {
			faults = append(faults, f)
		}
	}
	defer n.Heal(context.Background())
	if len(faults) == 0 {
		<-ctx.Done()
		return nil
	}
	if !sleep(ctx, n.cfg.Quiet) {
		return nil
	}
	for {
		f := faults[n.cfg.Rng.IntN(len(faults))]
		what, err := n.start(ctx, f)
		if err != nil {
			n.cfg.Logf("nemesis %s: %v", f, err)
			what = "failed: " + err.Error()
		}
		n.record("start-"+f, what)
		jitter := time.Duration(n.cfg.Rng.Int64N(int64(n.cfg.Interval)/2+1)) - n.cfg.Interval/4
		ok := sleep(ctx, n.cfg.Interval+jitter)
		n.Heal(context.Background())
		n.record("stop-"+f, "")
		if !ok || !sleep(ctx, n.cfg.Interval/2) {
			return nil
		}
	}
}

func (n *Nemesis) record(f, what string) {
	n.rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: f, Value: history.Value{Nemesis: what}})
	n.cfg.Logf("nemesis %s %s", f, what)
}

func (n *Nemesis) start(ctx context.Context, f string) (string, error) {
	nodes := n.c.Nodes
	switch f {
	case "kill":
		vs := n.pick(nodes)
		for _, v := range vs {
			if err := n.c.Kill(v); err != nil {
				return "", err
			}
			n.killed = append(n.killed, v)
		}
		return "killed " + names(vs), nil
	case "leader-kill":
		l, err := n.c.Leader(ctx)
		if err != nil {
			return "", err
		}
		if err := n.c.Kill(l); err != nil {
			return "", err
		}
		n.killed = append(n.killed, l)
		return "killed leader " + l.Name, nil
	case "pause":
		vs := n.pick(nodes)
		if n.cfg.Rng.IntN(2) == 0 {
			if l, err := n.c.Leader(ctx); err == nil {
				vs = []*cluster.Node{l}
			}
		}
		for _, v := range vs {
			if err := n.c.Pause(v); err != nil {
				return "", err
			}
			n.paused = append(n.paused, v)
		}
		return "paused " + names(vs), nil
	case "partition":
		a, b, what := n.grudge(ctx)
		var pairs [][2]int
		for _, x := range a {
			for _, y := range b {
				pairs = append(pairs, [2]int{x.Index, y.Index})
			}
		}
		n.cut = true
		if err := n.c.Net().Cut(pairs); err != nil {
			return "", err
		}
		return what, nil
	case "membership":
		// A follower leaves for good and comes back as a new server with
		// empty data (etcd's MemberReplace): the leader adds it, it gets a
		// snapshot and is promoted.
		l, _ := n.c.Leader(ctx)
		var cands []*cluster.Node
		for _, v := range nodes {
			if v != l && v.Running() && !v.Paused() {
				cands = append(cands, v)
			}
		}
		if len(cands) == 0 {
			return "", fmt.Errorf("no running follower to replace")
		}
		v := cands[n.cfg.Rng.IntN(len(cands))]
		if err := n.c.Leave(ctx, v); err != nil {
			return "", err
		}
		n.killed = append(n.killed, v)
		return "replaced " + v.Name + " (left, data wiped; rejoins on heal)", nil
	case "transfer":
		from, to, err := n.c.TransferLeadership(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("leadership %s -> %s", from, to), nil
	}
	return "", fmt.Errorf("unknown fault %s", f)
}

// pick chooses one node or a minority.
func (n *Nemesis) pick(nodes []*cluster.Node) []*cluster.Node {
	k := 1
	if minority := (len(nodes) - 1) / 2; minority > 1 && n.cfg.Rng.IntN(2) == 0 {
		k = minority
	}
	perm := n.cfg.Rng.Perm(len(nodes))
	out := make([]*cluster.Node, k)
	for i := range k {
		out[i] = nodes[perm[i]]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// grudge splits the nodes in two: the leader alone, one random node alone,
// or a random minority against the majority.
func (n *Nemesis) grudge(ctx context.Context) (a, b []*cluster.Node, what string) {
	nodes := n.c.Nodes
	switch n.cfg.Rng.IntN(3) {
	case 0:
		if l, err := n.c.Leader(ctx); err == nil {
			a = []*cluster.Node{l}
			what = "isolated leader " + l.Name
		}
	case 1:
		a = n.pick(nodes)
		what = "isolated " + names(a)
	}
	if a == nil {
		perm := n.cfg.Rng.Perm(len(nodes))
		for _, i := range perm[:(len(nodes)-1)/2] {
			a = append(a, nodes[i])
		}
		what = "minority " + names(a)
	}
	for _, x := range nodes {
		if !containsNode(a, x) {
			b = append(b, x)
		}
	}
	return a, b, what + " | " + names(b)
}

// Heal ends every active fault: heals the network, continues paused nodes
// and restarts killed ones.
func (n *Nemesis) Heal(ctx context.Context) {
	if n.cut {
		if err := n.c.Net().Heal(); err != nil {
			n.cfg.Logf("nemesis heal network: %v", err)
		}
		n.cut = false
	}
	for _, v := range n.paused {
		if err := n.c.Resume(v); err != nil {
			n.cfg.Logf("nemesis resume %s: %v", v.Name, err)
		}
	}
	n.paused = nil
	for _, v := range n.killed {
		if err := n.c.Restart(v); err != nil {
			n.cfg.Logf("nemesis restart %s: %v", v.Name, err)
		}
	}
	n.killed = nil
}

func names(ns []*cluster.Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ",")
}

func containsNode(ns []*cluster.Node, x *cluster.Node) bool {
	for _, n := range ns {
		if n == x {
			return true
		}
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
