package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/durable"
)

// Options configures a Store. The zero value of every field means its
// default.
type Options struct {
	// Dir is the state machine's directory (<data>/fsm). It holds
	// _metadata/ and ns/<internal id>/. Required.
	Dir string

	// FS is the filesystem. The default is the operating system's; tests and
	// dev mode pass vfs.NewMem() (or vfs.NewCrashableMem()).
	FS vfs.FS

	// SyncApply makes every applied batch fsync before ApplyBatch returns.
	// The default (false) relies on the Raft log for durability: the Raft log
	// is fsynced before an entry commits, applies may be lost on power
	// failure, and SyncFloor makes everything durable before Raft truncates
	// its log. Set it only when nothing replays the log (tests of a bare
	// Store, tools).
	SyncApply bool

	// MaxOpenNamespaces caps the namespace databases kept open; past it the
	// least recently used idle one is flushed and closed, and reopened on
	// demand. Default DefaultMaxOpenNamespaces.
	MaxOpenNamespaces int

	// CacheSize is the block cache shared by all databases, in bytes.
	// Default DefaultCacheSize.
	CacheSize int64

	// MemTableSize is each database's largest memtable in bytes. Pebble
	// starts a database's memtable at 256 KiB and doubles it up to this
	// size, so idle namespaces stay small; a busy one holds up to two (one
	// being flushed). Default DefaultMemTableSize.
	MemTableSize uint64

	// Logger receives Pebble's messages and the store's own. The default
	// discards them.
	Logger *slog.Logger

	// IndexMemory keeps every user-defined index in memory (indexmem.go),
	// whatever its definition says: for stores on an in-memory filesystem.
	IndexMemory bool
	// IndexMemoryLimit bounds the bytes of one namespace's memory-mode
	// indexes on this node; past it the indexes that grew fail here.
	// Default DefaultIndexMemoryLimit.
	IndexMemoryLimit int64
	// IndexRoundReadBytes and IndexRoundBatchBytes bound the bytes of
	// messages one index round reads and the bytes it writes in one batch
	// (indexer.go). Defaults DefaultIndexRoundReadBytes and
	// DefaultIndexRoundBatchBytes.
	IndexRoundReadBytes, IndexRoundBatchBytes int64

	// IndexMutant is a chaos-harness mutant of the index loop
	// (mutant_on.go): honoured only in binaries built with -tags
	// mutants, ignored (and zero) in every other.
	IndexMutant byte
}

// Defaults of Options, sized for a 2-core machine with a few GiB.
const (
	DefaultMaxOpenNamespaces = 64
	// DefaultCacheSize: Pebble's block cache, shared by every namespace
	// and allocated outside Go's heap. At 64 MiB the follower read-stream
	// benchmark (100,000 messages filled, then 100-message reads) spent a
	// fifth of a follower's CPU reading and decompressing sstable blocks;
	// at 512 MiB its CPU per read fell 346 -> 310 µs (make bench-ab).
	DefaultCacheSize = 256 << 20
	// DefaultMemTableSize: every memtable flush writes an L0 table that
	// spans the whole key space (each batch writes M, SI, TI and CI keys),
	// so each L0 compaction rewrites much of Lbase; fewer, larger flushes
	// cut that work. Whole-process CPU per applied message
	// (BenchmarkApplyAppendBatchSustained, 2M messages): 22.2 µs at 16 MiB,
	// 18.3 at 32, 17.2 at 64, 15.6 at 128. On a 3-node cluster under
	// append-batch (100 x16), the servers' CPU per message fell from
	// 72-82 µs to 58-59 µs going from 16 to 64 MiB (three pairs).
	DefaultMemTableSize = 64 << 20
)

