package fsm

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// slowBackgroundJob is how long a flush or compaction runs before its end
// is logged at Info (quicker ones at Debug): long jobs are what precede
// write stalls.
const slowBackgroundJob = 5 * time.Second

// pebbleEvents counts, over every database of a store, what Pebble reports
// through its event listener that explains write latency: write stalls
// (and the time writes spent stalled), flushes, compactions, slow disk
// operations and background errors. Stalls, slow disks and errors are also
// logged, naming the database. The counters only grow.
type pebbleEvents struct {
	log *slog.Logger

	stalls, stallNanos    atomic.Int64
	flushes, compactions  atomic.Int64
	diskSlow, background  atomic.Int64
	flushBytes, compBytes atomic.Int64 // bytes written by flushes and compactions
}

// PebbleEventCounts is a copy of a store's pebbleEvents counters.
type PebbleEventCounts struct {
	WriteStalls      int64
	WriteStallTime   time.Duration
	Flushes          int64
	FlushBytes       int64
	Compactions      int64
	CompactionBytes  int64
	DiskSlow         int64
	BackgroundErrors int64
}

func (e *pebbleEvents) counts() PebbleEventCounts {
	if e == nil {
		return PebbleEventCounts{}
	}
	return PebbleEventCounts{
		WriteStalls: e.stalls.Load(), WriteStallTime: time.Duration(e.stallNanos.Load()),
		Flushes: e.flushes.Load(), FlushBytes: e.flushBytes.Load(),
		Compactions: e.compactions.Load(), CompactionBytes: e.compBytes.Load(),
		DiskSlow: e.diskSlow.Load(), BackgroundErrors: e.background.Load(),
	}
}

// listener returns the event listener of one database (db names it in
// the log: "_metadata" or `namespace "shop"`). A stall's length is
// measured from its begin to its end; Pebble reports at most one stall of
// a database at a time.
func (e *pebbleEvents) listener(db string) *pebble.EventListener {
	var (
		mu    sync.Mutex
		since time.Time // zero: no stall in progress
	)
	log := e.log.With("component", "pebble", "db", db)
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			e.stalls.Add(1)
			mu.Lock()
			since = time.Now()
			mu.Unlock()
			log.Warn("pebble write stall: writes to this database wait until the memtable flushes or level 0 is compacted", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			mu.Lock()
			began := since
			since = time.Time{}
			mu.Unlock()
			if began.IsZero() {
				return
			}
			d := time.Since(began)
			e.stallNanos.Add(int64(d))
			log.Warn("pebble write stall ended", "stalled", d.Round(time.Millisecond))
		},
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err != nil {
				return // BackgroundError reports it
			}
			e.flushes.Add(1)
			var out uint64
			for _, t := range info.Output {
				out += t.Size
			}
			e.flushBytes.Add(int64(out))
			level := slog.LevelDebug
			if info.TotalDuration >= slowBackgroundJob {
				level = slog.LevelInfo
			}
			log.Log(nil, level, "pebble flush", "reason", info.Reason, "memtables", info.Input, "bytes", out, "took", info.TotalDuration.Round(time.Millisecond))
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err != nil {
				return // BackgroundError reports it
			}
			e.compactions.Add(1)
			var out uint64
			for _, t := range info.Output.Tables {
				out += t.Size
			}
			e.compBytes.Add(int64(out))
			level := slog.LevelDebug
			if info.TotalDuration >= slowBackgroundJob {
				level = slog.LevelInfo
			}
			log.Log(nil, level, "pebble compaction", "reason", info.Reason, "to_level", info.Output.Level, "bytes", out, "took", info.TotalDuration.Round(time.Millisecond))
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			e.diskSlow.Add(1)
			log.Warn("pebble: slow disk operation", "path", info.Path, "op", info.OpType.String(), "bytes", info.WriteSize, "for", info.Duration.Round(time.Millisecond))
		},
		BackgroundError: func(err error) {
			e.background.Add(1)
			log.Error("pebble background error", "err", err)
		},
	}
}
