package atrest

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// An encrypted backup (or export) is a stream that authenticates itself,
// for files that leave the data directory:
//
//	magic "SKEB" (4) | version (1) | reserved (3) | store key fingerprint (8)
//	| wrap nonce (12) | file key wrapped by the store key (32 + 16 tag)
//	| chunks
//
// The file key is drawn fresh for each stream; the first 16 bytes of the
// header are the wrap's associated data, so the version and fingerprint
// cannot be changed. The plaintext is cut into chunks of chunkSize bytes,
// each sealed with AES-256-GCM under the file key with the nonce
// (11-byte big-endian chunk number, 1 byte last-chunk flag), the STREAM
// construction: a chunk changed, dropped, repeated or moved fails its tag,
// and a stream cut short lacks the chunk flagged last. Every chunk but the
// last holds exactly chunkSize bytes; the last holds 1 to chunkSize (0 only
// for an empty stream), so a reader knows the last by the end of input.
const (
	chunkSize       = 64 << 10
	tagSize         = 16
	wrapNonceSize   = 12
	sealedHeaderLen = 16 + wrapNonceSize + dataKeySize + tagSize
)

var sealedMagic = [4]byte{'S', 'K', 'E', 'B'}

const sealedVersion = 1

// ErrNotSealed is returned by OpenSealed for a stream that is not an
// encrypted backup.
var ErrNotSealed = errors.New("not an encrypted Skald backup")

// SealedSize is the length of the encrypted stream of a plaintext of n
// bytes.
func SealedSize(n int64) int64 {
	chunks := max((n+chunkSize-1)/chunkSize, 1)
	return sealedHeaderLen + n + chunks*tagSize
}

// IsSealed reports whether the stream behind r starts as an encrypted backup,
// without consuming it.
func IsSealed(r *bufio.Reader) bool {
	b, _ := r.Peek(len(sealedMagic))
	return bytes.Equal(b, sealedMagic[:])
}

// SealedFingerprint returns the fingerprint of the store key an encrypted
// backup behind r was sealed under, without consuming it.
func SealedFingerprint(r *bufio.Reader) (string, error) {
	b, err := r.Peek(16)
	if err != nil || !bytes.Equal(b[:4], sealedMagic[:]) {
		return "", ErrNotSealed
	}
	return hex.EncodeToString(b[8:16]), nil
}

// Sealer encrypts a stream in the format above. Close writes the last chunk;
// a stream not closed is refused when read back.
type Sealer struct {
	w    io.Writer
	aead cipher.AEAD
	buf  []byte
	n    uint64 // chunks written
	err  error
}

// NewSealer writes the header of a new encrypted stream to w under sk.
func NewSealer(w io.Writer, sk *StoreKey) (*Sealer, error) {
	fk := make([]byte, dataKeySize)
	defer Zero(fk)
	if _, err := rand.Read(fk); err != nil {
		return nil, fmt.Errorf("draw a backup key: %w", err)
	}
	hdr := make([]byte, 16, sealedHeaderLen)
	copy(hdr, sealedMagic[:])
	hdr[4] = sealedVersion
	copy(hdr[8:16], sk.fp[:])
	nonce := make([]byte, wrapNonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("draw a nonce: %w", err)
	}
	hdr = sk.aead.Seal(append(hdr, nonce...), nonce, fk, hdr[:16])
	aead, err := fileAEAD(fk)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hdr); err != nil {
		return nil, fmt.Errorf("write the backup header: %w", err)
	}
	return &Sealer{w: w, aead: aead, buf: make([]byte, 0, chunkSize+tagSize)}, nil
}

// Write seals p chunk by chunk; a chunk is written once the next byte shows
// it is not the last.
func (s *Sealer) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	written := 0
	for len(p) > 0 {
		if len(s.buf) == chunkSize {
			if s.err = s.flush(false); s.err != nil {
				return written, s.err
			}
		}
		n := min(len(p), chunkSize-len(s.buf))
		s.buf = append(s.buf, p[:n]...)
		p, written = p[n:], written+n
	}
	return written, nil
}

// Close seals and writes the last chunk. It does not close the writer.
func (s *Sealer) Close() error {
	if s.err != nil {
		return s.err
	}
	s.err = s.flush(true)
	if s.err == nil {
		s.err = errors.New("write to a closed backup sealer")
		return nil
	}
	return s.err
}

