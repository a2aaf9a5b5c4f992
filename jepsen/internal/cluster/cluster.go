// Package cluster owns the chaos harness's Skald processes: it places them
// on a Network, starts, kills, pauses and restarts them, and asks them
// about leadership. It must never send traffic anywhere but the nodes it
// started, and never leave a process or namespace behind after Close.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/jepsen/internal/client"
)

// Config describes a cluster to start.
type Config struct {
	Bin    string   // the skald binary
	Nodes  int      // 3 or 5
	Dir    string   // nodes/<name>/{data,log} go here
	Net    Network  // where nodes listen
	Mutant string   // passed as --mutant (the binary must carry mutants)
	Args   []string // extra `skald server` flags
	Logf   func(format string, args ...any)
}

// Node is one server process.
type Node struct {
	Name  string
	Index int
	URL   string // API base URL

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	dataDir string
	logPath string

	cluster skaldv1connect.ClusterClient
}

// Running reports whether the process is alive (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Paused reports whether the process is stopped by SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Cluster is a running set of nodes.
type Cluster struct {
	cfg        Config
	Nodes      []*Node
	AdminToken string
	gossipKey  string
	admin      map[string]skaldv1connect.NamespacesClient
}

// Start launches every node and waits until they form one cluster with a
// leader and every node a voter.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	admin, err := nstoken.New(nstoken.AdminNamespace)
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	rand.Read(key)
	c := &Cluster{cfg: cfg, AdminToken: admin, gossipKey: base64.StdEncoding.EncodeToString(key), admin: map[string]skaldv1connect.NamespacesClient{}}
	hc := client.HTTPClient()
	for i := range cfg.Nodes {
		name := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(cfg.Dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		url := fmt.Sprintf("http://%s:%d", cfg.Net.Host(i), cfg.Net.Port(i, 0))
		opt := connect.WithInterceptors(client.Bearer(admin))
		c.Nodes = append(c.Nodes, &Node{
			Name: name, Index: i, URL: url, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "log"),
			cluster: skaldv1connect.NewClusterClient(hc, url, opt),
		})
		c.admin[name] = skaldv1connect.NewNamespacesClient(hc, url, opt)
	}
	for _, n := range c.Nodes {
		if err := c.Restart(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx, 90*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) addr(i, s int) string {
	return fmt.Sprintf("%s:%d", c.cfg.Net.Host(i), c.cfg.Net.Port(i, s))
}

func (c *Cluster) argv(n *Node) []string {
	var join []string
	for j := range c.cfg.Nodes {
		if j != n.Index {
			join = append(join, c.addr(j, 2))
		}
	}
	args := []string{c.cfg.Bin, "server",
		"--node-name", n.Name, "--data-dir", n.dataDir,
		"--http-addr", c.addr(n.Index, 0), "--raft-addr", c.addr(n.Index, 1), "--gossip-addr", c.addr(n.Index, 2),
		"--bootstrap-expect", strconv.Itoa(c.cfg.Nodes), "--join", strings.Join(join, ","),
		"--gossip-key", c.gossipKey, "--admin-token", c.AdminToken,
	}
	if c.cfg.Mutant != "" {
		args = append(args, "--mutant", c.cfg.Mutant)
	}
	args = append(args, c.cfg.Args...)
	return c.cfg.Net.Command(n.Index, args)
}

// Restart starts n's process if it is not running.
func (c *Cluster) Restart(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := c.argv(n)
	fmt.Fprintf(logf, "=== jepsen: %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.paused = cmd, exited, false
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "=== jepsen: %s exit: %v\n", time.Now().Format(time.RFC3339Nano), err)
		logf.Close()
		n.mu.Lock()
		if n.cmd == cmd {
			n.cmd, n.paused = nil, false
		}
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (c *Cluster) Kill(n *Node) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill %s: still running after 10s", n.Name)
	}
}

// Pause stops n with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(n *Node) error  { return c.signal(n, syscall.SIGSTOP, true) }
func (c *Cluster) Resume(n *Node) error { return c.signal(n, syscall.SIGCONT, false) }

func (c *Cluster) signal(n *Node, sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s %s: %w", sig, n.Name, err)
	}
	n.paused = paused
	return nil
}

// Status asks one node for its view of the cluster.
func (c *Cluster) Status(ctx context.Context, n *Node) (*skaldv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := n.cluster.Status(ctx, connect.NewRequest(&skaldv1.StatusRequest{}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// Leader returns the node every reachable node it asks agrees leads.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		st, err := c.Status(ctx, n)
		if err != nil || st.LeaderId == "" {
			continue
		}
		if st.LeaderId == st.NodeId {
			return n, nil
		}
		for _, s := range st.Servers {
			if s.Id == st.LeaderId {
				for _, m := range c.Nodes {
					if m.Name == s.Name {
						return m, nil
					}
				}
			}
		}
	}
	return nil, errors.New("no leader known")
}

// TransferLeadership asks the leader to hand leadership to another voter.
func (c *Cluster) TransferLeadership(ctx context.Context) (from, to string, err error) {
	l, err := c.Leader(ctx)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := l.cluster.TransferLeadership(ctx, connect.NewRequest(&skaldv1.TransferLeadershipRequest{}))
	if err != nil {
		return l.Name, "", err
	}
	return l.Name, resp.Msg.LeaderId, nil
}

// WaitHealthy waits until every node answers, all agree on one leader and
// every node is a voter.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("cluster not healthy after %s: %w", timeout, last)
}

