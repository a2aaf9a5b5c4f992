package fsm

import (
	"context"
	"fmt"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// BenchmarkQuery1M queries a namespace of 1,000,000 messages (1000
// streams; 100-message appends, 16 per ApplyBatch; 60-byte data) where
// every message has one of two types and the tags course:c<i%1000> and
// student:s<i%7919>. One course tag thus matches 1,000 messages spread
// over the whole namespace. Sub-benchmarks:
//
//   - tag: the 1,000 messages of one course tag (one posting list);
//   - tag+type: those of one type (an intersection with a list of
//     500,000 entries, which the leapfrog join seeks, never walks);
//   - tag+tag: one course and one student (intersection, 0-1 matches);
//   - tag-index-only: the tag's posting list without reading messages;
//   - condition: the first match after a position (what apply does for
//     a conditional append).
//
// The setup (about 30 s on 2 cores: the writes, then a full compaction)
// runs once per invocation.
func BenchmarkQuery1M(b *testing.B) {
	s := benchStore(b)
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	const total, perAppend, perBatch = 1_000_000, 100, 16
	data := []byte(`{"amount":1234,"currency":"EUR","note":"xxxxxxxxxxxxxxxxx"}`)
	var cmds []*fsmv1.Command
	for i := 0; i < total; i += perAppend {
		msgs := make([]*fsmv1.NewMessage, perAppend)
		for j := range msgs {
			n := i + j
			msgs[j] = &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", n), Type: []string{"Enrolled", "Left"}[n%2], Data: data,
				Tags: []string{fmt.Sprintf("course:c%d", n%1000), fmt.Sprintf("student:s%d", n%7919)}}
		}
		cmds = append(cmds, appendCmd("bench", fmt.Sprintf("course-%d", (i/perAppend)%1000), msgs...))
		if len(cmds) == perBatch {
			f.apply(cmds...)
			cmds = cmds[:0]
		}
	}
	if len(cmds) > 0 {
		f.apply(cmds...)
	}
	// Read a settled database, as a namespace that was written a while
	// ago is: otherwise the compactions the setup left behind share the
	// two cores with the reads and the figures swing by 2-3x.
	ns, err := s.acquire("bench")
	if err != nil {
		b.Fatal(err)
	}
	if err := ns.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
	s.release(ns)
	run := func(name string, q Query, want int) {
		b.Run(name, func(b *testing.B) {
			benchViews(b, s, func(v *View) error {
				msgs, err := v.Query(q, 0, -1)
				if err == nil && len(msgs) != want {
					err = fmt.Errorf("query matched %d messages, want %d", len(msgs), want)
				}
				return err
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*max(want, 1)), "ns/match")
		})
	}
	run("tag", Query{[]QueryItem{{Tags: []string{"course:c7"}}}}, 1000)
	run("tag+type", Query{[]QueryItem{{Types: []string{"Left"}, Tags: []string{"course:c7"}}}}, 1000)
	// n%1000 == 7 and n%7919 == 7: n = 7 (mod 7,919,000), once below 1M.
	run("tag+tag", Query{[]QueryItem{{Tags: []string{"course:c7", "student:s7"}}}}, 1)
	// The posting list alone, without reading the messages: what the
	// merge costs, as opposed to fetching 1,000 scattered messages (one
	// data block each).
	b.Run("tag-index-only", func(b *testing.B) {
		benchViews(b, s, func(v *View) error {
			qp, err := openQuery(v.snap, Query{[]QueryItem{{Tags: []string{"course:c7"}}}}, false, 0)
			if err != nil {
				return err
			}
			defer qp.close()
			n := 0
			for next := int64(1); ; n++ {
				gp, ok, err := qp.root.seek(next)
				if err != nil {
					return err
				}
				if !ok {
					break
				}
				next = gp + 1
			}
			if n != 1000 {
				return fmt.Errorf("%d entries", n)
			}
			return nil
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/match")
	})
	b.Run("condition", func(b *testing.B) {
		ns, err := s.acquire("bench")
		if err != nil {
			b.Fatal(err)
		}
		defer s.release(ns)
		q := Query{[]QueryItem{{Tags: []string{"course:c7"}}}}
		for b.Loop() {
			gp, found, err := firstMatch(ns.db, q, total-2000, false)
			if err != nil || !found || gp != total-2000+8 {
				b.Fatalf("first match %d %v %v", gp, found, err)
			}
		}
	})
}

// BenchmarkApplyAppendTagged is BenchmarkApplyAppend (single-message
// appends, 200-byte data, 1000 streams, batches of 64) with tags and
// conditions: untagged (the baseline), two tags per message, and two tags
// plus a condition that passes (a query of one tag over the whole
// namespace; apply commits what the call staged before each conditional
// entry, so the cost includes one Pebble commit per entry).
func BenchmarkApplyAppendTagged(b *testing.B) {
	for _, tc := range []struct {
		name      string
		tags      bool
		condition bool
	}{{"untagged", false, false}, {"tags", true, false}, {"tags+condition", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchStore(b)
			f := newFeeder(b, s)
			f.must(createNSAllTypes("bench"))
			const batch = 64
			ring := make([]Entry, 64*batch)
			for i := range ring {
				m := &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", i), Type: "Deposited", Data: payload200}
				if tc.tags {
					m.Tags = []string{fmt.Sprintf("account:%d", i%1000), fmt.Sprintf("day:%d", i%30)}
				}
				c := appendCmd("bench", fmt.Sprintf("account-%d", i%1000), m)
				if tc.condition {
					// Never matches: no message has this tag.
					c.GetAppend().Condition = cond(0, item([]string{"Deposited"}, fmt.Sprintf("fresh:%d", i)))
				}
				data, err := EncodeCommand(c)
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
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
		})
	}
}