func (o *Options) ensureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.MaxOpenNamespaces <= 0 {
		o.MaxOpenNamespaces = DefaultMaxOpenNamespaces
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.IndexRoundReadBytes <= 0 {
		o.IndexRoundReadBytes = DefaultIndexRoundReadBytes
	}
	if o.IndexRoundBatchBytes <= 0 {
		o.IndexRoundBatchBytes = DefaultIndexRoundBatchBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is the replicated state machine and its storage. The node adapts
// it to raft.FSM and raft.BatchingFSM (node/statemachine.go): ApplyBatch
// takes the committed entries, SyncFloor is the FSM snapshot and Restore
// installs a checkpoint set.
//
// Invariants:
//
//  1. Apply is deterministic: the result and the stored bytes of an entry
//     depend only on the entry and the state left by earlier entries.
//  2. Every batch a database commits also writes that database's A record
//     (applied index and term) for the last entry it holds.
//  3. Every database skips entries at or below its A index, so the
//     re-delivery of entries after a restart changes nothing.
//  4. An entry is applied whole or not at all, and never skipped: a
//     resource error (IsResourceError: file descriptors, disk space)
//     makes apply wait for the resource and retry (ApplyBatch), and any
//     other storage error panics, stopping the node, since skipping the
//     entry would let replicas diverge.
//  5. The durable floor F (SyncFloor) is recorded only after every database
//     was synced: everything at or below F survives a power loss.
//
// ApplyBatch, SyncFloor, Checkpoint and Restore are serialized by applyMu;
// reads run concurrently with them on Pebble snapshots.
type Store struct {
	// idfLoadBefore, when set, runs on an id filter load's goroutine
	// before it reads (tests hold a load there). Set before any apply.
	idfLoadBefore func()

	opts  Options
	fs    vfs.FS
	log   *slog.Logger
	cache interface{ Unref() }
	pc    *pebbleConfig
	// waiter makes apply and Pebble's writes wait out resource errors
	// (resource.go); interrupted is set when an ApplyBatch gave up its
	// entries because of Interrupt.
	waiter      *waiter
	interrupted atomic.Bool
	// afterFlush, when set (tests only), runs after apply commits a
	// namespace batch part way through a call.
	afterFlush func()

	// applyMu serializes everything that changes state.
	applyMu sync.Mutex
	// The fields below are owned by the holder of applyMu.
	meta        *pebble.DB
	metaApplied appliedRecord
	config      configRecord

	applied     atomic.Uint64 // last index ApplyBatch saw (any entry type)
	appliedTerm atomic.Uint64

	// User-defined indexes (indexer.go): the loops' running totals, and
	// the wake-up of WaitIndexed.
	indexTotals indexTotals
	indexWake   indexWake

	mu struct {
		sync.Mutex
		cond       *sync.Cond // signalled when a namespace's refs drop
		closed     bool
		restoring  bool
		namespaces map[string]*namespace
		nodes      map[string]string
		// nodeVersions: the state machine version each member last
		// reported (NV keys); a member without one has none recorded.
		nodeVersions map[string]uint32
		retained     map[string]bool // namespaces with retention policies (a hint: RN keys)
		// typesIndexed: namespaces whose type index is complete (a hint: TX keys).
		typesIndexed map[string]bool
		lru          lruList // open namespaces, most recently used first
	}
}

// configRecord is the latest Raft configuration entry applied.
type configRecord struct {
	index uint64
	data  []byte
}

// Open opens (creating if needed) the store in opts.Dir. A restore that was
// interrupted by a crash is finished or rolled back first; namespace
// directories that the registry does not know (left by a crash between
// creating a database and recording it) are removed.
func Open(opts Options) (*Store, error) {
	opts.ensureDefaults()
	if opts.Dir == "" {
		return nil, errors.New("fsm: Options.Dir is required")
	}
	s := &Store{opts: opts, fs: opts.FS, log: opts.Logger, waiter: newWaiter(opts.Logger, opts.Dir)}
	s.mu.cond = sync.NewCond(&s.mu.Mutex)
	c := pebble.NewCache(opts.CacheSize)
	s.cache = c
	s.pc = &pebbleConfig{fs: s.fs, cache: c, memTableSize: opts.MemTableSize, log: s.log, waiter: s.waiter,
		events: &pebbleEvents{log: s.log}}
	if err := finishRestore(s.fs, opts.Dir); err != nil {
		c.Unref()
		return nil, err
	}
	if err := s.load(); err != nil {
		c.Unref()
		return nil, err
	}
	return s, nil
}

// load opens _metadata and reads the registry into memory.
func (s *Store) load() error {
	for _, dir := range []string{s.fs.PathJoin(s.opts.Dir, "ns"), s.fs.PathJoin(s.opts.Dir, "_metadata")} {
		if err := durable.MkdirAll(s.fs, dir); err != nil {
			return fmt.Errorf("fsm: create %s: %w", dir, err)
		}
	}
	meta, err := s.pc.open(s.fs.PathJoin(s.opts.Dir, "_metadata"), "_metadata")
	if errors.Is(err, ErrLocked) {
		return err // names the lock file
	} else if err != nil {
		return fmt.Errorf("fsm: open _metadata: %w", err)
	}
	namespaces := make(map[string]*namespace)
	nodes := make(map[string]string)
	nodeVersions := make(map[string]uint32)
	retained := make(map[string]bool)
	typesIndexed := make(map[string]bool)
	var applied appliedRecord
	var config configRecord
	err = func() error {
		if v, err := get(meta, keyApplied); err != nil {
			return err
		} else if v != nil {
			if applied, err = decodeApplied(v); err != nil {
				return err
			}
		}
		if v, err := get(meta, keyConfig); err != nil {
			return err
		} else if len(v) >= 8 {
			config = configRecord{index: uint64(keySuffixUint64(v[:8])), data: v[8:]}
		}
		it, err := meta.NewIter(&pebble.IterOptions{LowerBound: prefixNamespace, UpperBound: prefixEnd(prefixNamespace)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			rec := &fsmv1.NamespaceRecord{}
			if err := proto.Unmarshal(it.Value(), rec); err != nil {
				it.Close()
				return fmt.Errorf("namespace record %q: %w", it.Key(), err)
			}
			namespaces[rec.Name] = s.newNamespace(rec)
		}
		if err := it.Close(); err != nil {
			return err
		}
		it, err = meta.NewIter(&pebble.IterOptions{LowerBound: prefixNode, UpperBound: prefixEnd(prefixNode)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			nodes[string(it.Key()[len(prefixNode):])] = string(it.Value())
		}
		if err := it.Close(); err != nil {
			return err
		}
		it, err = meta.NewIter(&pebble.IterOptions{
			LowerBound: prefixNodeVersion, UpperBound: prefixEnd(prefixNodeVersion),
		})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			if v := it.Value(); len(v) == 4 {
				nodeVersions[string(it.Key()[len(prefixNodeVersion):])] = binary.BigEndian.Uint32(v)
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		it, err = meta.NewIter(&pebble.IterOptions{LowerBound: prefixRetained, UpperBound: prefixEnd(prefixRetained)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			retained[string(it.Key()[len(prefixRetained):])] = true
		}
		if err := it.Close(); err != nil {
			return err
		}
		it, err = meta.NewIter(&pebble.IterOptions{LowerBound: prefixTypesIndexed, UpperBound: prefixEnd(prefixTypesIndexed)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			typesIndexed[string(it.Key()[len(prefixTypesIndexed):])] = true
		}
		if err := it.Close(); err != nil {
			return err
		}
		return loadCredentials(meta, namespaces)
	}()
	if err != nil {
		meta.Close()
		return fmt.Errorf("fsm: load _metadata: %w", err)
	}
	if err := s.removeOrphans(namespaces); err != nil {
		meta.Close()
		return err
	}
	s.meta, s.metaApplied, s.config = meta, applied, config
	// Every entry at or below the durable floor is held, even when the last
	// entry to touch _metadata is older.
	if floor, err := readFloor(meta); err != nil {
		meta.Close()
		return fmt.Errorf("fsm: load _metadata: %w", err)
	} else if floor.Index > applied.index {
		applied = appliedRecord{floor.Index, floor.Term}
	}
	s.applied.Store(applied.index)
	s.appliedTerm.Store(applied.term)
	s.mu.Lock()
	s.mu.namespaces, s.mu.nodes, s.mu.retained, s.mu.typesIndexed = namespaces, nodes, retained, typesIndexed
	s.mu.nodeVersions = nodeVersions
	s.mu.Unlock()
	return nil
}

// removeOrphans deletes namespace directories the registry does not name.
func (s *Store) removeOrphans(known map[string]*namespace) error {
	dirs := make(map[string]bool, len(known))
	for _, ns := range known {
		dirs[ns.dirName()] = true
	}
	nsDir := s.fs.PathJoin(s.opts.Dir, "ns")
	entries, err := s.fs.List(nsDir)
	if err != nil {
		return fmt.Errorf("fsm: list %s: %w", nsDir, err)
	}
	for _, name := range entries {
		if dirs[name] {
			continue
		}
		s.log.Info("removing orphaned namespace directory", "dir", name)
		if err := s.fs.RemoveAll(s.fs.PathJoin(nsDir, name)); err != nil {
			return fmt.Errorf("fsm: remove orphan %s: %w", name, err)
		}
	}
	return nil
}

// Close flushes and closes every database. Reads after Close fail with
// ErrClosed. It interrupts first (see Interrupt): an ApplyBatch waiting for
// a resource gives up, and so does a write Pebble is retrying.
func (s *Store) Close() error {
	s.Interrupt()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	for !s.idleLocked() {
		s.mu.cond.Wait()
	}
	var errs []error
	for _, ns := range s.mu.namespaces {
		ns.memIdx.close()
		if err := s.closeNamespaceLocked(ns); err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Unlock()
	if err := s.meta.LogData(nil, pebble.Sync); err != nil {
		errs = append(errs, err)
	}
	if err := s.meta.Close(); err != nil {
		errs = append(errs, err)
	}
	s.cache.Unref()
	return errors.Join(errs...)
}

// idleLocked reports whether no namespace handle is in use.
func (s *Store) idleLocked() bool {
	for e := s.mu.lru.front; e != nil; e = e.next {
		if e.refs > 0 {
			return false
		}
	}
	return true
}

// AppliedIndex returns the index of the last log entry ApplyBatch saw (at
// least the durable floor after Open or Restore). It is safe to call from
// any goroutine.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// NamespaceInfo is a namespace's registry entry.
type NamespaceInfo struct {
	Name        string
	ID          uint64 // Raft index of its creation
	Description string
	TokenHash   []byte
	CreatedAt   int64 // unix ns
	// DedupeWindowNanos as created (0: the default; see DedupeWindow).
	DedupeWindowNanos int64
}

func infoOf(rec *fsmv1.NamespaceRecord) NamespaceInfo {
	return NamespaceInfo{Name: rec.Name, ID: rec.Id, Description: rec.Description, TokenHash: rec.TokenHash, CreatedAt: rec.CreatedUnixNano,
		DedupeWindowNanos: rec.DedupeWindowNanos}
}

// Namespace returns the registry entry of name.
func (s *Store) Namespace(name string) (NamespaceInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := s.mu.namespaces[name]
	if !ok {
		return NamespaceInfo{}, false
	}
	return infoOf(ns.rec), true
}

// Namespaces returns every namespace, sorted by name.
func (s *Store) Namespaces() []NamespaceInfo {
	s.mu.Lock()
	out := make([]NamespaceInfo, 0, len(s.mu.namespaces))
	for _, ns := range s.mu.namespaces {
		out = append(out, infoOf(ns.rec))
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NodeAddr returns the API address a node registered with SetNodeInfo.
func (s *Store) NodeAddr(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	addr, ok := s.mu.nodes[id]
	return addr, ok
}

// NodeVersion returns the state machine version member id last reported,
// as recorded in the replicated state (SetNodeInfo.state_machine_version):
// false when none is recorded.
func (s *Store) NodeVersion(id string) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.mu.nodeVersions[id]
	return v, ok
}

// Nodes returns every registered node id and API address.
func (s *Store) Nodes() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.mu.nodes))
	for k, v := range s.mu.nodes {
		out[k] = v
	}
	return out
}

// get returns a copy of key's value in db, or nil when absent.
// getter is a database, a snapshot or a batch: what point reads need.
type getter interface {
	Get([]byte) ([]byte, io.Closer, error)
}

// exists reports whether key is set, without copying its value.
func exists(db getter, key []byte) (bool, error) {
	_, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

func get(db getter, key []byte) ([]byte, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

// dirName is the directory of a namespace below <dir>/ns: its internal id
// as 16 hex digits, never the user's string.
func dirName(id uint64) string {
	s := strconv.FormatUint(id, 16)
	for len(s) < 16 {
		s = "0" + s
	}
	return s
}
