package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Benchmarks run on the real filesystem (b.TempDir), as production does.
// Run them with: make bench (or go test -run '^$' -bench . ./fsm).

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(Options{Dir: b.TempDir() + "/fsm"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// payload200 is a 200-byte JSON object.
var payload200 = func() []byte {
	const head, tail = `{"amount":1234,"currency":"EUR","note":"`, `"}`
	return []byte(head + strings.Repeat("x", 200-len(head)-len(tail)) + tail)
}()

// BenchmarkApplyAppend applies single-message appends (200-byte data) to
// 1000 streams of one namespace, in ApplyBatch calls of 64 entries, as
// Raft delivers them under load. Like every apply benchmark, the
// namespace is created as a leader creates it today, its type index
// complete (every message is indexed by type, typeindex.go).
func BenchmarkApplyAppend(b *testing.B) { benchApplyAppend(b, benchStore(b)) }

func benchApplyAppend(b *testing.B, s *Store) {
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	const batch = 64
	// Pre-encode a ring of entries; indexes are set per iteration.
	ring := make([]Entry, 64*batch)
	for i := range ring {
		cmd := appendCmd("bench", fmt.Sprintf("account-%d", i%1000), &fsmv1.NewMessage{
			Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", i), Type: "Deposited", Data: payload200,
		})
		cmd.InputRules = InputRules // as Node.Apply stamps it
		data, err := EncodeCommand(cmd)
		if err != nil {
			b.Fatal(err)
		}
		ring[i] = Entry{Term: 1, Data: data}
	}
	next := f.next
	logs := make([]Entry, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next = applyRing(b, s, ring, i*batch, logs, next)
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
}

// applyRing fills logs with copies of ring's entries from position from
// on (wrapping), numbered from next, applies them as one call, checks each
// is an append, and returns the index after the last.
func applyRing(b *testing.B, s *Store, ring []Entry, from int, logs []Entry, next uint64) uint64 {
	for j := range logs {
		logs[j] = ring[(from+j)%len(ring)]
		logs[j].Index = next
		next++
	}
	for _, r := range s.ApplyBatch(logs) {
		if _, ok := memberOK[*fsmv1.AppendResult](r); !ok {
			b.Fatalf("apply: %v", r)
		}
	}
	return next
}

// BenchmarkReadStream100 reads a 100-message stream (one view per read,
// as a request does).
func BenchmarkReadStream100(b *testing.B) {
	s := benchStore(b)
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	for i := 0; i < 50; i++ { // other streams around it
		msgs := make([]*fsmv1.NewMessage, 100)
		for j := range msgs {
			msgs[j] = newMsg("Deposited", string(payload200))
		}
		f.must(appendCmd("bench", fmt.Sprintf("account-%d", i), msgs...))
	}
	benchViews(b, s, func(v *View) error {
		msgs, err := v.ReadStream(StreamQuery{Stream: "account-25", Limit: 100})
		if err == nil && len(msgs) != 100 {
			err = fmt.Errorf("read %d messages", len(msgs))
		}
		return err
	})
}

// BenchmarkReadCategory100ConsumerGroup reads 100 messages of member 0 of
// a 4-member consumer group from a category of 1000 streams.
func BenchmarkReadCategory100ConsumerGroup(b *testing.B) {
	s := benchStore(b)
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	cmds := make([]*fsmv1.Command, 0, 64)
	for i := 0; i < 10000; i++ {
		cmds = append(cmds, appendCmd("bench", fmt.Sprintf("account-%d", i%1000), newMsg("Deposited", string(payload200))))
		if len(cmds) == 64 {
			f.apply(cmds...)
			cmds = cmds[:0]
		}
	}
	f.apply(cmds...)
	benchViews(b, s, func(v *View) error {
		msgs, err := v.ReadCategory(CategoryQuery{Category: "account", GlobalPosition: 2000, Limit: 100, Member: 0, Size: 4})
		if err == nil && len(msgs) != 100 {
			err = fmt.Errorf("read %d messages", len(msgs))
		}
		return err
	})
}

// BenchmarkLastMessageByType finds the last message of a rare type in a
// stream of 10,000 messages.
func BenchmarkLastMessageByType(b *testing.B) {
	s := benchStore(b)
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	for i := 0; i < 10; i++ {
		msgs := make([]*fsmv1.NewMessage, 1000)
		for j := range msgs {
			typ := "Deposited"
			if (i*1000+j)%997 == 0 {
				typ = "Audited"
			}
			msgs[j] = newMsg(typ, string(payload200))
		}
		f.must(appendCmd("bench", "account-1", msgs...))
	}
	benchViews(b, s, func(v *View) error {
		m, ok, err := v.LastMessage("account-1", "Audited")
		if err == nil && (!ok || m.Position != 9970) {
			err = fmt.Errorf("last message %+v, found %v", m, ok)
		}
		return err
	})
}

// benchViews times read on a fresh view of namespace "bench" per
// iteration, as one request would.
func benchViews(b *testing.B, s *Store, read func(*View) error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := s.View("bench")
		if err != nil {
			b.Fatal(err)
		}
		err = read(v)
		v.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyAppendBatchSustained applies entries of 100 messages
// (200-byte data, 1000 streams), as append-batch produces them, and
// reports the CPU the whole process spent per message (Pebble's flushes
// and compactions run on background goroutines, which the ns/op of a
// 2-core machine hides) and the bytes Pebble wrote per message. Run it
// long enough for compactions to start: -benchtime 3000x (300k messages)
// or more; -v also prints Pebble's LSM metrics at the end.
func BenchmarkApplyAppendBatchSustained(b *testing.B) { benchSustained(b, benchStore(b)) }

func benchSustained(b *testing.B, s *Store) {
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	const batch = 100
	// Random letters, as skald bench sends: compressible like text, not
	// like a repeated byte.
	r := rand.New(rand.NewPCG(1, 2))
	ring := make([]Entry, 64)
	for i := range ring {
		msgs := make([]*fsmv1.NewMessage, batch)
		for j := range msgs {
			data := append(make([]byte, 0, 200), `{"p":"`...)
			for len(data) < 198 {
				data = append(data, byte('a'+r.IntN(26)))
			}
			msgs[j] = &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", i*batch+j), Type: "Deposited", Data: append(data, `"}`...)}
		}
		data, err := EncodeCommand(appendCmd("bench", fmt.Sprintf("account-%d", i%1000), msgs...))
		if err != nil {
			b.Fatal(err)
		}
		ring[i] = Entry{Term: 1, Data: data}
	}
	next := f.next
	logs := make([]Entry, 16)
	cpu0 := processCPU(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(logs) {
		logs = logs[:min(len(logs), b.N-i)]
		next = applyRing(b, s, ring, i, logs, next)
	}
	b.StopTimer()
	msgs := float64(b.N * batch)
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/msgs, "cpu-µs/msg")
	s.mu.Lock()
	m := s.mu.namespaces["bench"].db.Metrics()
	s.mu.Unlock()
	if testing.Verbose() {
		b.Logf("%s", m)
	}
	t := m.Total()
	b.ReportMetric(float64(t.TableBytesFlushed)/msgs, "flushed-B/msg")
	b.ReportMetric(float64(t.TableBytesCompacted)/msgs, "compacted-B/msg")
}

// processCPU is the user and system CPU time the process has used, in ns.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkApplyAppendDedupe is BenchmarkApplyAppend (single-message
// appends, 200-byte data, 1000 streams, batches of 64) with a fresh id per
// message, entry time advancing 1 ms per entry, and idempotent writes:
//
//	generated      ids the leader made (client_id false): no dedupe work
//	client-off     client ids in a namespace with dedupe off
//	client-2m      client ids, the default 2-minute window (lookups in two
//	               buckets, an index key per message, expiry by range delete)
//	client-forever client ids remembered forever (one bucket)
//
// Compare generated with BenchmarkApplyAppend of an older build for the
// cost to writes that do not use dedupe, and client-2m with generated for
// its cost per message.
func BenchmarkApplyAppendDedupe(b *testing.B) {
	for _, bc := range []struct {
		name   string
		client bool
		window int64
	}{
		{"generated", false, 0},
		{"client-off", true, DedupeOff},
		{"client-2m", true, 0},
		{"client-forever", true, DedupeForever},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchStore(b)
			f := newFeeder(b, s)
			create := createNSAllTypes("bench")
			create.GetCreateNamespace().DedupeWindowNanos = bc.window
			f.must(create)
			const batch = 64
			logs := make([]Entry, batch)
			next, seq := f.next, 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range logs {
					seq++
					cmd := appendCmd("bench", fmt.Sprintf("account-%d", seq%1000), &fsmv1.NewMessage{
						Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", seq), Type: "Deposited", Data: payload200, ClientId: bc.client,
					})
					cmd.GetAppend().TimeUnixNano = testTime + int64(seq)*1e6
					data, err := EncodeCommand(cmd)
					if err != nil {
						b.Fatal(err)
					}
					logs[j] = Entry{Index: next, Term: 1, Data: data}
					next++
				}
				b.StartTimer()
				for _, r := range s.ApplyBatch(logs) {
					if a, ok := memberOK[*fsmv1.AppendResult](r); !ok || a.Duplicate {
						b.Fatalf("apply: %v", r)
					}
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
