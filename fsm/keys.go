package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Key schema of a namespace database. Numbers are big-endian uint64 so that
// byte order is numeric order; variable-length names are followed by a NUL
// byte (names never contain NUL), so one name's keys never interleave with a
// longer name's that shares its prefix.
//
//	M  gp                        -> StoredMessage (protobuf)
//	SI stream 0x00 pos           -> gp
//	CI category 0x00 gp          -> catEntry: flags, md5 hash of the cardinal id, stream, correlation category
//	VI stream                    -> streamMeta: last pos, last gp, last write time (ns), message count[, flags]
//	TI stream 0x00 type 0x00 pos -> gp
//	CC category                  -> catCounts: stream count, message count
//	NI                           -> nsCounts: message count, stream count, last activity (ns)
//	GP                           -> next global position
//	DI bucket id                 -> gp, pos, stream: a remembered client-given message id (dedupe.go)
//	DC                           -> dedupe clock: highest entry time (ns) that recorded ids
//	RP scope name                -> RetentionPolicy (protobuf); scope is '1' namespace (name empty), '2' category, '3' stream
//	RQ stream                    -> empty: the stream may hold positions beyond its count limit (retention.go)
//	RE                           -> expiry progress: entry index, messages removed, queued streams visited; only between two commits of one ExpireMessages entry (expiry.go)
//	SG name                      -> GroupRecord: a subscription group (group.go)
//	SP name 0x00 gp              -> ParkedMessage: a group's parked message
//	SR name 0x00 gp              -> ParkedMessage: a replayed one, to deliver again
//	QT type 0x00 gp              -> empty: the namespace's tagged messages by type (query.go), while its type index is not complete
//	QA type 0x00 gp              -> empty: every message by type, once the type index is backfilling or complete (typeindex.go)
//	QF                           -> typeIndexState: legacy (absent), backfilling (from, cursor) or complete (typeindex.go)
//	QG tag 0x00 gp               -> empty: the namespace's messages by tag (query.go)
//	XD name                      -> IndexDefinition (protobuf): a user-defined index (index.go)
//	XL index lo                  -> change record: kind byte, then 8 bytes (index.go); written by apply
//	                                while the namespace has indexes, removed by the node's index loop
//	XE id fields gp              -> empty: an index entry; fields are order keys (indexkey.go) (node-local)
//	XV id gp                     -> the entry's fields: the reverse key, to remove an entry (node-local)
//	XC id                        -> index checkpoint: last gp indexed, entries, skipped (node-local)
//	XS id stream                 -> pos, gp, fields: a stream index's entry of stream (node-local)
//	XF id                        -> reason: the index failed on this node (indexstate.go; node-local)
//	A                            -> applied Raft index, term
//
// QT, QA and QG keys are written with their message and never removed by
// the deletion paths (streamdelete.go), which do not read the messages
// they remove: a query skips an index entry whose M key is gone. A
// database written before tags has no QT or QG keys, so its older
// messages are not found by tag queries; one written before QA has a
// legacy type index until IndexTypes entries backfill it.
//
// What an append puts through the memtable (BenchmarkApplyMemtable counts
// it from the WAL): per message M, SI, TI, CI and QA (QT instead until the
// type index is complete; QG per tag; DI per client-given id); per stream
// of an ApplyBatch call VI; per category CC; per call NI, GP and A (DC and
// QF only when they change). One 200-byte message by a single append to a
// stream of its own in the call: 6.06 keys, 114 bytes of keys and 346 of
// values; in 100-message appends 5.01 keys, 100 and 315 bytes. Every key
// is a skiplist insert; inserts of neighbours (a run of SI keys of one
// stream) are far cheaper than fresh searches (sortedbatch.go).
//
// A database written before idempotent writes has no DI or DC keys: it
// remembers no id, and its clock starts at the first append that records
// one.
//
// The _metadata database holds:
//
//	NS name    -> NamespaceRecord (protobuf)
//	NO node id -> API address
//	RC         -> latest Raft configuration: index, then the entry's Data (raft.EncodeConfiguration bytes, opaque here)
//	FL         -> durable floor: CheckpointMeta (protobuf)
//	RN name    -> empty: the namespace has (or had) retention policies; a hint for the leader
//	TX name    -> empty: the namespace's type index is complete; a hint for the leader (typeindex.go)
//	CR nsid credid -> CredentialRecord (protobuf): a namespace's credential, by the namespace's internal id and the credential id, both 8 bytes big-endian (credential.go)
//	XN name    -> empty: the namespace has (or had) user-defined indexes; a hint for the node's index loops
//	A          -> applied Raft index, term
//
// XE, XV, XC, XS and XF are node-local: each node's index loop writes them from
// its own messages (indexer.go), not apply, so replicas hold the same
// entries only once their loops caught up, and content comparisons of
// replicas leave them out (NodeLocalKey), with XL, which the loop prunes.
//
// These keys are an on-disk format: add prefixes, never change old ones.
// Every one is declared in this block, and none is a prefix of another
// (TestKeyPrefixesDoNotCollide).
var (
	prefixMessage  = []byte("M")
	prefixStream   = []byte("SI")
	prefixCategory = []byte("CI")
	prefixVersion  = []byte("VI")
	prefixType     = []byte("TI")
	prefixCatCount = []byte("CC")
	keyNSCounts    = []byte("NI")
	keyNextGP      = []byte("GP")
	prefixDedupe   = []byte("DI")
	keyDedupeClock = []byte("DC")
	prefixTypeIdx  = []byte("QT")
	prefixTypeAll  = []byte("QA")
	keyTypeIndex   = []byte("QF")
	prefixTagIdx   = []byte("QG")
	keyApplied     = []byte("A")
	// Retention (retention.go). RP sorts right before RQ: an import's
	// clear keeps the policies and drops the queue.
	prefixRetention   = []byte("RP")
	prefixExpiryQueue = []byte("RQ")
	keyExpiryProgress = []byte("RE")
	// Subscription groups (group.go).
	prefixGroup       = []byte("SG")
	prefixGroupParked = []byte("SP")
	prefixGroupReplay = []byte("SR")
	// User-defined indexes (index.go, indexer.go). The X family is
	// contiguous ("X" to "Y"): an import's clear keeps all of it.
	prefixIndexDef     = []byte("XD")
	prefixIndexChange  = []byte("XL")
	prefixIndexEntry   = []byte("XE")
	prefixIndexReverse = []byte("XV")
	prefixIndexCkpt    = []byte("XC")
	prefixIndexStream  = []byte("XS")
	prefixIndexFailed  = []byte("XF")

	prefixNamespace = []byte("NS")
	prefixNode      = []byte("NO")
	// prefixNodeVersion: the state machine version each member last
	// reported (SetNodeInfo.state_machine_version), a big-endian uint32.
	prefixNodeVersion = []byte("NV")
	keyConfig         = []byte("RC")
	keyFloor          = []byte("FL")
	prefixRetained    = []byte("RN")
	// prefixTypesIndexed: namespaces whose type index is complete.
	prefixTypesIndexed = []byte("TX")
	// prefixCredential: namespaces' credentials (credential.go).
	prefixCredential = []byte("CR")
	// prefixIndexed: namespaces that have (or had) user-defined indexes.
	prefixIndexed = []byte("XN")
)

