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
// may name, oldest first; new files use the last. A rotation appends one and
// wraps them all again under the new store key, so every key of one file is
// wrapped by the same store key.
type keysFile struct {
	Version int          `json:"version"`
	Keys    []wrappedKey `json:"keys"`
}

type wrappedKey struct {
	ID      uint32    `json:"id"`
	Created time.Time `json:"created"`
	// StoreKey is the fingerprint of the store key that wraps this data key;
	// empty in files written before fingerprints were recorded (binaries
	// that ignore it still read the file).
	StoreKey string `json:"store_key,omitempty"`
	Nonce    []byte `json:"nonce"`   // GCM nonce, 12 bytes
	Wrapped  []byte `json:"wrapped"` // GCM ciphertext and tag of the data key
}

// Keyring is the unwrapped data keys of one data directory and the store key
// that wraps them. It is safe for concurrent use; it never changes once open.
type Keyring struct {
	blocks  map[uint32]cipher.Block
	current uint32
	store   *StoreKey
}

// StoreKey returns the store key the keyring was opened with.
func (k *Keyring) StoreKey() *StoreKey { return k.store }

// Current returns the id of the data key new files are written under.
func (k *Keyring) Current() uint32 { return k.current }

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
	sk, err := NewStoreKey(storeKey)
	if err != nil {
		return nil, err
	}
	k := &Keyring{blocks: map[uint32]cipher.Block{}, store: sk}
	var kf keysFile
	if err := k.addKey(&kf, 1); err != nil {
		return nil, err
	}
	if err := writeKeysFile(path, kf); err != nil {
		return nil, err
	}
	return k, nil
}

// OpenKeyring reads dir's keys file and unwraps every data key with storeKey.
// A store key that unwraps none of them (the GCM tag fails) is refused with an
// error naming keyFile, the file the key came from.
func OpenKeyring(dir string, storeKey []byte, keyFile string) (*Keyring, error) {
	path := filepath.Join(dir, KeysFile)
	kf, err := readKeysFile(path)
	if err != nil {
		return nil, err
	}
	sk, err := NewStoreKey(storeKey)
	if err != nil {
		return nil, err
	}
	k := &Keyring{blocks: make(map[uint32]cipher.Block, len(kf.Keys)), store: sk}
	for _, w := range kf.Keys {
		block, err := unwrap(sk, w)
		if err != nil {
			return nil, fmt.Errorf("the key in %s (store key %s) does not unlock data key %d in %s%s: wrong encryption key file?"+
				" (after a rotation the directory needs the new key; during one, give the previous key as the old key file)",
				keyFile, sk.Fingerprint(), w.ID, path, wrappedBy(w))
		}
		if _, dup := k.blocks[w.ID]; dup {
			return nil, fmt.Errorf("read %s: data key %d appears twice", path, w.ID)
		}
		k.blocks[w.ID] = block
		k.current = w.ID
	}
	return k, nil
}

// Rotation is what RotateKeyring did.
type Rotation struct {
	// Rotated is false when the keys file was already wrapped by the new key
	// (a rotation done before, or the same key given twice): nothing changed.
	Rotated bool
	// Previous is the data key new files used before; Current the one they
	// use now.
	Previous, Current uint32
}

