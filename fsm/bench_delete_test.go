package fsm

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// fillCategory writes streams x perStream messages of 200 bytes to the
// category "account" of namespace "bench" (100 messages per append, 16
// appends per ApplyBatch) and returns the feeder.
func fillCategory(b *testing.B, s *Store, streams, perStream int) *feeder {
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	var cmds []*fsmv1.Command
	for round := 0; round < perStream/100; round++ {
		for st := 0; st < streams; st++ {
			msgs := make([]*fsmv1.NewMessage, 100)
			for i := range msgs {
				msgs[i] = &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", (round*streams+st)*100+i), Type: []string{"Deposited", "Withdrawn"}[i%2], Data: payload200}
			}
			cmds = append(cmds, appendCmd("bench", fmt.Sprintf("account-%d", st), msgs...))
			if len(cmds) == 16 {
				f.apply(cmds...)
				cmds = cmds[:0]
			}
		}
	}
	if len(cmds) > 0 {
		f.apply(cmds...)
	}
	return f
}

// diskBytes is the namespace database's table bytes after a flush.
func diskBytes(b *testing.B, s *Store, name string) uint64 {
	ns, err := s.acquire(name)
	if err != nil {
		b.Fatal(err)
	}
	defer s.release(ns)
	if err := ns.db.Flush(); err != nil {
		b.Fatal(err)
	}
	return tableBytes(ns)
}

// tableBytes is the size of the database's sstables: the data, without the
// WAL files Pebble keeps for reuse.
func tableBytes(ns *namespace) uint64 { return uint64(ns.db.Metrics().Total().TablesSize) }

// BenchmarkDeleteByWatermark1M removes a million messages (1000 streams
// of 1000) with one DeleteByWatermark entry and reports its apply time and
// the database's sstable bytes before, right after, once Pebble's own
// compactions have run (polled for up to 10 s), and after a manual
// compaction of everything.
func BenchmarkDeleteByWatermark1M(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		s := benchStore(b)
		f := fillCategory(b, s, 1000, 1000)
		before := diskBytes(b, s, "bench")
		var names []string
		for st := 0; st < 1000; st++ {
			names = append(names, fmt.Sprintf("account-%d", st))
		}
		slices.Sort(names)
		var marks []any
		for _, n := range names {
			marks = append(marks, n, 999)
		}
		cmd := watermarkCmd("bench", "account", nil, marks...)
		logs := commandEntries(b, f.next, cmd)
		b.StartTimer()
		start := time.Now()
		r := s.ApplyBatch(logs)[0]
		took := time.Since(start)
		b.StopTimer()
		if w, ok := memberOK[*fsmv1.WatermarkDeletionResult](r); !ok || w.MessagesDeleted != 1_000_000 {
			b.Fatalf("DeleteByWatermark: %v", r)
		}
		after := diskBytes(b, s, "bench")
		ns, _ := s.acquire("bench")
		var auto uint64
		for range 50 {
			time.Sleep(200 * time.Millisecond)
			if auto = tableBytes(ns); auto < before/10 {
				break
			}
		}
		s.release(ns)
		reclaimed := compactAll(b, s, "bench")
		b.ReportMetric(took.Seconds(), "apply-s")
		b.ReportMetric(float64(before)/(1<<20), "MiB-before")
		b.ReportMetric(float64(after)/(1<<20), "MiB-after")
		b.ReportMetric(float64(auto)/(1<<20), "MiB-within-10s")
		b.ReportMetric(float64(reclaimed)/(1<<20), "MiB-compacted")
		b.StartTimer()
	}
}

func compactAll(b *testing.B, s *Store, name string) uint64 {
	ns, err := s.acquire(name)
	if err != nil {
		b.Fatal(err)
	}
	defer s.release(ns)
	if err := ns.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
	return tableBytes(ns)
}

