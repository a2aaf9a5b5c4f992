package atrest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"
)

func seal(t *testing.T, sk *StoreKey, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	s, err := NewSealer(&buf, sk)
	if err != nil {
		t.Fatal(err)
	}
	// Odd write sizes, so chunk boundaries fall inside writes.
	for p := plain; len(p) > 0; {
		n := min(len(p), 10007)
		if _, err := s.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func unseal(sk *StoreKey, sealed []byte) ([]byte, error) {
	r, err := OpenSealed(bytes.NewReader(sealed), sk, "backup.tar", "k.key")
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func storeKey(t *testing.T) *StoreKey {
	t.Helper()
	sk, err := NewStoreKey(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

// TestSealedRoundTrip seals streams around the chunk size and reads them
// back byte for byte; the sealed bytes never hold the plaintext, and their
// length is SealedSize's.
func TestSealedRoundTrip(t *testing.T) {
	sk := storeKey(t)
	for _, n := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 17} {
		plain := bytes.Repeat([]byte("PLAINTEXT-CANARY"), n/16+1)[:n]
		sealed := seal(t, sk, plain)
		if int64(len(sealed)) != SealedSize(int64(n)) {
			t.Fatalf("%d bytes sealed to %d, SealedSize says %d", n, len(sealed), SealedSize(int64(n)))
		}
		if n >= 16 && bytes.Contains(sealed, []byte("PLAINTEXT-CANARY")) {
			t.Fatalf("%d bytes: the sealed stream holds the plaintext", n)
		}
		if !IsSealed(bufio.NewReader(bytes.NewReader(sealed))) {
			t.Fatalf("%d bytes: IsSealed is false", n)
		}
		got, err := unseal(sk, sealed)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%d bytes: read back %d bytes, %v", n, len(got), err)
		}
	}
}

// TestSealedRefused: every change to a sealed stream, and the wrong key, is
// refused with an error saying what is wrong, never read as data.
func TestSealedRefused(t *testing.T) {
	sk := storeKey(t)
	plain := make([]byte, 3*chunkSize+100)
	if _, err := rand.Read(plain); err != nil {
		t.Fatal(err)
	}
	sealed := seal(t, sk, plain)
	flip := func(off int) []byte {
		b := bytes.Clone(sealed)
		b[off] ^= 1
		return b
	}
	chunk := chunkSize + tagSize
	for _, tc := range []struct {
		name   string
		sealed []byte
		key    *StoreKey
		want   string
	}{
		{"wrong key", sealed, storeKey(t), "is encrypted under store key " + sk.Fingerprint()},
		{"flipped header version", flip(4), sk, "format version"},
		{"flipped fingerprint", flip(9), sk, "is encrypted under store key"},
		{"flipped wrapped key", flip(40), sk, "header fails authentication"},
		{"flipped first chunk", flip(sealedHeaderLen + 5), sk, "chunk 0"},
		{"flipped last chunk", flip(len(sealed) - 1), sk, "chunk 3"},
		{"cut at a chunk boundary", sealed[:sealedHeaderLen+2*chunk], sk, "truncated"},
		{"cut inside a chunk", sealed[:sealedHeaderLen+chunk+100], sk, "chunk 1"},
		{"cut inside the header", sealed[:20], sk, "too short"},
		{"chunks swapped", append(append(append([]byte{}, sealed[:sealedHeaderLen]...),
			sealed[sealedHeaderLen+chunk:sealedHeaderLen+2*chunk]...), sealed[sealedHeaderLen:]...)[:len(sealed)], sk, "chunk 0"},
		{"bytes appended", append(bytes.Clone(sealed), 0), sk, "chunk 3"},
		{"not sealed", []byte(strings.Repeat("plain tar ", 20)), sk, "not an encrypted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unseal(tc.key, tc.sealed)
			if err == nil {
				t.Fatalf("read %d bytes without an error", len(got))
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "backup.tar") {
				t.Fatalf("%v; want it to name backup.tar and say %q", err, tc.want)
			}
		})
	}
	if _, err := unseal(sk, []byte("plain")); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("a plain stream: %v, want ErrNotSealed", err)
	}
}
