package atrest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
)

// StoreKeySize is the size of the store key: AES-256.
const StoreKeySize = 32

// ReadStoreKey reads the store key from path: exactly 32 raw bytes, or 64 hex
// digits (surrounding white space ignored). Anything else is refused with an
// error naming the file. The caller owns the returned slice and should Zero it
// when done.
func ReadStoreKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption key file %s: %w", path, err)
	}
	defer Zero(raw)
	if len(raw) == StoreKeySize {
		return bytes.Clone(raw), nil
	}
	text := bytes.TrimSpace(raw)
	if len(text) == 2*StoreKeySize {
		key := make([]byte, StoreKeySize)
		if _, err := hex.Decode(key, text); err == nil {
			return key, nil
		}
		Zero(key)
	}
	return nil, fmt.Errorf("encryption key file %s: want %d raw bytes or %d hex digits, got %d bytes"+
		" (make one with: openssl rand -hex 32 > %s)", path, StoreKeySize, 2*StoreKeySize, len(raw), path)
}

// Zero overwrites b with zeros.
func Zero(b []byte) { clear(b) }
