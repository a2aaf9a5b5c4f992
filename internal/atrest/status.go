package atrest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Status is what a data directory's files are encrypted under, read from the
// keys file and the header of every file. It needs no key.
type Status struct {
	// Keys lists the data keys of the keys file, oldest first; the last is
	// the one new files are written under.
	Keys []KeyStatus
	// Unknown lists files naming a data key the keys file does not hold
	// (they cannot be read by anyone).
	Unknown []string
	// Plain counts the files without an encryption header: the keys file,
	// node-id, raft-wal's wal-meta.db, Pebble's LOCK files and empty files.
	Plain int
}

// KeyStatus is one data key and the files written under it.
type KeyStatus struct {
	ID      uint32
	Created time.Time
	// StoreKey is the fingerprint of the store key wrapping it ("" when the
	// keys file predates fingerprints).
	StoreKey string
	// Files counts the files under the directory written with this key;
	// Example names one of them.
	Files   int
	Example string
}

// StoreKeys returns the distinct fingerprints of the store keys that wrap
// the data keys, in order of first use.
func (s Status) StoreKeys() []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range s.Keys {
		if !seen[k.StoreKey] {
			seen[k.StoreKey] = true
			out = append(out, k.StoreKey)
		}
	}
	return out
}

// OlderKeyFiles counts the files written under a data key other than the
// current one: files an earlier store key's rotation left behind, rewritten
// under the current key as Pebble compacts, raft-wal drops old segments and
// snapshots replace each other.
func (s Status) OlderKeyFiles() int {
	n := len(s.Unknown)
	for i, k := range s.Keys {
		if i != len(s.Keys)-1 {
			n += k.Files
		}
	}
	return n
}

// ReadStatus reads dir's keys file and the header of every file under dir.
// Files removed while it walks are skipped.
func ReadStatus(dir string) (Status, error) {
	kf, err := readKeysFile(filepath.Join(dir, KeysFile))
	if err != nil {
		return Status{}, err
	}
	st := Status{Keys: make([]KeyStatus, len(kf.Keys))}
	at := make(map[uint32]int, len(kf.Keys))
	for i, w := range kf.Keys {
		st.Keys[i] = KeyStatus{ID: w.ID, Created: w.Created, StoreKey: w.StoreKey}
		at[w.ID] = i
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		h, ok, err := fileHeader(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case !ok:
			st.Plain++
			return nil
		}
		i, known := at[h.keyID]
		if !known {
			st.Unknown = append(st.Unknown, path)
			return nil
		}
		if st.Keys[i].Files == 0 {
			st.Keys[i].Example = path
		}
		st.Keys[i].Files++
		return nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("read the encryption headers under %s: %w", dir, err)
	}
	return st, nil
}

// fileHeader reads the encryption header of the file at path; ok is false
// for a file that has none.
func fileHeader(path string) (h header, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return header{}, false, err
	}
	defer f.Close()
	b := make([]byte, HeaderSize)
	if _, err := io.ReadFull(f, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return header{}, false, nil
		}
		return header{}, false, err
	}
	h, err = parseHeader(b)
	if err != nil {
		return header{}, false, nil
	}
	return h, true, nil
}
