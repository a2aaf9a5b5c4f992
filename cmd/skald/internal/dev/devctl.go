package dev

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// A running skald dev listens on the Unix socket <dir>/dev.sock, which
// only its user can reach (the socket is 0600 in a folder the user owns),
// for skald dev kill N and skald dev restart N: dev owns the server
// processes, so it is the one that starts a node again, with the same
// flags and secret files, and watches it. One request per connection: a
// JSON devRequest line, answered by a JSON devReply line.

// devSocketName is the control socket's name in the dev folder.
const devSocketName = "dev.sock"

// devRequest asks the running dev to act on one node.
type devRequest struct {
	Op    string `json:"op"` // kill or restart
	Node  int    `json:"node"`
	reply chan devReply
}

// devReply is the answer: Message on success, else Error with the exit
// code the command ends with.
type devReply struct {
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
	Code    int    `json:"code,omitempty"`
}

// devControl is dev's listening control socket.
type devControl struct {
	ln   net.Listener
	path string
}

// listenDevControl opens <dir>/dev.sock. A socket left by a dev that died
// is replaced; one that answers means a dev already runs in dir.
func listenDevControl(dir string) (*devControl, error) {
	path := filepath.Join(dir, devSocketName)
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return nil, command.Exit(command.ExitUsage, fmt.Errorf("dev: a skald dev already runs in %s (its control socket %s answers)", dir, path))
	}
	os.Remove(path)
	old := syscall.Umask(0o177) // the socket is born 0600: no window where others may connect
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("dev: control socket: %w", err)
	}
	return &devControl{ln: ln, path: path}, nil
}

// Close stops listening and removes the socket.
func (d *devControl) Close() error {
	err := d.ln.Close()
	os.Remove(d.path)
	return err
}

// serve hands each request to requests, where dev's loop answers it,
// until ctx ends or the listener closes.
func (d *devControl) serve(ctx context.Context, requests chan<- devRequest) {
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(time.Minute))
			var r devRequest
			if err := json.NewDecoder(bufio.NewReader(io.LimitReader(conn, 4096))).Decode(&r); err != nil {
				json.NewEncoder(conn).Encode(devReply{Code: command.ExitUsage, Error: "bad request: " + err.Error()})
				return
			}
			r.reply = make(chan devReply, 1)
			select {
			case requests <- r:
			case <-ctx.Done():
				return
			}
			select {
			case rep := <-r.reply:
				json.NewEncoder(conn).Encode(rep)
			case <-ctx.Done():
			}
		}()
	}
}

// runDevControl is skald dev kill N and skald dev restart N: it asks the
// dev running in --dir to act and prints its answer.
func runDevControl(ctx context.Context, op string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("skald dev "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "./skald-dev", "the folder of the running skald dev")
	fs.Usage = func() {
		fmt.Fprint(stderr, devUsage)
		fs.PrintDefaults()
	}
	rest, err := command.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return command.Exit(command.ExitUsage, fmt.Errorf("dev %s: want one node number (skald dev %s N [--dir DIR])", op, op))
	}
	n, err := strconv.Atoi(rest[0])
	if err != nil {
		return command.Exit(command.ExitUsage, fmt.Errorf("dev %s: %q is not a node number (0 for node0)", op, rest[0]))
	}
	path := filepath.Join(*dir, devSocketName)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return command.Exit(command.ExitUnreachable, fmt.Errorf("dev %s: no skald dev runs in %s (nothing answers on %s); start one with skald dev --dir %s", op, *dir, path, command.ShellArgs(*dir)))
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	} else {
		conn.SetDeadline(time.Now().Add(time.Minute))
	}
	if err := json.NewEncoder(conn).Encode(devRequest{Op: op, Node: n}); err != nil {
		return fmt.Errorf("dev %s: %w", op, err)
	}
	var rep devReply
	if err := json.NewDecoder(conn).Decode(&rep); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("dev closed the connection without an answer")
		}
		return fmt.Errorf("dev %s: %w", op, err)
	}
	if rep.Error != "" {
		code := rep.Code
		if code == 0 {
			code = command.ExitFailure
		}
		return command.Exit(code, fmt.Errorf("dev %s: %s", op, rep.Error))
	}
	fmt.Fprintln(stdout, rep.Message)
	return nil
}
