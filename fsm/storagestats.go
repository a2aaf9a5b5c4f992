package fsm

// StorageStats sums what the open namespace databases hold on disk, for
// metrics. Namespaces that are not open are not counted (opening them to
// measure would evict the ones in use).
type StorageStats struct {
	OpenNamespaces int
	// DiskBytes is the databases' files (sstables, WAL, manifest).
	DiskBytes uint64
	// CompactionDebtBytes is Pebble's estimate of the bytes compactions
	// must still rewrite to bring the LSMs into shape.
	CompactionDebtBytes uint64
	// L0Files is the level-0 tables of the open databases, and
	// L0SublevelsMax the most sublevels one of them has: Pebble stalls
	// writes past L0StopWritesThreshold sublevels (default 12).
	L0Files        int64
	L0SublevelsMax int64
	// Events counts what every database (open or closed since the store
	// opened) reported: stalls, flushes, compactions.
	Events PebbleEventCounts
}

// StorageStats reads the open namespaces' Pebble metrics. It never waits
// for a restore or opens a database; each one measured is referenced while
// it is read, so it cannot close under the reader.
func (s *Store) StorageStats() StorageStats {
	s.mu.Lock()
	if s.mu.closed || s.mu.restoring {
		s.mu.Unlock()
		return StorageStats{Events: s.pc.events.counts()}
	}
	var open []*namespace
	for ns := s.mu.lru.front; ns != nil; ns = ns.next {
		if ns.db != nil && !ns.deleted {
			ns.refs++
			open = append(open, ns)
		}
	}
	s.mu.Unlock()
	st := StorageStats{OpenNamespaces: len(open), Events: s.pc.events.counts()}
	for _, ns := range open {
		m := ns.db.Metrics()
		st.DiskBytes += m.DiskSpaceUsage()
		st.CompactionDebtBytes += m.Compact.EstimatedDebt
		st.L0Files += m.Levels[0].TablesCount
		st.L0SublevelsMax = max(st.L0SublevelsMax, int64(m.Levels[0].Sublevels))
		s.release(ns)
	}
	return st
}
