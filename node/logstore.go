package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/skalddb/skald/internal/atrest"
	"github.com/skalddb/skald/internal/durable"
)

// Raft log stores a node can keep its log and stable state in.
const (
	// LogStoreBolt is raft-boltdb: a copy-on-write B+tree in one file,
	// several page writes and two fdatasyncs per append batch.
	LogStoreBolt = "bolt"
	// LogStoreWAL is hashicorp/raft-wal: append-only segment files, one
	// write and one fdatasync per append batch. Its README still calls it
	// experimental; Consul and Vault offer it as an option.
	LogStoreWAL = "wal"
	// LogStoreDefault is the store of a new data directory when none is
	// asked for. raft-wal costs about a quarter less server CPU per
	// replicated append than bolt on the development VM (bench/README.md),
	// and the chaos campaign with every fault runs on it.
	LogStoreDefault = LogStoreWAL
)

// CheckLogStore reports whether kind names a log store ("" means the
// default).
func CheckLogStore(kind string) error {
	if kind != "" && kind != LogStoreBolt && kind != LogStoreWAL {
		return fmt.Errorf("raft log store %q: want %q or %q", kind, LogStoreBolt, LogStoreWAL)
	}
	return nil
}

// errEncryptedBolt refuses encryption at rest with the bolt log store.
var errEncryptedBolt = errors.New("node: encryption at rest needs the wal raft log store: bolt keeps its log in one" +
	" memory-mapped file that no file-system layer can encrypt; use --raft-log-store wal on a new data directory")

// logStore is what Raft needs from the store behind its log: entries,
// the stable keys (term, vote), and a way to close it.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// inmemLogStore is Raft's in-memory log and stable store, for
// Config.InMemory.
type inmemLogStore struct{ *raft.InmemStore }

func (inmemLogStore) Close() error { return nil }

// Where each kind lives under <data>/raft.
const (
	boltFile = "raft.db"
	walDir   = "wal"
)

// existingLogStore reports which store dir already holds, or "" for none.
// Both at once means someone mixed data directories: refuse.
func existingLogStore(dir string) (string, error) {
	_, berr := os.Stat(filepath.Join(dir, boltFile))
	_, werr := os.Stat(filepath.Join(dir, walDir))
	for _, err := range []error{berr, werr} {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("node: look for a raft log in %s: %w", dir, err)
		}
	}
	switch {
	case berr == nil && werr == nil:
		return "", fmt.Errorf("node: %s holds both a bolt (%s) and a wal (%s/) raft log; keep one", dir, boltFile, walDir)
	case berr == nil:
		return LogStoreBolt, nil
	case werr == nil:
		return LogStoreWAL, nil
	}
	return "", nil
}

// chooseLogStore decides the store of dir: the one it already holds, else
// want, else LogStoreDefault. A want that differs from what dir holds is an error:
// switching stores would drop the log (there is no migration).
func chooseLogStore(dir, want string) (string, error) {
	if err := CheckLogStore(want); err != nil {
		return "", fmt.Errorf("node: %w", err)
	}
	have, err := existingLogStore(dir)
	if err != nil {
		return "", err
	}
	switch {
	case have != "" && want != "" && have != want:
		return "", fmt.Errorf("node: %s holds a %s raft log, but the %s store was asked for; a store is chosen when a data directory is created and kept", dir, have, want)
	case have != "":
		return have, nil
	case want != "":
		return want, nil
	}
	return LogStoreDefault, nil
}

// openLogStore opens the raft log store of dir (see chooseLogStore) and
// puts a 512-entry cache in front of its log. bolt runs with fsync on, no
// freelist sync and the map freelist (Vault's settings).
//
// synced, when set, is told the time of each raft-wal segment sync.
//
// keys, when set, encrypts the raft-wal segments; bolt is refused with it.
func openLogStore(dir, want string, keys *atrest.Keyring, log *slog.Logger, synced func(time.Duration)) (
	logStore, raft.LogStore, string, error) {
	kind, err := chooseLogStore(dir, want)
	if err != nil {
		return nil, nil, "", err
	}
	if keys != nil && kind == LogStoreBolt {
		return nil, nil, "", fmt.Errorf("%w (%s holds a bolt log)", errEncryptedBolt, dir)
	}
	var store logStore
	switch kind {
	case LogStoreWAL:
		store, err = openWAL(filepath.Join(dir, walDir), keys, log, synced)
	default:
		store, err = raftboltdb.New(raftboltdb.Options{
			Path: filepath.Join(dir, boltFile),
			BoltOptions: &bbolt.Options{
				Timeout:        time.Second,
				NoFreelistSync: true,
				FreelistType:   bbolt.FreelistMapType,
			},
			MsgpackUseNewTimeFormat: true,
		})
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("node: open %s raft log in %s: %w", kind, dir, err)
	}
	cache, err := raft.NewLogCache(512, store)
	if err != nil {
		store.Close()
		return nil, nil, "", err
	}
	return store, cache, kind, nil
}

// openWAL opens raft-wal in dir, creating dir first and syncing its
// parent so that the directory itself survives a power loss.
func openWAL(dir string, keys *atrest.Keyring, log *slog.Logger, synced func(time.Duration)) (*raftwal.WAL, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		if err := durable.SyncDir(vfs.Default, filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	var segments types.VFS = newWALFS(synced)
	if keys != nil {
		segments = atrest.NewWALVFS(segments, keys)
	}
	return raftwal.Open(dir, raftwal.WithLogger(hclogFor(log, "raft-wal")),
		raftwal.WithSegmentFiler(segment.NewFiler(dir, segments)))
}
