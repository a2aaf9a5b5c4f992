package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/durable"
)

// loadNodeID returns the node's Raft server id from <data>/node-id,
// creating a random UUID there on first start. The id is unique across all
// time: it is never derived from a host name or address.
func loadNodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "node-id")
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if _, perr := uuid.Parse(id); perr != nil {
			return "", fmt.Errorf("node: %s does not hold a UUID (%q): restore it or remove the data directory", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("node: read %s: %w", path, err)
	}
	id := uuid.NewString()
	if err := durable.ReplaceFile(vfs.Default, path, func(w io.Writer) error {
		_, err := io.WriteString(w, id+"\n")
		return err
	}); err != nil {
		return "", fmt.Errorf("node: create %s: %w", path, err)
	}
	return id, nil
}

// checkLogCoverage refuses to start when the state machine's durable data
// ends before the Raft log begins: the entries in between are gone, so
// replay cannot rebuild the state (Raft would panic on the missing entry).
func checkLogCoverage(store *fsm.Store, logs raft.LogStore, dataDir string) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("node: read raft log: %w", err)
	}
	floor, err := store.Floor()
	if err != nil {
		return err
	}
	if first == 0 || floor.Index+1 >= first {
		return nil
	}
	return fmt.Errorf("node: the state machine data in %s ends at index %d but the Raft log starts at %d: "+
		"the Pebble data is older than the log (a lost or replaced disk?). This node cannot recover by itself: "+
		"remove it from the cluster, delete the whole data directory %s, and start it again to join as a new member",
		filepath.Join(dataDir, "fsm"), floor.Index, first, dataDir)
}

// bootstrapIfNew bootstraps a one-server cluster of this node when asked
// and no Raft state exists. A node with state never bootstraps again.
func bootstrapIfNew(n *Node, conf *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("node: check raft state: %w", err)
	}
	if has || !n.cfg.Bootstrap {
		return nil
	}
	n.log.Info("bootstrapping a new cluster", "raft-addr", n.trans.LocalAddr())
	return raft.BootstrapCluster(conf, logs, stable, snaps, n.trans, raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: conf.LocalID, Address: n.trans.LocalAddr(),
	}}})
}
