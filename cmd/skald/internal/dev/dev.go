package dev

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/nstoken"
)

const devUsage = `Usage: skald dev [--nodes 3] [--dir ./skald-dev] [--base-port 8080] [--kurrentdb-port 2113]
                 [--in-memory]
       skald dev kill N [--dir ./skald-dev]      kill -9 node N of the running dev cluster
       skald dev restart N [--dir ./skald-dev]   start node N again (stopping it first if it runs)

Starts a local cluster of real server processes; Ctrl-C stops them all. When a node dies
(a crash, kill -9, skald dev kill) the others keep running and dev says so: with a majority
left the cluster still serves, and a new leader is elected if the dead node led. A dead node
stays down until skald dev restart N brings it back with its data, so a failover can be
watched; dev restarts nothing by itself.

Flags:
`

// State is what a dev cluster keeps between runs in <dir>/dev.json, so
// a restart finds its cluster again.
type State struct {
	GossipKey  string `json:"gossipKey"`
	AdminToken string `json:"adminToken"`
}

func loadDevState(dir string) (State, error) {
	path := filepath.Join(dir, "dev.json")
	var st State
	b, err := os.ReadFile(path)
	if err == nil {
		return st, json.Unmarshal(b, &st)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return st, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return st, err
	}
	token, err := nstoken.New(nstoken.AdminNamespace)
	if err != nil {
		return st, err
	}
	st = State{GossipKey: base64.StdEncoding.EncodeToString(key), AdminToken: token}
	b, _ = json.MarshalIndent(st, "", "  ")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return st, err
	}
	return st, os.WriteFile(path, b, 0o600)
}