func (c *Cluster) healthy(ctx context.Context) error {
	leader := ""
	for _, n := range c.Nodes {
		if !n.Running() {
			return fmt.Errorf("%s is not running", n.Name)
		}
		st, err := c.Status(ctx, n)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		if st.LeaderId == "" || (leader != "" && st.LeaderId != leader) {
			return fmt.Errorf("%s: leader %q, others %q", n.Name, st.LeaderId, leader)
		}
		leader = st.LeaderId
		voters := 0
		for _, s := range st.Servers {
			if s.Suffrage == skaldv1.Suffrage_SUFFRAGE_VOTER {
				voters++
			}
		}
		if voters != c.cfg.Nodes {
			return fmt.Errorf("%s: %d voters, want %d", n.Name, voters, c.cfg.Nodes)
		}
	}
	return nil
}

// CreateNamespace creates a namespace with a token of the harness's
// choosing and returns the token. It retries while the cluster settles; a
// retry that finds the namespace already there found the earlier attempt's
// (the cluster is new), so it succeeds with the same token. dedupeOff
// turns idempotent writes off for it.
func (c *Cluster) CreateNamespace(ctx context.Context, name string, dedupeOff bool) (string, error) {
	token, err := nstoken.New(name)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			req := &skaldv1.CreateRequest{Name: name, Description: "jepsen", Token: token}
			if dedupeOff {
				req.DedupeWindow = durationpb.New(0)
			}
			_, err := c.admin[n.Name].Create(cctx, connect.NewRequest(req))
			cancel()
			if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
				return token, nil
			}
			last = err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return "", fmt.Errorf("create namespace %s: %w", name, last)
}

// SetRetention gives every stream of category in namespace ns a retention
// policy, retrying through the nodes until one accepts (setting a policy
// twice is harmless).
func (c *Cluster) SetRetention(ctx context.Context, ns, category string, maxAge time.Duration, count int64) error {
	p := &skaldv1.RetentionPolicy{Scope: skaldv1.RetentionScope_RETENTION_SCOPE_CATEGORY, Name: category, MaxCount: count}
	if maxAge > 0 {
		p.MaxAge = durationpb.New(maxAge)
	}
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.admin[n.Name].SetRetentionPolicy(cctx, connect.NewRequest(&skaldv1.SetRetentionPolicyRequest{Namespace: ns, Policy: p}))
			cancel()
			if err == nil {
				return nil
			}
			last = err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("set the retention policy of %s/%s: %w", ns, category, last)
}

// URLs maps node names to API base URLs.
func (c *Cluster) URLs() map[string]string {
	m := map[string]string{}
	for _, n := range c.Nodes {
		m[n.Name] = n.URL
	}
	return m
}

// Close stops every process (continuing paused ones first, SIGTERM, then
// SIGKILL after 10 s) and removes the network.
func (c *Cluster) Close() error {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Resume(n)
			n.mu.Lock()
			cmd, exited := n.cmd, n.exited
			n.mu.Unlock()
			if cmd == nil {
				return
			}
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				c.Kill(n)
			}
		}()
	}
	wg.Wait()
	return c.cfg.Net.Close()
}

// RemoveData deletes every node's data directory (after a valid run).
func (c *Cluster) RemoveData() error {
	for _, n := range c.Nodes {
		if err := os.RemoveAll(n.dataDir); err != nil {
			return err
		}
	}
	return nil
}

// Net is the network the nodes run on.
func (c *Cluster) Net() Network { return c.cfg.Net }

// Leave asks n to leave the cluster (it is removed from the Raft
// configuration and its process exits), waits for the exit and deletes
// its data, so a later Restart joins as a new server.
func (c *Cluster) Leave(ctx context.Context, n *Node) error {
	n.mu.Lock()
	exited := n.exited
	running := n.cmd != nil
	n.mu.Unlock()
	if !running {
		return fmt.Errorf("leave %s: not running", n.Name)
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := n.cluster.Leave(lctx, connect.NewRequest(&skaldv1.LeaveRequest{}))
	cancel()
	if err != nil {
		return fmt.Errorf("leave %s: %w", n.Name, err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		if err := c.Kill(n); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(n.dataDir); err != nil {
		return fmt.Errorf("leave %s: wipe data: %w", n.Name, err)
	}
	return nil
}
