package fsm

import (
	"context"
	"fmt"
	"testing"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// indexBenchData is message n's data: customer c<n%10000> (100 messages
// each over 1,000,000) and a unique amount, scrambled so that global order
// and amount order differ.
func indexBenchData(n int) []byte {
	return fmt.Appendf(nil, `{"customer":"c%d","amount":%d,"note":"xxxxxxxxxxxxxxxxxxxxxxxx"}`, n%10000, (n*7919)%1_000_000)
}

// indexBenchNamespace writes total messages (100-message appends, 16 per
// ApplyBatch, 1000 streams of category "order") into namespace "bench".
func indexBenchNamespace(b *testing.B, s *Store, total int) *feeder {
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	const perAppend, perBatch = 100, 16
	var cmds []*fsmv1.Command
	for i := 0; i < total; i += perAppend {
		msgs := make([]*fsmv1.NewMessage, perAppend)
		for j := range msgs {
			msgs[j] = &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", i+j), Type: "Placed", Data: indexBenchData(i + j)}
		}
		cmds = append(cmds, appendCmd("bench", fmt.Sprintf("order-%d", (i/perAppend)%1000), msgs...))
		if len(cmds) == perBatch {
			f.apply(cmds...)
			cmds = cmds[:0]
		}
	}
	if len(cmds) > 0 {
		f.apply(cmds...)
	}
	return f
}

// buildIndex creates an index and runs rounds until it caught up; it
// returns how long the rounds took.
func buildIndex(b *testing.B, s *Store, f *feeder, name string, field *fsmv1.IndexField) time.Duration {
	f.must(createIndexCmd("bench", &fsmv1.IndexDefinition{Name: name, Category: "order", Fields: []*fsmv1.IndexField{field}}))
	start := time.Now()
	for {
		r, err := s.IndexRound("bench", 0)
		if err != nil {
			b.Fatal(err)
		}
		if !r.More {
			return time.Since(start)
		}
	}
}

// BenchmarkIndexQuery1M queries event indexes over 1,000,000 messages:
// by-customer (a string field; one customer has 100 entries spread over
// the namespace) and by-amount (an int field, unique values). Each query
// returns 100 entries: by equality, by a range, with their messages or
// positions only. The setup (the writes, both index builds, a full
// compaction: about a minute on 2 cores) runs once per invocation and
// logs the build rate.
func BenchmarkIndexQuery1M(b *testing.B) {
	s := benchStore(b)
	const total = 1_000_000
	f := indexBenchNamespace(b, s, total)
	for _, ix := range []struct {
		name  string
		field *fsmv1.IndexField
	}{
		{"by-customer", dataField("/customer", tString)},
		{"by-amount", dataField("/amount", tInt)},
	} {
		d := buildIndex(b, s, f, ix.name, ix.field)
		b.Logf("built %s over %d messages in %v: %.0f events/s", ix.name, total, d.Round(time.Millisecond), float64(total)/d.Seconds())
	}
	ns, err := s.acquire("bench")
	if err != nil {
		b.Fatal(err)
	}
	if err := ns.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
	s.release(ns)
	run := func(name string, q IndexQuery) {
		b.Run(name, func(b *testing.B) {
			benchViews(b, s, func(v *View) error {
				page, err := v.QueryIndex(q)
				if err == nil && len(page.Hits) != 100 {
					err = fmt.Errorf("query returned %d entries, want 100", len(page.Hits))
				}
				return err
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/entry")
		})
	}
	run("equal", IndexQuery{Index: "by-customer", Equal: []string{"c4242"}})
	run("equal-positions", IndexQuery{Index: "by-customer", Equal: []string{"c4242"}, PositionsOnly: true})
	run("range", IndexQuery{Index: "by-amount", From: &IndexBound{Value: "500000"}, To: &IndexBound{Value: "500100", Exclusive: true}})
	run("range-positions", IndexQuery{Index: "by-amount", From: &IndexBound{Value: "500000"}, To: &IndexBound{Value: "500100", Exclusive: true}, PositionsOnly: true})
}

// BenchmarkIndexBuild builds an index over 100,000 messages per
// iteration (a new index each time): the rebuild rate, in events/s.
func BenchmarkIndexBuild(b *testing.B) {
	s := benchStore(b)
	const total = 100_000
	f := indexBenchNamespace(b, s, total)
	b.ReportAllocs()
	b.ResetTimer()
	var cpu int64 // process CPU of the builds, ns: the host is shared
	for i := 0; i < b.N; i++ {
		before := processCPU(b)
		buildIndex(b, s, f, fmt.Sprintf("ix-%d", i), dataField("/amount", tInt))
		cpu += processCPU(b) - before
		b.StopTimer()
		f.must(deleteIndexCmd("bench", fmt.Sprintf("ix-%d", i)))
		if _, err := s.IndexRound("bench", 0); err != nil { // drops the entries, outside the timing
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*total)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu)/float64(b.N*total), "cpu-ns/event")
}
