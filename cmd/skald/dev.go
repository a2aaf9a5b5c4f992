package main

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
	"syscall"
	"time"

	"github.com/skalddb/skald/internal/nstoken"
)

// devState is what a dev cluster keeps between runs in <dir>/dev.json, so
// a restart finds its cluster again.
type devState struct {
	GossipKey  string `json:"gossipKey"`
	AdminToken string `json:"adminToken"`
}

func loadDevState(dir string) (devState, error) {
	path := filepath.Join(dir, "dev.json")
	var st devState
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
	st = devState{GossipKey: base64.StdEncoding.EncodeToString(key), AdminToken: token}
	b, _ = json.MarshalIndent(st, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
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

// runDev starts a local cluster of real `skald server` processes on
// loopback ports, with their data under one folder, and stops them all on
// Ctrl-C.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("skald dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "number of nodes")
	dir := fs.String("dir", "./skald-dev", "folder for every node's data and log")
	base := fs.Int("base-port", 8080, "node i uses base+10i (API), base+10i+1 (Raft), base+10i+2 (gossip)")
	inMemory := fs.Bool("in-memory", false, "nodes keep their data in memory: NOTHING SURVIVES stopping the cluster (--dir still holds logs and the admin token)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: skald dev [--nodes 3] [--dir ./skald-dev] [--base-port 8080] [--in-memory]\n\nStarts a local cluster of real server processes; Ctrl-C stops them all.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 9 {
		return &exitError{exitUsage, fmt.Errorf("--nodes must be 1..9, got %d", *nodes)}
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
	addr := func(i, off int) string { return "127.0.0.1:" + strconv.Itoa(*base+10*i+off) }
	var (
		procs  []*exec.Cmd
		done   []chan struct{} // closed when process i has exited
		exited = make(chan int, *nodes)
	)
	stopAll := func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		for i, d := range done {
			select {
			case <-d:
			case <-time.After(30 * time.Second):
				procs[i].Process.Kill()
				<-d
			}
		}
	}
	defer stopAll()
	for i := 0; i < *nodes; i++ {
		nodeDir := filepath.Join(*dir, fmt.Sprintf("node%d", i))
		logFile, err := os.OpenFile(filepath.Join(*dir, fmt.Sprintf("node%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer logFile.Close()
		cmd := exec.Command(self, "server", "--node-name", fmt.Sprintf("node%d", i), "--data-dir", nodeDir,
			"--http-addr", addr(i, 0), "--raft-addr", addr(i, 1), "--gossip-addr", addr(i, 2),
			"--bootstrap-expect", strconv.Itoa(*nodes), "--join", addr(0, 2),
			"--gossip-key-file", keyFile, "--admin-token-file", tokenFile)
		if *inMemory {
			cmd.Args = append(cmd.Args, "--in-memory")
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches dev, which stops them in order
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start node%d: %w", i, err)
		}
		d := make(chan struct{})
		procs, done = append(procs, cmd), append(done, d)
		go func(i int) {
			cmd.Wait()
			close(d)
			exited <- i
		}(i)
		fmt.Fprintf(stdout, "node%d  api http://%s  raft %s  gossip %s  log %s\n", i, addr(i, 0), addr(i, 1), addr(i, 2), logFile.Name())
	}
	if *inMemory {
		fmt.Fprintln(stdout, "\nIN MEMORY: the nodes write no data to disk; everything is lost when the cluster stops.")
	}
	fmt.Fprintf(stdout, "\nAdmin token: %s\n", st.AdminToken)
	fmt.Fprintf(stdout, "Console: http://%s/ui/ (sign in with the admin token)\n", addr(0, 0))
	fmt.Fprintf(stdout, "Try: SKALD_ADDR=%s SKALD_TOKEN=%s skald cluster status\n\n", addr(0, 0), st.AdminToken)

	ready := make(chan struct{})
	go func() {
		for i := 0; i < *nodes; i++ {
			for ctx.Err() == nil {
				resp, err := http.Get("http://" + addr(i, 0) + "/readyz")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		close(ready)
	}()
	for {
		select {
		case <-ready:
			fmt.Fprintf(stdout, "cluster ready (%d nodes); Ctrl-C stops it\n", *nodes)
			ready = nil
		case i := <-exited:
			if procs[i].ProcessState.Success() {
				fmt.Fprintf(stdout, "node%d stopped\n", i) // it left the cluster
				continue
			}
			return fmt.Errorf("node%d exited with %v; see %s", i, procs[i].ProcessState, filepath.Join(*dir, fmt.Sprintf("node%d.log", i)))
		case <-ctx.Done():
			fmt.Fprintln(stdout, "stopping")
			return nil
		}
	}
}
