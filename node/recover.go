package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/internal/durable"
)

// PeersFile is the name, inside <data-dir>/raft, of the file an operator
// writes to recover a cluster that lost its quorum (Consul's and rqlite's
// peers.json): a JSON list of the servers that remain,
//
//	[{"id": "<node id>", "address": "<raft host:port>", "non_voter": false}]
//
// At start a node that finds it rewrites its Raft state to that
// configuration (raft.RecoverCluster: every entry in its log is applied,
// the configuration is recorded with the durable floor, the log is
// emptied) and renames the file to peers.json.applied. Every surviving
// server needs the same file; entries that were never committed may be
// applied, which is why this is for disasters only (deploy/README.md).
const PeersFile = "peers.json"

// recoverFromPeersFile applies <data-dir>/raft/peers.json when present.
func (n *Node) recoverFromPeersFile(conf *raft.Config, snaps raft.SnapshotStore) error {
	if n.cfg.InMemory {
		return nil // nothing to recover: it starts empty
	}
	path := filepath.Join(n.cfg.DataDir, "raft", PeersFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("node: recovery file: %w", err)
	}
	configuration, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("node: recovery file %s: %w", path, err)
	}
	self := false
	for _, s := range configuration.Servers {
		if s.ID == raft.ServerID(n.id) {
			self = s.Suffrage == raft.Voter
		}
	}
	if !self {
		return fmt.Errorf("node: recovery file %s does not list this node (id %s) as a voter", path, n.id)
	}
	n.log.Warn("recovering the cluster from a peers file: rewriting the Raft configuration", "file", path, "servers", len(configuration.Servers))
	if err := raft.RecoverCluster(conf, n.sm, n.logs, n.stable, snaps, n.trans, configuration); err != nil {
		return fmt.Errorf("node: recover cluster from %s: %w", path, err)
	}
	if err := os.Rename(path, path+".applied"); err != nil {
		return fmt.Errorf("node: recovery applied, but renaming %s failed (remove it before the next start): %w", path, err)
	}
	return durable.SyncDir(vfs.Default, filepath.Dir(path))
}
