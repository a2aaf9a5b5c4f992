package atrest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// cryptor is the encryption of one open file: its keystream, and the buffer
// its writes encrypt into (a write never encrypts in the caller's slice).
type cryptor struct {
	s   *stream
	mu  sync.Mutex // guards buf
	buf []byte
}

// readAt reads len(p) plaintext bytes at plaintext offset off from r.
func (c *cryptor) readAt(r io.ReaderAt, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n, err := r.ReadAt(p, off+HeaderSize)
	c.s.xorAt(p[:n], p[:n], off)
	return n, err
}

// writeAt writes p as ciphertext at plaintext offset off to w.
func (c *cryptor) writeAt(w io.WriterAt, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	b := c.buf[:len(p)]
	c.s.xorAt(b, p, off)
	return w.WriteAt(b, off+HeaderSize)
}

// writeHeader draws a fresh IV under the keyring's current data key, writes
// the header at the start of w and returns the file's cryptor.
func (k *Keyring) writeHeader(w io.WriterAt, name string) (*cryptor, error) {
	h, err := newHeader(k.current)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	s, err := k.stream(h)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := w.WriteAt(h.marshal(), 0); err != nil {
		return nil, fmt.Errorf("create %s: write the encryption header: %w", name, err)
	}
	return &cryptor{s: s}, nil
}

// readHeader reads the header at the start of r. empty reports a file with
// no header at all (no bytes, or a header never made durable: all zeros),
// which holds nothing.
func (k *Keyring) readHeader(r io.ReaderAt, name string) (c *cryptor, empty bool, err error) {
	b := make([]byte, HeaderSize)
	n, err := r.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("open %s: read the encryption header: %w", name, err)
	}
	if bytes.Count(b[:n], []byte{0}) == n {
		if n == 0 || n == HeaderSize {
			return nil, true, nil
		}
	}
	h, err := parseHeader(b[:n])
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", name, err)
	}
	s, err := k.stream(h)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", name, err)
	}
	return &cryptor{s: s}, false, nil
}
