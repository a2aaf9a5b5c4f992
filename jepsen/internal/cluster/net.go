package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrNoPartitions is returned by a network that cannot cut links.
var ErrNoPartitions = errors.New("netns needs root and iproute2")

// Network places nodes on addresses and cuts links between them.
type Network interface {
	// Name is the backend's name (netns, proxy).
	Name() string
	// Host is the address node i (0-based) listens on.
	Host(i int) string
	// Port is the port of service s (0 API, 1 Raft, 2 gossip) of node i.
	Port(i, s int) int
	// Command wraps node i's argv so it runs in the node's network.
	Command(i int, argv []string) []string
	// Cut makes every pair (a, b) unable to reach each other, both ways.
	Cut(pairs [][2]int) error
	// Heal restores every cut link.
	Heal() error
	// Close heals and removes everything the network created.
	Close() error
}

// Netns gives every node its own network namespace on a private bridge.
// Cuts are blackhole routes inside the namespaces, so the kernel drops
// the packets: connections time out as on a real network. Needs root.
type Netns struct {
	prefix string // e.g. "jt-3f2a"
	subnet string // e.g. "10.213.7"
	n      int
	mu     sync.Mutex
	routes [][2]int // installed blackholes: in namespace a, to b
}

// Netns names start with this, so `jepsen clean` can find leftovers.
const netnsPrefix = "jt-"

// NewNetns creates n namespaces on a new bridge.
func NewNetns(n int) (*Netns, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("netns: %w", ErrNoPartitions)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("netns: %w", ErrNoPartitions)
	}
	used, _ := exec.Command("ip", "-4", "addr").Output()
	var nn *Netns
	for range 50 {
		id := rand.IntN(0xffff)
		c := &Netns{prefix: fmt.Sprintf("%s%04x", netnsPrefix, id), subnet: fmt.Sprintf("10.213.%d", 1+rand.IntN(250)), n: n}
		if !strings.Contains(string(used), c.subnet+".") {
			nn = c
			break
		}
	}
	if nn == nil {
		return nil, errors.New("netns: no free 10.213.x.0/24 subnet")
	}
	br := nn.prefix + "-br"
	steps := [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", nn.subnet + ".254/24", "dev", br},
		{"link", "set", br, "up"},
	}
	for i := range n {
		ns, veth := nn.ns(i), fmt.Sprintf("%s-v%d", nn.prefix, i+1)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", veth, "master", br, "up"},
			[]string{"-n", ns, "addr", "add", nn.Host(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			nn.Close()
			return nil, err
		}
	}
	return nn, nil
}

func (c *Netns) ns(i int) string { return fmt.Sprintf("%s-n%d", c.prefix, i+1) }

func (c *Netns) Name() string      { return "netns" }
func (c *Netns) Host(i int) string { return fmt.Sprintf("%s.%d", c.subnet, i+1) }
func (c *Netns) Port(i, s int) int { return 8080 + s }
func (c *Netns) Command(i int, argv []string) []string {
	return append([]string{"ip", "netns", "exec", c.ns(i)}, argv...)
}

func (c *Netns) Cut(pairs [][2]int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pairs {
		for _, r := range [][2]int{p, {p[1], p[0]}} {
			if err := ip("-n", c.ns(r[0]), "route", "add", "blackhole", c.Host(r[1])+"/32"); err != nil {
				return err
			}
			c.routes = append(c.routes, r)
		}
	}
	return nil
}

func (c *Netns) Heal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, r := range c.routes {
		if err := ip("-n", c.ns(r[0]), "route", "del", "blackhole", c.Host(r[1])+"/32"); err != nil && first == nil {
			first = err
		}
	}
	c.routes = nil
	return first
}

// Close deletes the namespaces (their veths go with them) and the bridge.
// Processes inside must be gone first: deleting a namespace kills nothing.
func (c *Netns) Close() error {
	c.Heal()
	for i := range c.n {
		ip("netns", "del", c.ns(i))
	}
	return ip("link", "del", c.prefix+"-br")
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CleanNetns kills the processes inside, then deletes, every namespace
// and link a crashed run left behind, and returns what it removed.
func CleanNetns() []string {
	var removed []string
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], netnsPrefix) {
				// Deleting a namespace kills nothing: stop its nodes first.
				if pids, err := exec.Command("ip", "netns", "pids", f[0]).Output(); err == nil {
					for _, p := range strings.Fields(string(pids)) {
						if pid, err := strconv.Atoi(p); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
							removed = append(removed, "process "+p)
						}
					}
				}
				if ip("netns", "del", f[0]) == nil {
					removed = append(removed, f[0])
				}
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if strings.HasPrefix(name, netnsPrefix) && strings.HasSuffix(name, "-br") {
				if ip("link", "del", name) == nil {
					removed = append(removed, name)
				}
			}
		}
	}
	return removed
}
