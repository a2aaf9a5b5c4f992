package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/durable"
	"github.com/skalddb/skald/node"
)

func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("backup", "skald backup --out FILE [--data-dir DIR]   (admin token; a consistent snapshot of the whole cluster state)", stderr, command.NoOutput)
	out := fs.String("out", "", "file to write")
	dataDir := fs.String("data-dir", "", "back up a stopped node's data directory instead of calling a running node")
	if _, err := cf.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	// A backup holds every event and credential hash: 0600, whatever the
	// shell's umask.
	command.PrivateUmask()
	if *out == "" {
		return command.Exit(command.ExitUsage, fmt.Errorf("backup: --out is required"))
	}
	if *dataDir != "" {
		return offlineBackup(*dataDir, *out, stdout)
	}
	if err := cf.NeedToken(); err != nil {
		return err
	}
	resp, err := cf.Do(ctx, func(base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/admin/backup", nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+cf.Token)
		}
		return req, err
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := command.StatusError("backup", resp); err != nil {
		return err
	}
	var n int64
	if err := durable.ReplaceFile(vfs.Default, *out, func(w io.Writer) error {
		pw := &progressWriter{w: w, total: resp.ContentLength, stderr: stderr, last: time.Now()}
		var err error
		n, err = io.Copy(pw, resp.Body)
		if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
			err = fmt.Errorf("backup: got %d of %d bytes", n, resp.ContentLength)
		}
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Backed up %d bytes at Raft index %s to %s.\n", n, resp.Header.Get("Skald-Backup-Index"), *out)
	return nil
}

type progressWriter struct {
	w      io.Writer
	total  int64
	n      int64
	stderr io.Writer
	last   time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if time.Since(p.last) > time.Second {
		fmt.Fprintf(p.stderr, "backup: %d / %d bytes\n", p.n, p.total)
		p.last = time.Now()
	}
	return n, err
}

func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// restore works on files alone: no node to call, so none of the
	// client flags.
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: skald restore --from FILE --data-dir DIR [--raft-addr HOST:PORT]\n\nMakes a new single-node cluster's data directory from a backup (skald backup); no server runs.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	from := fs.String("from", "", "backup file (skald backup)")
	dataDir := fs.String("data-dir", "", "new, empty data directory")
	raftAddr := fs.String("raft-addr", "127.0.0.1:8081", "the Raft address the restored node will advertise")
	logStore := fs.String("raft-log-store", node.LogStoreDefault, "Raft log store of the new data directory: wal or bolt (the server keeps the one the directory holds)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if node.CheckLogStore(*logStore) != nil {
		return command.Exit(command.ExitUsage, fmt.Errorf("restore: --raft-log-store %q: want bolt or wal", *logStore))
	}
	if *from == "" || *dataDir == "" {
		return command.Exit(command.ExitUsage, fmt.Errorf("restore: --from and --data-dir are required"))
	}
	command.PrivateUmask() // the restored data directory, as the server makes it
	f, err := os.Open(*from)
	if err != nil {
		return err
	}
	defer f.Close()
	id, meta, err := node.RestoreBackup(*dataDir, *raftAddr, *logStore, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Restored Raft index %s into %s as a new single-node cluster (node %s).\nStart it with: skald server --data-dir %s --raft-addr %s\n",
		strconv.FormatUint(meta.Index, 10), *dataDir, id, *dataDir, *raftAddr)
	return nil
}

// offlineBackup checkpoints a stopped node's state machine directly: what
// it had applied when it stopped (for recovering from a lost quorum).
func offlineBackup(dataDir, out string, stdout io.Writer) error {
	store, err := fsm.Open(fsm.Options{Dir: filepath.Join(dataDir, "fsm")})
	if err != nil {
		return fmt.Errorf("backup: open %s (is the node stopped?): %w", dataDir, err)
	}
	defer store.Close()
	set, err := store.Checkpoint(filepath.Join(dataDir, "raft", fmt.Sprintf("offline-backup-%d", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	defer set.Remove()
	if err := durable.ReplaceFile(vfs.Default, out, func(w io.Writer) error {
		_, err := set.WriteTo(w)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Backed up %d bytes at Raft index %d from %s to %s.\n", set.Size, set.Meta.Index, dataDir, out)
	return nil
}
