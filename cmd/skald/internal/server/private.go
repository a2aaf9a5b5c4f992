package server

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// privateDataDir makes the data directory readable by this user only:
// every event, token hash and Raft entry lives under it. The process's
// umask becomes 077 first (command.PrivateUmask), so that what Pebble and
// raft-wal create (with mode 0666 and 0755, as libraries do) is 0600 and
// 0700; a directory an older release left 0755 is tightened to 0700 with
// a warning, which also closes every file beneath it to other users.
func privateDataDir(dir string, log *slog.Logger) error {
	command.PrivateUmask()
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create --data-dir %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, perm&^0o077); err != nil {
			return fmt.Errorf("--data-dir %s is open to other users (mode %04o) and could not be closed: %w", dir, perm, err)
		}
		log.Warn("data directory was open to other users: closed to them", "data-dir", dir,
			"was", fmt.Sprintf("%04o", perm), "now", fmt.Sprintf("%04o", perm&^0o077))
	}
	return nil
}
