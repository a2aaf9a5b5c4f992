package atrest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// KeysFile is the name of the keys file in the data directory. It holds the
// data keys, each wrapped (AES-256-GCM) by the store key; never a key in the
// clear.
const KeysFile = "ENCRYPTION-KEYS"

// dataKeySize is the size of a data key: AES-256.
const dataKeySize = 32

// keysFile is the keys file's JSON form. Keys holds every data key a file
// may name, oldest first; new files use the last. A rotation appends one.
type keysFile struct {
	Version int          `json:"version"`
	Keys    []wrappedKey `json:"keys"`
}

type wrappedKey struct {
	ID      uint32    `json:"id"`
	Created time.Time `json:"created"`
	Nonce   []byte    `json:"nonce"`   // GCM nonce, 12 bytes
	Wrapped []byte    `json:"wrapped"` // GCM ciphertext and tag of the data key
}

// Keyring is the unwrapped data keys of one data directory. It is safe for
// concurrent use; it never changes once open.
type Keyring struct {
	blocks  map[uint32]cipher.Block
	current uint32
}

// ErrNoKeysFile is returned by OpenKeyring when the directory has no keys file.
var ErrNoKeysFile = errors.New("no keys file")

// HasKeysFile reports whether dir holds a keys file.
func HasKeysFile(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, KeysFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("look for %s: %w", filepath.Join(dir, KeysFile), err)
}

// CreateKeyring draws a first data key, writes it wrapped by storeKey to a
// new keys file in dir (refusing to replace one) and returns the keyring.
func CreateKeyring(dir string, storeKey []byte) (*Keyring, error) {
	path := filepath.Join(dir, KeysFile)
	if ok, err := HasKeysFile(dir); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("%s exists; refusing to replace it", path)
		}
		return nil, err
	}
	aead, err := newAEAD(storeKey)
	if err != nil {
		return nil, err
	}
	dk := make([]byte, dataKeySize)
	defer Zero(dk)
	if _, err := rand.Read(dk); err != nil {
		return nil, fmt.Errorf("draw a data key: %w", err)
	}
	w := wrappedKey{ID: 1, Created: time.Now().UTC(), Nonce: make([]byte, aead.NonceSize())}
	if _, err := rand.Read(w.Nonce); err != nil {
		return nil, fmt.Errorf("draw a nonce: %w", err)
	}
	w.Wrapped = aead.Seal(nil, w.Nonce, dk, wrapAAD(w.ID))
	data, err := json.MarshalIndent(keysFile{Version: 1, Keys: []wrappedKey{w}}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileSynced(path, data); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(dk)
	if err != nil {
		return nil, err
	}
	return &Keyring{blocks: map[uint32]cipher.Block{w.ID: block}, current: w.ID}, nil
}

// OpenKeyring reads dir's keys file and unwraps every data key with storeKey.
// A store key that unwraps none of them (the GCM tag fails) is refused with an
// error naming keyFile, the file the key came from.
func OpenKeyring(dir string, storeKey []byte, keyFile string) (*Keyring, error) {
	path := filepath.Join(dir, KeysFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoKeysFile)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var kf keysFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if kf.Version != 1 || len(kf.Keys) == 0 {
		return nil, fmt.Errorf("read %s: version %d with %d keys; want version 1 with at least one key",
			path, kf.Version, len(kf.Keys))
	}
	aead, err := newAEAD(storeKey)
	if err != nil {
		return nil, err
	}
	k := &Keyring{blocks: make(map[uint32]cipher.Block, len(kf.Keys))}
	for _, w := range kf.Keys {
		dk, err := aead.Open(nil, w.Nonce, w.Wrapped, wrapAAD(w.ID))
		if err != nil || len(dk) != dataKeySize {
			Zero(dk)
			return nil, fmt.Errorf("the key in %s does not unlock data key %d in %s: wrong encryption key file?",
				keyFile, w.ID, path)
		}
		block, err := aes.NewCipher(dk)
		Zero(dk)
		if err != nil {
			return nil, err
		}
		if _, dup := k.blocks[w.ID]; dup {
			return nil, fmt.Errorf("read %s: data key %d appears twice", path, w.ID)
		}
		k.blocks[w.ID] = block
		k.current = w.ID
	}
	return k, nil
}

// stream returns the keystream for a file with header h.
func (k *Keyring) stream(h header) (*stream, error) {
	b, ok := k.blocks[h.keyID]
	if !ok {
		return nil, fmt.Errorf("%w: data key %d is not in the keys file", errBadHeader, h.keyID)
	}
	return &stream{block: b, iv: h.iv}, nil
}

func newAEAD(storeKey []byte) (cipher.AEAD, error) {
	if len(storeKey) != StoreKeySize {
		return nil, fmt.Errorf("store key is %d bytes, want %d", len(storeKey), StoreKeySize)
	}
	block, err := aes.NewCipher(storeKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// wrapAAD binds a wrapped key to its id, so ids cannot be swapped.
func wrapAAD(id uint32) []byte { return []byte("skald data key " + strconv.FormatUint(uint64(id), 10)) }

// writeFileSynced writes data to path through a synced temporary file and a
// rename, then syncs the directory.
func writeFileSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(path), err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(path), err)
	}
	return nil
}