// indexFamilyLo and indexFamilyHi bound every key of the X family.
var indexFamilyLo, indexFamilyHi = []byte("X"), []byte("Y")

// NodeLocalKey reports whether a namespace database's key is node-local
// index state (XE, XV, XC, XS, XF) or the index change log (XL) that each node's
// loop prunes on its own schedule: what a comparison of replicas' content
// must leave out.
func NodeLocalKey(k []byte) bool {
	for _, p := range [][]byte{prefixIndexEntry, prefixIndexReverse, prefixIndexCkpt, prefixIndexStream, prefixIndexFailed, prefixIndexChange} {
		if bytes.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// errCorruptValue is returned when a stored value cannot be decoded. It means
// the database was damaged or written by an incompatible binary.
var errCorruptValue = errors.New("fsm: corrupt stored value")

func appendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func messageKey(gp int64) []byte { return appendMessageKey(make([]byte, 0, 9), gp) }

func appendMessageKey(dst []byte, gp int64) []byte {
	return appendUint64(append(dst, prefixMessage...), uint64(gp))
}

// streamPrefix is SI stream 0x00: the common prefix of one stream's SI keys.
func streamPrefix(stream string) []byte {
	return appendStreamPrefix(make([]byte, 0, len(prefixStream)+len(stream)+1+8), stream)
}

func appendStreamPrefix(dst []byte, stream string) []byte {
	dst = append(dst, prefixStream...)
	dst = append(dst, stream...)
	return append(dst, 0)
}

func streamKey(stream string, pos int64) []byte { return appendStreamKey(nil, stream, pos) }

func appendStreamKey(dst []byte, stream string, pos int64) []byte {
	return appendUint64(appendStreamPrefix(dst, stream), uint64(pos))
}

// categoryPrefix is CI category 0x00.
func categoryPrefix(category string) []byte {
	return appendCategoryPrefix(make([]byte, 0, len(prefixCategory)+len(category)+1+8), category)
}

func appendCategoryPrefix(dst []byte, category string) []byte {
	dst = append(dst, prefixCategory...)
	dst = append(dst, category...)
	return append(dst, 0)
}

func categoryKey(category string, gp int64) []byte { return appendCategoryKey(nil, category, gp) }

func appendCategoryKey(dst []byte, category string, gp int64) []byte {
	return appendUint64(appendCategoryPrefix(dst, category), uint64(gp))
}

func versionKey(stream string) []byte {
	return append(append(make([]byte, 0, len(prefixVersion)+len(stream)), prefixVersion...), stream...)
}

// typePrefix is TI stream 0x00 type 0x00.
func typePrefix(stream, typ string) []byte {
	return appendTypePrefix(make([]byte, 0, len(prefixType)+len(stream)+len(typ)+2+8), stream, typ)
}

func appendTypePrefix(dst []byte, stream, typ string) []byte {
	dst = append(dst, prefixType...)
	dst = append(dst, stream...)
	dst = append(dst, 0)
	dst = append(dst, typ...)
	return append(dst, 0)
}

func typeKey(stream, typ string, pos int64) []byte { return appendTypeKey(nil, stream, typ, pos) }

func appendTypeKey(dst []byte, stream, typ string, pos int64) []byte {
	return appendUint64(appendTypePrefix(dst, stream, typ), uint64(pos))
}

// indexPrefix is QT type 0x00, QA type 0x00 or QG tag 0x00: the common prefix of one
// type's or tag's index keys, followed by big-endian global positions.
func indexPrefix(family []byte, name string) []byte {
	return appendIndexPrefix(make([]byte, 0, len(family)+len(name)+1+8), family, name)
}

func appendIndexPrefix(dst, family []byte, name string) []byte {
	dst = append(dst, family...)
	dst = append(dst, name...)
	return append(dst, 0)
}

func appendIndexKey(dst, family []byte, name string, gp int64) []byte {
	return appendUint64(appendIndexPrefix(dst, family, name), uint64(gp))
}

func catCountKey(category string) []byte {
	return append(append(make([]byte, 0, len(prefixCatCount)+len(category)), prefixCatCount...), category...)
}

func namespaceKey(name string) []byte {
	return append(append(make([]byte, 0, len(prefixNamespace)+len(name)), prefixNamespace...), name...)
}

// credentialPrefix is CR nsid: the keys of one namespace's credentials.
func credentialPrefix(nsID uint64) []byte {
	return appendUint64(append(make([]byte, 0, len(prefixCredential)+16), prefixCredential...), nsID)
}

func credentialKey(nsID, id uint64) []byte { return appendUint64(credentialPrefix(nsID), id) }

func nodeKey(id string) []byte {
	return append(append(make([]byte, 0, len(prefixNode)+len(id)), prefixNode...), id...)
}

func nodeVersionKey(id string) []byte {
	return append(append(make([]byte, 0, len(prefixNodeVersion)+len(id)), prefixNodeVersion...), id...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// keySuffixUint64 decodes the trailing big-endian number of a key.
func keySuffixUint64(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(k)-8:]))
}

func decodeUint64(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, errCorruptValue
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func encodeUint64(v int64) []byte { return appendUint64(make([]byte, 0, 8), uint64(v)) }

// appliedRecord is the value of the A key: the last Raft entry whose effects
// this database holds.
type appliedRecord struct{ index, term uint64 }

func (a appliedRecord) encode() []byte {
	return appendUint64(appendUint64(make([]byte, 0, 16), a.index), a.term)
}

func decodeApplied(v []byte) (appliedRecord, error) {
	if len(v) != 16 {
		return appliedRecord{}, errCorruptValue
	}
	return appliedRecord{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}, nil
}

// streamMeta is the value of a VI key: 32 bytes, or 40 with flags.
//
// A stream exists once it had a message (lastPos >= 0); deletion and
// truncation remove messages (count falls, to 0 for a deleted stream) but
// keep lastPos, so positions are never reused.
type streamMeta struct {
	lastPos  int64 // -1 when the stream never had a message
	lastGP   int64
	lastTime int64 // unix ns of the last write
	count    int64 // messages in the stream
	flags    uint64
}

const (
	// streamHardDeleted marks a tombstone: the stream refuses writes.
	streamHardDeleted uint64 = 1 << iota
	// streamTruncated: messages were removed, so positions up to lastPos
	// may be missing and must not be written again (by an import).
	streamTruncated
)

func (m streamMeta) encode() []byte {
	b := make([]byte, 0, 40)
	b = appendUint64(b, uint64(m.lastPos))
	b = appendUint64(b, uint64(m.lastGP))
	b = appendUint64(b, uint64(m.lastTime))
	b = appendUint64(b, uint64(m.count))
	if m.flags != 0 {
		// Only streams deleted or truncated by a binary that knows flags
		// carry them: older values stay 32 bytes.
		b = appendUint64(b, m.flags)
	}
	return b
}

func decodeStreamMeta(v []byte) (streamMeta, error) {
	if len(v) != 32 && len(v) != 40 {
		return streamMeta{}, errCorruptValue
	}
	u := func(i int) int64 { return int64(binary.BigEndian.Uint64(v[i*8:])) }
	m := streamMeta{lastPos: u(0), lastGP: u(1), lastTime: u(2), count: u(3)}
	if len(v) == 40 {
		m.flags = uint64(u(4))
	}
	return m, nil
}

// catCounts is the value of a CC key.
type catCounts struct{ streams, messages int64 }

func (c catCounts) encode() []byte {
	return appendUint64(appendUint64(make([]byte, 0, 16), uint64(c.streams)), uint64(c.messages))
}

func decodeCatCounts(v []byte) (catCounts, error) {
	if len(v) != 16 {
		return catCounts{}, errCorruptValue
	}
	return catCounts{int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))}, nil
}