func (s *Sealer) flush(last bool) error {
	out := s.aead.Seal(s.buf[:0], chunkNonce(s.n, last), s.buf, nil)
	s.n++
	if _, err := s.w.Write(out); err != nil {
		return fmt.Errorf("write backup chunk %d: %w", s.n-1, err)
	}
	s.buf = s.buf[:0]
	return nil
}

// OpenSealed reads the header of an encrypted stream from r and returns its
// plaintext. name (the file) and keyFile are for errors: a stream sealed
// under another store key is refused naming both fingerprints, before any
// byte is returned; a chunk that fails authentication, a stream cut short
// and bytes after the last chunk are read errors saying so.
func OpenSealed(r io.Reader, sk *StoreKey, name, keyFile string) (io.Reader, error) {
	hdr := make([]byte, sealedHeaderLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: %w (too short for its header)", name, ErrNotSealed)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !bytes.Equal(hdr[:4], sealedMagic[:]) {
		return nil, fmt.Errorf("%s: %w", name, ErrNotSealed)
	}
	if hdr[4] != sealedVersion {
		return nil, fmt.Errorf("%s: encrypted backup format version %d, want %d", name, hdr[4], sealedVersion)
	}
	if fp := hex.EncodeToString(hdr[8:16]); fp != sk.Fingerprint() {
		return nil, fmt.Errorf("%s is encrypted under store key %s; the key in %s is store key %s: give the key file"+
			" of the node that wrote it (before any rotation since)", name, fp, keyFile, sk.Fingerprint())
	}
	fk, err := sk.aead.Open(nil, hdr[16:16+wrapNonceSize], hdr[16+wrapNonceSize:], hdr[:16])
	defer Zero(fk)
	if err != nil {
		return nil, fmt.Errorf("%s: its header fails authentication: the file was modified or corrupted", name)
	}
	aead, err := fileAEAD(fk)
	if err != nil {
		return nil, err
	}
	return &opener{r: bufio.NewReaderSize(r, chunkSize+tagSize+1), aead: aead, name: name,
		buf: make([]byte, chunkSize+tagSize), dec: make([]byte, 0, chunkSize)}, nil
}

// opener returns the plaintext of an encrypted stream, one authenticated
// chunk at a time.
type opener struct {
	r    *bufio.Reader
	aead cipher.AEAD
	name string
	buf  []byte // one sealed chunk
	dec  []byte // its plaintext; apart from buf, which a failed Open may clear
	out  []byte // plaintext not yet returned
	n    uint64 // chunks opened
	done bool   // the last chunk is opened
	err  error
}

func (o *opener) Read(p []byte) (int, error) {
	for len(o.out) == 0 {
		if o.err != nil {
			return 0, o.err
		}
		if o.done {
			return 0, io.EOF
		}
		o.err = o.next()
	}
	n := copy(p, o.out)
	o.out = o.out[n:]
	return n, nil
}

func (o *opener) next() error {
	n, err := io.ReadFull(o.r, o.buf)
	last := false
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		last = true
	case err != nil:
		return fmt.Errorf("%s: %w", o.name, err)
	default:
		if _, err := o.r.Peek(1); errors.Is(err, io.EOF) {
			last = true
		} else if err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
	}
	if n < tagSize {
		return fmt.Errorf("%s: the encrypted backup is truncated (it ends inside chunk %d)", o.name, o.n)
	}
	plain, err := o.aead.Open(o.dec[:0], chunkNonce(o.n, last), o.buf[:n], nil)
	if err != nil {
		if last {
			// A chunk that was not written last also fails here: the
			// stream was cut at a chunk boundary, or modified.
			if _, nerr := o.aead.Open(o.dec[:0], chunkNonce(o.n, false), o.buf[:n], nil); nerr == nil {
				return fmt.Errorf("%s: the encrypted backup is truncated (it ends after chunk %d, which is not its last)", o.name, o.n)
			}
		}
		return fmt.Errorf("%s: chunk %d of the encrypted backup fails authentication: the file was cut short, modified or corrupted", o.name, o.n)
	}
	o.n++
	o.out, o.done = plain, last
	return nil
}

func chunkNonce(n uint64, last bool) []byte {
	nonce := make([]byte, 12)
	binary.BigEndian.PutUint64(nonce[3:11], n)
	if last {
		nonce[11] = 1
	}
	return nonce
}

func fileAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
