package atrest

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderSize is the size of the header that starts every encrypted file; the
// plaintext offset o is at file offset HeaderSize+o.
const HeaderSize = 32

// Header layout: magic (4), format version (1), reserved (3), data-key id
// (4, big-endian), reserved (4), IV (16).
var magic = [4]byte{'S', 'K', 'E', 'F'}

const formatVersion = 1

// errBadHeader is wrapped by every error about a header that is not ours.
var errBadHeader = errors.New("not a Skald encrypted file (bad header)")

// header is the parsed header of one file.
type header struct {
	keyID uint32
	iv    [16]byte
}

// newHeader returns a header for a new file under key id with a fresh IV.
func newHeader(keyID uint32) (header, error) {
	h := header{keyID: keyID}
	if _, err := rand.Read(h.iv[:]); err != nil {
		return header{}, fmt.Errorf("draw an IV: %w", err)
	}
	return h, nil
}

func (h header) marshal() []byte {
	b := make([]byte, HeaderSize)
	copy(b, magic[:])
	b[4] = formatVersion
	binary.BigEndian.PutUint32(b[8:], h.keyID)
	copy(b[16:], h.iv[:])
	return b
}

func parseHeader(b []byte) (header, error) {
	if len(b) < HeaderSize {
		return header{}, fmt.Errorf("%w: %d bytes, want %d", errBadHeader, len(b), HeaderSize)
	}
	if [4]byte(b[:4]) != magic {
		return header{}, fmt.Errorf("%w: wrong magic (an unencrypted file?)", errBadHeader)
	}
	if b[4] != formatVersion {
		return header{}, fmt.Errorf("%w: format version %d, want %d", errBadHeader, b[4], formatVersion)
	}
	var h header
	h.keyID = binary.BigEndian.Uint32(b[8:])
	copy(h.iv[:], b[16:])
	return h, nil
}

// stream is the keystream of one file: AES-CTR under its data key and IV.
type stream struct {
	block cipher.Block
	iv    [16]byte
}

// xorAt XORs the keystream at plaintext offset off into dst from src
// (dst and src may be the same slice).
func (s *stream) xorAt(dst, src []byte, off int64) {
	if len(src) == 0 {
		return
	}
	var ctr [16]byte
	addCounter(&ctr, &s.iv, uint64(off)/16)
	c := cipher.NewCTR(s.block, ctr[:])
	if skip := int(off % 16); skip > 0 {
		var pad [16]byte
		c.XORKeyStream(pad[:skip], pad[:skip])
	}
	c.XORKeyStream(dst, src)
}

// addCounter sets dst to the 128-bit big-endian sum iv + n.
func addCounter(dst, iv *[16]byte, n uint64) {
	lo := binary.BigEndian.Uint64(iv[8:])
	hi := binary.BigEndian.Uint64(iv[:8])
	sum := lo + n
	if sum < lo {
		hi++
	}
	binary.BigEndian.PutUint64(dst[:8], hi)
	binary.BigEndian.PutUint64(dst[8:], sum)
}
