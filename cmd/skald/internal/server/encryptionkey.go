package server

import (
	"errors"
	"fmt"
	"os"

	"github.com/skalddb/skald/internal/atrest"
	"github.com/skalddb/skald/node"
)

// checkEncryptionKeyFile checks --encryption-key-file before anything starts:
// it applies (not --in-memory, not the bolt log store) and the file holds a
// store key. It returns a warning when any user of the machine may read it,
// as for the other secret files. The key itself is read again, and kept, by
// the node.
func checkEncryptionKeyFile(f *serverFlags) (warning string, err error) {
	path := f.encryptionKeyFile
	if f.inMemory {
		return "", errors.New("--encryption-key-file does not apply with --in-memory: nothing is written to disk")
	}
	if f.logStore == node.LogStoreBolt {
		return "", errors.New("--encryption-key-file needs --raft-log-store wal: bolt keeps its log in one" +
			" memory-mapped file that no file-system layer can encrypt")
	}
	key, err := atrest.ReadStoreKey(path)
	if err != nil {
		return "", err
	}
	atrest.Zero(key)
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("encryption key file %s: %w", path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o004 != 0 {
		warning = fmt.Sprintf("--encryption-key-file %s is readable by every user of this machine (mode %04o):"+
			" make it 0600, or 0640 with the server's group", path, perm)
	}
	return warning, nil
}
