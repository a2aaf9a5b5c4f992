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
}

// StorageStats reads the open namespaces' Pebble metrics. It never waits
// for a restore or opens a database; each one measured is referenced while
// it is read, so it cannot close under the reader.
func (s *Store) StorageStats() StorageStats {
	s.mu.Lock()
	if s.mu.closed || s.mu.restoring {
		s.mu.Unlock()
		return StorageStats{}
	}
	var open []*namespace
	for ns := s.mu.lru.front; ns != nil; ns = ns.next {
		if ns.db != nil && !ns.deleted {
			ns.refs++
			open = append(open, ns)
		}
	}
	s.mu.Unlock()
	st := StorageStats{OpenNamespaces: len(open)}
	for _, ns := range open {
		m := ns.db.Metrics()
		st.DiskBytes += m.DiskSpaceUsage()
		st.CompactionDebtBytes += m.Compact.EstimatedDebt
		s.release(ns)
	}
	return st
}
