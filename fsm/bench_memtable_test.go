package fsm

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// BenchmarkApplyMemtable applies appends to a real Pebble database and
// reports, beside ns/op and B/op, what reaches the memtable per message:
// keys/msg, key-B/msg and val-B/msg counted from the namespace's WAL (every
// batch Pebble applied, as a fresh store's first calls write it), and
// wal-B/msg over the whole run (Pebble's WAL.BytesIn: batch bytes,
// headers included), and cpu-µs/msg, the CPU the whole process spent per
// message (Pebble's flushes and compactions included; steadier than ns/op
// on a shared machine). -v logs the count per key family (M, SI, CI, ...).
//
//	single    64 single-message appends per ApplyBatch over 1000 streams (append)
//	batch100  16 appends of 100 messages per ApplyBatch over 1000 streams (append-batch)
//
// One op is one ApplyBatch call.
func BenchmarkApplyMemtable(b *testing.B) {
	for _, bc := range []struct {
		name          string
		entries, msgs int
	}{
		{"single", 64, 1},
		{"batch100", 16, 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ring := memtableRing(b, bc.entries*16, bc.msgs)
			// What one call writes: a fresh store's first calls, read back
			// from its WAL before any flush.
			counts := func() map[string]*familyCount {
				s := benchStore(b)
				f := newFeeder(b, s)
				f.must(createNSAllTypes("bench"))
				first := walBatches(b, s, "bench")
				next := f.next
				logs := make([]Entry, bc.entries)
				const calls = 16
				for i := range calls {
					next = applyRing(b, s, ring, i*bc.entries, logs, next)
				}
				return countFamilies(b, walBatches(b, s, "bench")[len(first):])
			}()
			msgs := float64(16 * bc.entries * bc.msgs)
			var keys, kb, vb int
			for _, c := range counts {
				keys, kb, vb = keys+c.keys, kb+c.keyBytes, vb+c.valBytes
			}
			if testing.Verbose() {
				var sb strings.Builder
				for _, fam := range slices.Sorted(maps.Keys(counts)) {
					c := counts[fam]
					fmt.Fprintf(&sb, "\n  %-3s %6.3f keys/msg  %6.1f key-B/msg  %6.1f val-B/msg", fam, float64(c.keys)/msgs, float64(c.keyBytes)/msgs, float64(c.valBytes)/msgs)
				}
				b.Logf("%s: per message written to the memtable:%s", bc.name, sb.String())
			}

			s := benchStore(b)
			f := newFeeder(b, s)
			f.must(createNSAllTypes("bench"))
			db := benchDB(s, "bench")
			wal0 := db.Metrics().WAL.BytesIn
			next := f.next
			logs := make([]Entry, bc.entries)
			cpu0 := processCPU(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				next = applyRing(b, s, ring, i*bc.entries, logs, next)
			}
			b.StopTimer()
			n := float64(b.N * bc.entries * bc.msgs)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/n, "cpu-µs/msg")
			b.ReportMetric(float64(keys)/msgs, "keys/msg")
			b.ReportMetric(float64(kb)/msgs, "key-B/msg")
			b.ReportMetric(float64(vb)/msgs, "val-B/msg")
			b.ReportMetric(float64(db.Metrics().WAL.BytesIn-wal0)/n, "wal-B/msg")
		})
	}
}

// memtableRing encodes n append entries of msgs messages each (200-byte
// data, type Deposited, a uuid-shaped id), entry i to stream account-(i%1000).
func memtableRing(b *testing.B, n, msgs int) []Entry {
	ring := make([]Entry, n)
	for i := range ring {
		ms := make([]*fsmv1.NewMessage, msgs)
		for j := range ms {
			ms[j] = &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", i*msgs+j), Type: "Deposited", Data: payload200}
		}
		cmd := appendCmd("bench", fmt.Sprintf("account-%d", i%1000), ms...)
		cmd.InputRules = InputRules // as Node.Apply stamps it
		data, err := EncodeCommand(cmd)
		if err != nil {
			b.Fatal(err)
		}
		ring[i] = Entry{Term: 1, Data: data}
	}
	return ring
}

func benchDB(s *Store, name string) *pebble.DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.namespaces[name].db
}

type familyCount struct{ keys, keyBytes, valBytes int }

// keyFamily names a namespace key's family by its prefix (keys.go).
func keyFamily(k []byte) string {
	switch {
	case len(k) == 0:
		return "?"
	case k[0] == 'M' || k[0] == 'A':
		return string(k[:1])
	case len(k) >= 2:
		return string(k[:2])
	}
	return string(k)
}

// countFamilies counts the point writes of batches (WAL records) by key
// family.
func countFamilies(b *testing.B, batches [][]byte) map[string]*familyCount {
	out := map[string]*familyCount{}
	for _, data := range batches {
		var pb pebble.Batch
		if err := pb.SetRepr(data); err != nil {
			b.Fatal(err)
		}
		r := pb.Reader()
		for {
			kind, k, v, ok, err := r.Next()
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				break
			}
			if kind == pebble.InternalKeyKindLogData {
				continue // walBatches' sync marker
			}
			fam := keyFamily(k)
			if kind != pebble.InternalKeyKindSet {
				fam += "-" + kind.String()
			}
			c := out[fam]
			if c == nil {
				c = &familyCount{}
				out[fam] = c
			}
			c.keys++
			c.keyBytes += len(k)
			c.valBytes += len(v)
		}
	}
	return out
}

// walBatches returns every batch in the WAL files of namespace name, in
// file and record order. The database must not have flushed yet.
func walBatches(b *testing.B, s *Store, name string) [][]byte {
	s.mu.Lock()
	ns := s.mu.namespaces[name]
	s.mu.Unlock()
	// Apply does not wait for the WAL's write (NoSync): a synced marker
	// puts every earlier batch in the files.
	if err := ns.db.LogData(nil, pebble.Sync); err != nil {
		b.Fatal(err)
	}
	dir := ns.dir
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no WAL in %s: %v", dir, err)
	}
	slices.Sort(files)
	var out [][]byte
	for _, path := range files {
		var num uint64
		if _, err := fmt.Sscanf(filepath.Base(path), "%d.log", &num); err != nil {
			b.Fatalf("WAL name %s: %v", path, err)
		}
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r := newRecordReader(record.NewReader, f, num)
		for {
			rec, err := r.Next()
			if err == io.EOF || err == record.ErrZeroedChunk || err == record.ErrInvalidChunk {
				break
			}
			if err != nil {
				b.Fatalf("WAL %s: %v", path, err)
			}
			data, err := io.ReadAll(rec)
			if err != nil {
				break // a torn tail: the record being written
			}
			out = append(out, data)
		}
		f.Close()
	}
	return out
}

// newRecordReader calls record.NewReader, whose log number type is
// internal to Pebble.
func newRecordReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return newReader(r, N(num))
}
