package atrest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
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

// fingerprintSize is the size of a store key's fingerprint.
const fingerprintSize = 8

// StoreKey is an opened store key: the AEAD that wraps data keys and backup
// keys under it, and its fingerprint. It is safe for concurrent use.
type StoreKey struct {
	aead cipher.AEAD
	fp   [fingerprintSize]byte
}

// NewStoreKey opens key (StoreKeySize bytes). The caller may Zero key
// afterwards.
func NewStoreKey(key []byte) (*StoreKey, error) {
	if len(key) != StoreKeySize {
		return nil, fmt.Errorf("store key is %d bytes, want %d", len(key), StoreKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	s := &StoreKey{aead: aead}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("skald store key fingerprint"))
	copy(s.fp[:], mac.Sum(nil))
	return s, nil
}

// LoadStoreKey reads path (see ReadStoreKey) and opens the key.
func LoadStoreKey(path string) (*StoreKey, error) {
	key, err := ReadStoreKey(path)
	if err != nil {
		return nil, err
	}
	defer Zero(key)
	return NewStoreKey(key)
}

// Fingerprint names the key without revealing it: 16 hex digits of an HMAC
// of a constant under the key. Two key files with the same fingerprint hold
// the same key.
func (s *StoreKey) Fingerprint() string { return hex.EncodeToString(s.fp[:]) }