// BenchmarkReadCategoryAfterTruncate reads 100 messages of a category of
// 1000 streams x 100 messages from the start, intact and after half its
// streams were truncated (so the read steps over removed messages).
func BenchmarkReadCategoryAfterTruncate(b *testing.B) {
	for _, truncate := range []bool{false, true} {
		name := "intact"
		if truncate {
			name = "half-truncated"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b)
			f := fillCategory(b, s, 1000, 100)
			if truncate {
				for st := 0; st < 1000; st += 2 {
					f.must(truncateCmd("bench", fmt.Sprintf("account-%d", st), 100))
				}
			}
			benchViews(b, s, func(v *View) error {
				msgs, err := v.ReadCategory(CategoryQuery{Category: "account", Limit: 100})
				if err == nil && len(msgs) != 100 {
					err = fmt.Errorf("read %d messages, want 100", len(msgs))
				}
				return err
			})
		})
	}
}

// BenchmarkExpire measures ExpireMessages entries on 1000 streams of 100
// messages (100,000 in the category "account"): an idle entry (policies,
// nothing due), one that ages out all 100,000 through a namespace
// max-age, and one that caps every stream at 10 through a category
// max-count (90,000 removed). Each reports its apply time per entry.
func BenchmarkExpire(b *testing.B) {
	for _, tc := range []struct {
		name    string
		policy  *fsmv1.Command
		at      int64
		removed int64
	}{
		{"idle", policyCmd("bench", scopeNS, "", time.Hour, 0), testTime, 0},
		{"age-100k", policyCmd("bench", scopeNS, "", time.Hour, 0), testTime + int64(2*time.Hour), 100_000},
		{"count-90k", policyCmd("bench", scopeCat, "account", 0, 10), testTime, 90_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := benchStore(b)
				f := fillCategory(b, s, 1000, 100)
				f.must(tc.policy)
				logs := commandEntries(b, f.next, expireCmd("bench", tc.at, 0))
				f.next++
				b.StartTimer()
				r := s.ApplyBatch(logs)[0]
				b.StopTimer()
				if e, ok := memberOK[*fsmv1.ExpiryResult](r); !ok || e.MessagesDeleted != tc.removed {
					b.Fatalf("expiry %+v, want %d removed", r, tc.removed)
				}
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSetCountPolicy measures the one-time cost of setting a
// namespace-wide max-count on 100,000 streams of 2 messages (the walk of
// every VI key that queues the streams past it; here all, at max-count 1)
// and of the expiry entry that then removes 100,000 messages.
func BenchmarkSetCountPolicy(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		s := benchStore(b)
		f := newFeeder(b, s)
		f.must(createNSAllTypes("bench"))
		var cmds []*fsmv1.Command
		for st := range 100_000 {
			msgs := []*fsmv1.NewMessage{
				{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", 2*st), Type: "T", Data: payload200},
				{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", 2*st+1), Type: "T", Data: payload200},
			}
			cmds = append(cmds, appendCmd("bench", fmt.Sprintf("account-%d", st), msgs...))
			if len(cmds) == 64 {
				f.apply(cmds...)
				cmds = cmds[:0]
			}
		}
		f.apply(cmds...)
		set := commandEntries(b, f.next, policyCmd("bench", scopeNS, "", 0, 1))
		expire := commandEntries(b, f.next+1, expireCmd("bench", testTime, 0))
		f.next += 2
		b.StartTimer()
		start := time.Now()
		s.ApplyBatch(set)
		setTime := time.Since(start)
		r := s.ApplyBatch(expire)[0]
		b.ReportMetric(float64(setTime.Milliseconds()), "set-ms")
		b.ReportMetric(float64(time.Since(start).Milliseconds()-setTime.Milliseconds()), "expire-ms")
		b.StopTimer()
		if e, ok := memberOK[*fsmv1.ExpiryResult](r); !ok || e.MessagesDeleted != 100_000 || e.Streams != 100_000 {
			b.Fatalf("expiry %+v, want 100000 removed from 100000 streams", r)
		}
		s.Close()
		b.StartTimer()
	}
}
