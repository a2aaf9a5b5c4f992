package server

import (
	"fmt"
	"log/slog"
)

// File descriptors: the API's connections and the storage share one
// RLIMIT_NOFILE. Go (since 1.19) raises the soft limit to the hard one
// when the process starts, so skald only reads and reports it; a node
// whose storage cannot open a file stops (finding 2 of issue 28), so
// --max-connections leaves storageFDs for storage.

// fdsPerNamespace is what one open namespace may hold: Pebble's table
// cache (MaxOpenFiles 256 in fsm/pebble.go) plus its WAL, manifest,
// options, lock and directory handles.
const fdsPerNamespace = 256 + 16

// fdsBase covers the rest: the Raft log segments and snapshots, Raft and
// peer connections, gossip, the binary's own files.
const fdsBase = 1024

// maxDefaultConnections caps the computed --max-connections default: each
// connection costs memory too (buffers and a goroutine, about 20 KiB when
// idle), and past this many clients an operator sets the flag.
const maxDefaultConnections = 16384

// minDefaultConnections is the least --max-connections defaults to when
// the fd limit leaves less after storage's share.
const minDefaultConnections = 64

// storageFDs is the headroom kept for storage with maxOpenNamespaces
// namespaces open (and _metadata).
func storageFDs(maxOpenNamespaces int) uint64 {
	return uint64(maxOpenNamespaces+1)*fdsPerNamespace + fdsBase
}

// defaultMaxConnections is --max-connections's default under an fd limit
// (0: unknown): the limit less storageFDs, at most maxDefaultConnections.
// When that leaves less than minDefaultConnections, a quarter of the
// limit (at least minDefaultConnections), and short says so.
func defaultMaxConnections(limit uint64, maxOpenNamespaces int) (n int, short bool) {
	if limit == 0 {
		return maxDefaultConnections, false
	}
	reserve := storageFDs(maxOpenNamespaces)
	if limit < reserve+minDefaultConnections {
		return int(max(limit/4, minDefaultConnections)), true
	}
	return int(min(limit-reserve, maxDefaultConnections)), false
}

// logFDLimit reports the effective fd limit, what storage may need and
// the connection cap, warning when the limit is short.
func logFDLimit(log *slog.Logger, maxConns, maxOpenNamespaces int) {
	soft, hard, err := fdLimit()
	if err != nil {
		log.Warn("fd limit unknown", "err", err, "max-connections", maxConns)
		return
	}
	attrs := []any{"soft", soft, "hard", hard, "storage-reserve", storageFDs(maxOpenNamespaces), "max-connections", maxConns}
	if soft < hard {
		log.Warn("fd limit: the soft limit is below the hard one (Go raises it at start on Unix; something lowered it)", attrs...)
	}
	if need := storageFDs(maxOpenNamespaces) + uint64(maxConns); soft > 0 && soft < need {
		log.Warn(fmt.Sprintf("fd limit %d is below what storage may need plus --max-connections (%d): raise LimitNOFILE (ulimit -n) or lower --max-open-namespaces", soft, need), attrs...)
		return
	}
	log.Info("fd limit", attrs...)
}
