// Package nstoken owns the namespace token format that Skald shares with
// EventoDB: ns_<base64url(namespace), no padding>_<64 hex>. It makes,
// parses and hashes tokens and names the admin namespace; it holds no
// state and never looks a token up (the server's auth does).
package nstoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// AdminNamespace is the namespace whose token is the admin token: it may
// call every namespace and the cluster services.
const AdminNamespace = "default"

// The namespace is read from the token itself, and the server keeps only
// SHA-256 of the whole token.

// New returns a random token for namespace name.
func New(name string) (string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("nstoken: secret: %w", err)
	}
	return "ns_" + base64.RawURLEncoding.EncodeToString([]byte(name)) + "_" + hex.EncodeToString(secret), nil
}

// Parse returns the namespace a token names, or why it is malformed.
func Parse(token string) (string, error) {
	rest, ok := strings.CutPrefix(token, "ns_")
	if !ok {
		return "", errors.New(`token must start with "ns_"`)
	}
	parts := strings.Split(rest, "_")
	if len(parts) != 2 {
		return "", errors.New("token must be ns_<namespace>_<secret>")
	}
	if len(parts[1]) != 64 {
		return "", fmt.Errorf("token secret must be 64 hex characters, got %d", len(parts[1]))
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return "", errors.New("token secret must be hex")
	}
	name, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(name) == 0 {
		return "", errors.New("token namespace must be non-empty unpadded base64url")
	}
	return string(name), nil
}

// A credential's token (NewCredential) is a token of the same format
// whose secret begins with its credential id: 16 hex digits of a random
// non-zero 64-bit id, then 48 hex digits (192 bits) of secret. The id lets
// the server find the one credential a token may be, without a scan of
// the namespace's credentials, and says nothing about the secret. A
// namespace's initial token (New, or one a client gave) is 64 hex digits
// of secret; whatever its first 16 digits read as, it is checked against
// the namespace's own hash when no credential of that id matches.

// NewCredential returns a random credential token for namespace name and
// the credential id it carries (never 0).
func NewCredential(name string) (token string, id uint64, err error) {
	secret := make([]byte, 32)
	for id == 0 {
		if _, err := rand.Read(secret); err != nil {
			return "", 0, fmt.Errorf("nstoken: secret: %w", err)
		}
		id = binary.BigEndian.Uint64(secret[:8])
	}
	return "ns_" + base64.RawURLEncoding.EncodeToString([]byte(name)) + "_" + hex.EncodeToString(secret), id, nil
}

// CredentialID returns the credential id a well-formed token (Parse
// accepts it) may carry: the first 16 hex digits of its secret.
func CredentialID(token string) uint64 {
	i := strings.LastIndexByte(token, '_')
	if i < 0 || len(token)-i-1 < 16 {
		return 0
	}
	id, err := strconv.ParseUint(token[i+1:i+17], 16, 64)
	if err != nil {
		return 0
	}
	return id
}

// Hash is what the server stores for a token.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
