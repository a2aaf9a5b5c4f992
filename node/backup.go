package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
)

// Backup writes a consistent checkpoint of the whole state to w (the tar
// stream fsm.CheckpointSet.WriteTo produces) after catching up with the
// leader, so it holds every write acknowledged before the call. start is
// called with the stream's exact length and position before the first
// byte.
func (n *Node) Backup(ctx context.Context, w io.Writer, start func(size int64, meta fsm.SnapshotMeta)) (fsm.SnapshotMeta, error) {
	if _, err := n.LinearizableIndex(ctx); err != nil {
		return fsm.SnapshotMeta{}, err
	}
	var dir string
	if n.cfg.InMemory {
		dir = n.fs.PathJoin(n.dataDir, "raft", fmt.Sprintf("backup-%d", n.backups.Add(1)))
	} else {
		d, err := os.MkdirTemp(filepath.Join(n.cfg.DataDir, "raft"), "backup-")
		if err != nil {
			return fsm.SnapshotMeta{}, err
		}
		os.Remove(d) // Checkpoint wants to create it
		dir = d
	}
	set, err := n.store.Checkpoint(dir)
	if err != nil {
		return fsm.SnapshotMeta{}, err
	}
	defer set.Remove()
	start(set.Size, set.Meta)
	if _, err := set.WriteTo(w); err != nil {
		return fsm.SnapshotMeta{}, fmt.Errorf("node: write backup: %w", err)
	}
	return set.Meta, nil
}

// RestoreBackup seeds the empty data directory dataDir from a backup
// stream, as a new single-server cluster: the node gets a new id, and the
// Raft configuration stored with the data names only it (at raftAddr), so
// it elects itself on start and then grows by joins. logStoreKind picks
// the Raft log store (Config.LogStore). It returns the new node's id and
// the backup's position.
func RestoreBackup(dataDir, raftAddr, logStoreKind string, r io.Reader) (string, fsm.SnapshotMeta, error) {
	if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
		return "", fsm.SnapshotMeta{}, fmt.Errorf("node: restore into %s: the directory is not empty", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fsm.SnapshotMeta{}, err
	}
	id, err := loadNodeID(dataDir)
	if err != nil {
		return "", fsm.SnapshotMeta{}, err
	}
	fsmDir := filepath.Join(dataDir, "fsm")
	meta, err := fsm.RestoreDir(vfs.Default, fsmDir, r)
	if err != nil {
		return "", fsm.SnapshotMeta{}, err
	}
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr),
	}}})
	if err := fsm.SetFloorConfiguration(vfs.Default, fsmDir, conf); err != nil {
		return "", fsm.SnapshotMeta{}, err
	}
	// Raft's current term must not be below the backup's last term, or the
	// node's first election would run in an older term than its log.
	if err := os.MkdirAll(filepath.Join(dataDir, "raft"), 0o700); err != nil {
		return "", fsm.SnapshotMeta{}, err
	}
	stable, _, _, err := openLogStore(filepath.Join(dataDir, "raft"), logStoreKind, nil, nil, nil)
	if err != nil {
		return "", fsm.SnapshotMeta{}, err
	}
	err = stable.SetUint64([]byte("CurrentTerm"), meta.Term)
	if cerr := stable.Close(); err == nil {
		err = cerr
	}
	return id, meta, err
}