// writeSecretFile writes v to path readable by this user only, whatever
// mode an earlier file there had.
func writeSecretFile(path, v string) error {
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// selfCommand is how the user can run this binary again from the shell
// dev was started in: the name typed when the shell finds it on PATH, the
// path typed otherwise (./skald), else the executable's absolute path.
func selfCommand() string {
	arg0 := os.Args[0]
	if strings.ContainsRune(arg0, '/') {
		return command.ShellArgs(arg0)
	}
	self, err := os.Executable()
	if err != nil {
		return arg0
	}
	if found, err := exec.LookPath(arg0); err == nil {
		if a, err1 := filepath.EvalSymlinks(found); err1 == nil {
			if b, err2 := filepath.EvalSymlinks(self); err2 == nil && a == b {
				return command.ShellArgs(arg0)
			}
		}
	}
	return command.ShellArgs(self)
}

// Run starts a local cluster of real `skald server` processes on
// loopback ports, with their data under one folder, and stops them all on
// Ctrl-C. skald dev kill N and skald dev restart N reach it through its
// control socket.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "kill" || args[0] == "restart") {
		return runDevControl(ctx, args[0], args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("skald dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "number of nodes")
	dir := fs.String("dir", "./skald-dev", "folder for every node's data and log")
	base := fs.Int("base-port", 8080, "node i uses base+10i (API), base+10i+1 (Raft), base+10i+2 (gossip)")
	kurrentPort := fs.Int("kurrentdb-port", 2113, "node i serves KurrentDB's client protocol on this+10i, h2c, "+
		"bound to the default namespace without authentication (docs/kurrentdb.md); 0: off")
	inMemory := fs.Bool("in-memory", false, "nodes keep their data in memory: NOTHING SURVIVES stopping the cluster (--dir still holds logs and the admin token)")
	fs.Usage = func() {
		fmt.Fprint(stderr, devUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return command.Exit(command.ExitUsage, fmt.Errorf("dev: unexpected argument %q (see 'skald dev --help')", fs.Arg(0)))
	}
	if *kurrentPort < 0 || *kurrentPort+10*(*nodes-1) > 65535 {
		return command.Exit(command.ExitUsage, fmt.Errorf("--kurrentdb-port %d: node %d would need a port past 65535",
			*kurrentPort, *nodes-1))
	}
	if *nodes < 1 || *nodes > 9 {
		return command.Exit(command.ExitUsage, fmt.Errorf("--nodes must be 1..9, got %d", *nodes))
	}
	st, err := loadDevState(*dir)
	if err != nil {
		return fmt.Errorf("dev state in %s: %w", *dir, err)
	}
	// The servers read the secrets from files only this user can read:
	// on their command lines every local user would see them (ps).
	tokenFile, keyFile := filepath.Join(*dir, "admin-token"), filepath.Join(*dir, "gossip-key")
	for path, v := range map[string]string{tokenFile: st.AdminToken, keyFile: st.GossipKey} {
		if err := writeSecretFile(path, v); err != nil {
			return fmt.Errorf("dev state in %s: %w", *dir, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ctl, err := listenDevControl(*dir)
	var ee *command.ExitError
	switch {
	case errors.As(err, &ee):
		return err // another dev runs here
	case err != nil:
		// A folder whose path is too long for a Unix socket (about 100
		// bytes): the cluster runs, without kill and restart.
		fmt.Fprintf(stderr, "skald dev: warning: %v: skald dev kill and restart will not reach this cluster\n", err)
		ctl = nil
	default:
		defer ctl.Close()
	}
	c := &devCluster{
		n: *nodes, dir: *dir, base: *base, kurrentPort: *kurrentPort, inMemory: *inMemory, self: self, selfCmd: selfCommand(),
		tokenFile: tokenFile, keyFile: keyFile, stdout: stdout, noControl: ctl == nil,
		exited: make(chan devExit, *nodes), readyCh: make(chan int, *nodes),
	}
	c.nodes = make([]*devNode, *nodes)
	defer c.stopAll()
	for i := range *nodes {
		if err := c.start(ctx, i); err != nil {
			return err
		}
	}
	if *inMemory {
		fmt.Fprintln(stdout, "\nIN MEMORY: the nodes write no data to disk; everything is lost when the cluster stops.")
	}
	fmt.Fprintf(stdout, "\nAdmin token: %s\n", st.AdminToken)
	fmt.Fprintf(stdout, "Console: http://%s/ui/ (sign in with the admin token)\n", c.addr(0, 0))
	fmt.Fprintf(stdout, "Try: SKALD_ADDR=%s SKALD_TOKEN=%s %s cluster status\n", c.addr(0, 0), st.AdminToken, c.selfCmd)
	if c.kurrentPort != 0 {
		fmt.Fprintf(stdout, "KurrentDB clients: kurrentdb://%s?tls=false (namespace %s, no authentication)\n",
			c.kurrentAddr(0), nstoken.AdminNamespace)
	}
	fmt.Fprintln(stdout)

	requests := make(chan devRequest)
	if ctl != nil {
		go ctl.serve(ctx, requests)
	}
	waiting := *nodes // nodes not yet ready the first time
	for {
		select {
		case i := <-c.readyCh:
			if waiting > 0 {
				if waiting--; waiting == 0 {
					fmt.Fprintf(stdout, "cluster ready (%d nodes); Ctrl-C stops it\n", *nodes)
				}
				continue
			}
			fmt.Fprintf(stdout, "node%d is ready again\n", i)
		case e := <-c.exited:
			c.noteExit(e)
		case r := <-requests:
			r.reply <- c.handle(ctx, r)
		case <-ctx.Done():
			fmt.Fprintln(stdout, "stopping")
			return nil
		}
	}
}

// devCluster is the running dev cluster. Only Run's loop touches it
// after start-up, so it needs no lock.
type devCluster struct {
	n, base            int
	kurrentPort        int // node 0's KurrentDB port; 0: none
	dir, self, selfCmd string
	tokenFile, keyFile string
	inMemory           bool
	noControl          bool // no control socket: kill and restart cannot reach dev
	stdout             io.Writer
	nodes              []*devNode // nil: never started
	exited             chan devExit
	readyCh            chan int // a node's /readyz answered 200 after a start
}

// devNode is one server process.
type devNode struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	stopping bool          // dev stopped it (restart): its exit is no death
}

// devExit is a node's process having exited.
type devExit struct {
	i    int
	node *devNode
}

func (c *devCluster) addr(i, off int) string {
	return "127.0.0.1:" + strconv.Itoa(c.base+10*i+off)
}

// kurrentAddr is node i's KurrentDB address: at the same offset from
// its API port as every other node's, as Gossip assumes.
func (c *devCluster) kurrentAddr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(c.kurrentPort+10*i)
}

func (c *devCluster) logPath(i int) string {
	return filepath.Join(c.dir, fmt.Sprintf("node%d.log", i))
}

func (c *devCluster) running(i int) bool {
	n := c.nodes[i]
	if n == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// start starts node i's server, says so and waits for it to be ready in
// the background. A restarted node joins through every other node, so
// it finds the cluster whichever of them is down.
func (c *devCluster) start(ctx context.Context, i int) error {
	logFile, err := os.OpenFile(c.logPath(i), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	join := c.addr(0, 2)
	if c.nodes[i] != nil {
		var others []string
		for j := range c.n {
			if j != i {
				others = append(others, c.addr(j, 2))
			}
		}
		join = strings.Join(others, ",")
	}
	cmd := exec.Command(c.self, "server", "--node-name", fmt.Sprintf("node%d", i), "--data-dir", filepath.Join(c.dir, fmt.Sprintf("node%d", i)),
		"--http-addr", c.addr(i, 0), "--raft-addr", c.addr(i, 1), "--gossip-addr", c.addr(i, 2),
		"--bootstrap-expect", strconv.Itoa(c.n), "--join", join,
		"--gossip-key-file", c.keyFile, "--admin-token-file", c.tokenFile)
	if c.inMemory {
		cmd.Args = append(cmd.Args, "--in-memory")
	}
	if c.kurrentPort != 0 {
		cmd.Args = append(cmd.Args, "--kurrentdb-addr", c.kurrentAddr(i), "--kurrentdb-namespace", nstoken.AdminNamespace)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches dev, which stops them in order
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node%d: %w", i, err)
	}
	n := &devNode{cmd: cmd, done: make(chan struct{})}
	c.nodes[i] = n
	go func() {
		cmd.Wait()
		close(n.done)
		c.exited <- devExit{i, n}
	}()
	fmt.Fprintf(c.stdout, "node%d  api http://%s  raft %s  gossip %s  log %s  pid %d\n", i, c.addr(i, 0), c.addr(i, 1), c.addr(i, 2), logFile.Name(), cmd.Process.Pid)
	go c.waitReady(ctx, i, n)
	return nil
}

// waitReady reports node i on readyCh once its /readyz answers 200,
// unless the process n exits first.
func (c *devCluster) waitReady(ctx context.Context, i int, n *devNode) {
	url := "http://" + c.addr(i, 0) + "/readyz"
	client := &http.Client{Timeout: 2 * time.Second}
	for ctx.Err() == nil {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.readyCh <- i
				return
			}
		}
		select {
		case <-n.done:
			return
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// noteExit says what a node's exit means for the cluster.
func (c *devCluster) noteExit(e devExit) {
	if c.nodes[e.i] != e.node || e.node.stopping {
		return // an earlier process of a restarted node
	}
	ps := e.node.cmd.ProcessState
	if ps.Success() {
		fmt.Fprintf(c.stdout, "node%d stopped\n", e.i) // it left the cluster
		return
	}
	var up []string
	for j := range c.n {
		if c.running(j) {
			up = append(up, fmt.Sprintf("node%d", j))
		}
	}
	var state string
	switch {
	case len(up) == 0:
		state = "No node runs"
	case len(up)*2 > c.n:
		state = fmt.Sprintf("%s keep%s running (%d of %d, a majority: the cluster still serves)", joinAnd(up), map[bool]string{true: "s", false: ""}[len(up) == 1], len(up), c.n)
	default:
		state = fmt.Sprintf("%s keep%s running (%d of %d, no majority: reads and writes wait until a node is back)", joinAnd(up), map[bool]string{true: "s", false: ""}[len(up) == 1], len(up), c.n)
	}
	fmt.Fprintf(c.stdout, "node%d (pid %d) died: %v. %s. Its log: %s\n", e.i, ps.Pid(), ps, state, c.logPath(e.i))
	switch {
	case c.inMemory:
		fmt.Fprintln(c.stdout, "Its data was in memory and is gone; restart the whole dev cluster to have it back.")
		return
	case c.noControl:
		fmt.Fprintln(c.stdout, "This dev has no control socket (see the warning above): restart the whole dev cluster to have it back.")
		return
	}
	fmt.Fprintf(c.stdout, "Bring it back: %s dev restart %d --dir %s\n", c.selfCmd, e.i, command.ShellArgs(c.dir))
}

// joinAnd is "a", "a and b", "a, b and c".
func joinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// handle carries out one control request: kill N or restart N.
func (c *devCluster) handle(ctx context.Context, r devRequest) devReply {
	if r.Node < 0 || r.Node >= c.n {
		return devReply{Code: command.ExitUsage, Error: fmt.Sprintf("no node%d: this dev cluster runs node0 to node%d", r.Node, c.n-1)}
	}
	n := c.nodes[r.Node]
	switch r.Op {
	case "kill":
		if !c.running(r.Node) {
			return devReply{Code: command.ExitFailure, Error: fmt.Sprintf("node%d is not running (skald dev restart %d starts it)", r.Node, r.Node)}
		}
		pid := n.cmd.Process.Pid
		if err := n.cmd.Process.Kill(); err != nil {
			return devReply{Code: command.ExitFailure, Error: fmt.Sprintf("kill node%d: %v", r.Node, err)}
		}
		return devReply{Message: fmt.Sprintf("killed node%d (pid %d); skald dev restart %d brings it back", r.Node, pid, r.Node)}
	case "restart":
		if c.inMemory {
			return devReply{Code: command.ExitFailure, Error: "the nodes of a --in-memory dev cluster keep no data: one restarted alone would come back empty; restart the whole dev cluster"}
		}
		if c.running(r.Node) {
			n.stopping = true
			n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.done:
			case <-time.After(30 * time.Second):
				n.cmd.Process.Kill()
				<-n.done
			}
			fmt.Fprintf(c.stdout, "node%d stopped for a restart\n", r.Node)
		}
		if err := c.start(ctx, r.Node); err != nil {
			return devReply{Code: command.ExitFailure, Error: err.Error()}
		}
		return devReply{Message: fmt.Sprintf("node%d started (pid %d); dev says when it is ready", r.Node, c.nodes[r.Node].cmd.Process.Pid)}
	}
	return devReply{Code: command.ExitUsage, Error: fmt.Sprintf("unknown operation %q", r.Op)}
}

// stopAll stops every running node: SIGTERM, then SIGKILL after 30 s.
func (c *devCluster) stopAll() {
	for _, n := range c.nodes {
		if n != nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			n.cmd.Process.Kill()
			<-n.done
		}
	}
}
