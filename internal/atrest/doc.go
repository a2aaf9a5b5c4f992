// Package atrest encrypts the files Skald writes to disk.
//
// It owns three things: reading the store key from the operator's key file
// (storekey.go), the keys file in the data directory that holds the data keys
// wrapped by the store key (keyring.go), and the encrypted file format with the
// two file-system layers that read and write it: a Pebble vfs.FS (fs.go) and a
// raft-wal VFS (walvfs.go). Pebble and raft-wal stay unforked; they see
// plaintext files through these layers.
//
// An encrypted file is a fixed header (magic, format version, data-key id, a
// random 16-byte IV; header.go) followed by the file's bytes in AES-256-CTR,
// with the counter of the byte at plaintext offset o equal to IV + o/16. CTR
// gives random access at any offset, which Pebble and raft-wal need.
//
// A range of a file never written (a hole, or preallocated space) reads back as
// keystream, not zeros. Pebble never reads what it has not written; raft-wal
// does, so WALVFS writes encrypted zeros over a new segment first.
//
// CTR gives confidentiality, not integrity: a flipped ciphertext bit flips the
// same plaintext bit. Integrity of the payload is left to the formats above,
// which checksum what they store (Pebble's block and WAL checksums, raft-wal's
// frame CRCs). The data keys themselves are wrapped with AES-GCM, so a wrong
// store key is detected when the keys file is opened.
//
// Invariants this package must never break:
//   - It never writes the store key, a data key or plaintext to disk.
//   - It never encrypts two different contents under the same data key and IV:
//     every file created or reused for writing gets a fresh IV from crypto/rand.
//   - It never logs a key.
//   - A file it cannot decrypt (bad header, unknown key id) is refused with an
//     error naming the file, never read as garbage.
package atrest
