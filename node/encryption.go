package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skalddb/skald/internal/atrest"
)

// openKeyring decides whether dataDir is encrypted and opens its keys when
// it is. keyFile is Config.EncryptionKeyFile ("" for none). The answer is nil
// for an unencrypted directory. It refuses, saying what to do:
//   - a key for a directory that already holds unencrypted data (there is no
//     conversion in place), and
//   - no key for a directory that holds a keys file.
//
// A new directory with a key gets a keys file with a fresh data key.
func openKeyring(dataDir, keyFile string) (*atrest.Keyring, error) {
	has, err := atrest.HasKeysFile(dataDir)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	keysPath := filepath.Join(dataDir, atrest.KeysFile)
	if keyFile == "" {
		if has {
			return nil, fmt.Errorf("node: %s is encrypted at rest (it holds %s) and no encryption key file was given;"+
				" start with --encryption-key-file naming the key it was created with", dataDir, keysPath)
		}
		return nil, nil
	}
	key, err := atrest.ReadStoreKey(keyFile)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer atrest.Zero(key)
	if has {
		k, err := atrest.OpenKeyring(dataDir, key, keyFile)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		return k, nil
	}
	if held, err := holdsData(dataDir); err != nil || held != "" {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("node: %s holds unencrypted data (%s) and encryption cannot be turned on in place:"+
			" stop the node, move the data directory away, start it with --encryption-key-file on an empty"+
			" directory and let it catch up from the others' snapshot (docs/security.md, At rest)", dataDir, held)
	}
	k, err := atrest.CreateKeyring(dataDir, key)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return k, nil
}

// holdsData names the first store dataDir already holds ("" for none).
func holdsData(dataDir string) (string, error) {
	for _, p := range []string{"fsm", filepath.Join("raft", walDir), filepath.Join("raft", boltFile),
		filepath.Join("raft", "snapshots")} {
		path := filepath.Join(dataDir, p)
		_, err := os.Stat(path)
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("node: look for data in %s: %w", dataDir, err)
		}
	}
	return "", nil
}
