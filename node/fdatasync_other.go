//go:build !linux

package node

import "os"

// fdatasync is fsync where the system has no fdatasync(2).
func fdatasync(f *os.File) error { return f.Sync() }