// RotateKeyring moves dir's keys file to the store key newKey: it unwraps
// every data key with newKey or, failing that, oldKey, wraps them all again
// under newKey alone, adds a fresh data key for new files, and replaces the
// keys file atomically (a crash leaves the old file or the new one). Files
// written under the earlier data keys stay readable; from the replacement
// on, oldKey is not needed to open the directory. A keys file newKey already
// opens is left as it is. Errors name the key files (newKeyFile, oldKeyFile).
func RotateKeyring(dir string, newKey []byte, newKeyFile string, oldKey []byte, oldKeyFile string) (*Keyring, Rotation, error) {
	path := filepath.Join(dir, KeysFile)
	kf, err := readKeysFile(path)
	if err != nil {
		return nil, Rotation{}, err
	}
	nk, err := NewStoreKey(newKey)
	if err != nil {
		return nil, Rotation{}, fmt.Errorf("%s: %w", newKeyFile, err)
	}
	ok, err := NewStoreKey(oldKey)
	if err != nil {
		return nil, Rotation{}, fmt.Errorf("%s: %w", oldKeyFile, err)
	}
	k := &Keyring{blocks: make(map[uint32]cipher.Block, len(kf.Keys)+1), store: nk}
	raw := make(map[uint32][]byte, len(kf.Keys))
	defer func() {
		for _, dk := range raw {
			Zero(dk)
		}
	}()
	byNew := true
	var maxID uint32
	for _, w := range kf.Keys {
		dk, err := unwrapRaw(nk, w)
		if err != nil {
			byNew = false
			if dk, err = unwrapRaw(ok, w); err != nil {
				return nil, Rotation{}, fmt.Errorf("neither %s (store key %s) nor %s (store key %s) unlocks data key %d in %s%s",
					newKeyFile, nk.Fingerprint(), oldKeyFile, ok.Fingerprint(), w.ID, path, wrappedBy(w))
			}
		}
		if _, dup := raw[w.ID]; dup {
			Zero(dk)
			return nil, Rotation{}, fmt.Errorf("read %s: data key %d appears twice", path, w.ID)
		}
		raw[w.ID] = dk
		block, err := aes.NewCipher(dk)
		if err != nil {
			return nil, Rotation{}, err
		}
		k.blocks[w.ID] = block
		k.current = w.ID
		maxID = max(maxID, w.ID)
	}
	rot := Rotation{Previous: k.current, Current: k.current}
	if byNew {
		return k, rot, nil
	}
	var next keysFile
	for _, w := range kf.Keys {
		if err := k.seal(&next, w.ID, w.Created, raw[w.ID]); err != nil {
			return nil, Rotation{}, err
		}
	}
	if err := k.addKey(&next, maxID+1); err != nil {
		return nil, Rotation{}, err
	}
	if err := writeKeysFile(path, next); err != nil {
		return nil, Rotation{}, err
	}
	rot.Rotated, rot.Current = true, k.current
	return k, rot, nil
}

// addKey draws a data key with id, wraps it into kf and makes it current.
func (k *Keyring) addKey(kf *keysFile, id uint32) error {
	dk := make([]byte, dataKeySize)
	defer Zero(dk)
	if _, err := rand.Read(dk); err != nil {
		return fmt.Errorf("draw a data key: %w", err)
	}
	block, err := aes.NewCipher(dk)
	if err != nil {
		return err
	}
	if err := k.seal(kf, id, time.Now().UTC(), dk); err != nil {
		return err
	}
	k.blocks[id] = block
	k.current = id
	return nil
}

// seal appends data key dk with id to kf, wrapped by k's store key.
func (k *Keyring) seal(kf *keysFile, id uint32, created time.Time, dk []byte) error {
	w := wrappedKey{ID: id, Created: created, StoreKey: k.store.Fingerprint(), Nonce: make([]byte, k.store.aead.NonceSize())}
	if _, err := rand.Read(w.Nonce); err != nil {
		return fmt.Errorf("draw a nonce: %w", err)
	}
	w.Wrapped = k.store.aead.Seal(nil, w.Nonce, dk, wrapAAD(w.ID))
	kf.Version = 1
	kf.Keys = append(kf.Keys, w)
	return nil
}

// unwrap opens data key w with sk and returns its cipher.
func unwrap(sk *StoreKey, w wrappedKey) (cipher.Block, error) {
	dk, err := unwrapRaw(sk, w)
	defer Zero(dk)
	if err != nil {
		return nil, err
	}
	return aes.NewCipher(dk)
}

// unwrapRaw opens data key w with sk; the caller Zeros the result.
func unwrapRaw(sk *StoreKey, w wrappedKey) ([]byte, error) {
	dk, err := sk.aead.Open(nil, w.Nonce, w.Wrapped, wrapAAD(w.ID))
	if err != nil || len(dk) != dataKeySize {
		Zero(dk)
		return nil, errors.New("the store key does not unwrap it")
	}
	return dk, nil
}

// wrappedBy says which store key wraps w, when the file records it.
func wrappedBy(w wrappedKey) string {
	if w.StoreKey == "" {
		return ""
	}
	return " (wrapped by store key " + w.StoreKey + ")"
}

func readKeysFile(path string) (keysFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return keysFile{}, fmt.Errorf("%s: %w", path, ErrNoKeysFile)
	}
	if err != nil {
		return keysFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	var kf keysFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return keysFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	if kf.Version != 1 || len(kf.Keys) == 0 {
		return keysFile{}, fmt.Errorf("read %s: version %d with %d keys; want version 1 with at least one key",
			path, kf.Version, len(kf.Keys))
	}
	return kf, nil
}

func writeKeysFile(path string, kf keysFile) error {
	data, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSynced(path, data)
}

// stream returns the keystream for a file with header h.
func (k *Keyring) stream(h header) (*stream, error) {
	b, ok := k.blocks[h.keyID]
	if !ok {
		return nil, fmt.Errorf("%w: data key %d is not in the keys file", errBadHeader, h.keyID)
	}
	return &stream{block: b, iv: h.iv}, nil
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