// nsCounts is the value of the NI key.
type nsCounts struct{ messages, streams, lastActivity int64 }

func (c nsCounts) encode() []byte {
	b := make([]byte, 0, 24)
	b = appendUint64(b, uint64(c.messages))
	b = appendUint64(b, uint64(c.streams))
	return appendUint64(b, uint64(c.lastActivity))
}

func decodeNSCounts(v []byte) (nsCounts, error) {
	if len(v) != 24 {
		return nsCounts{}, errCorruptValue
	}
	u := func(i int) int64 { return int64(binary.BigEndian.Uint64(v[i*8:])) }
	return nsCounts{messages: u(0), streams: u(1), lastActivity: u(2)}, nil
}

// catEntry is the value of a CI key: what the consumer-group and correlation
// filters need, so a category read touches M only for messages it returns.
//
//	flags byte (bit 0: the stream has a cardinal id)
//	hash  8 bytes: first 8 bytes of md5(cardinal id), zero without one
//	uvarint len, stream name
//	uvarint len, correlation category ("" when metadata has none)
type catEntry struct {
	hasCardinal bool
	hash        uint64
	stream      string
	correlation string
}

func (e catEntry) encode() []byte { return e.appendTo(nil) }

func (e catEntry) appendTo(b []byte) []byte {
	var flags byte
	if e.hasCardinal {
		flags = 1
	}
	b = append(b, flags)
	b = appendUint64(b, e.hash)
	b = binary.AppendUvarint(b, uint64(len(e.stream)))
	b = append(b, e.stream...)
	b = binary.AppendUvarint(b, uint64(len(e.correlation)))
	return append(b, e.correlation...)
}

// decodeCatEntry decodes v without copying the strings' bytes when the
// caller only compares them: stream and correlation alias v.
func decodeCatEntry(v []byte) (flags byte, hash uint64, stream, correlation []byte, err error) {
	if len(v) < 9 {
		return 0, 0, nil, nil, errCorruptValue
	}
	flags, hash, v = v[0], binary.BigEndian.Uint64(v[1:9]), v[9:]
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return 0, 0, nil, nil, errCorruptValue
	}
	stream, v = v[k:k+int(n)], v[k+int(n):]
	n, k = binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) != n {
		return 0, 0, nil, nil, errCorruptValue
	}
	return flags, hash, stream, v[k:], nil
}
