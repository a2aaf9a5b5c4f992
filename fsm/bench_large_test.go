package fsm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// largeMessages is the size of BenchmarkReadLarge's database, in
// largeStreams streams of 1000 messages.
const (
	largeMessages = 1_000_000
	largeStreams  = largeMessages / 1000
)

// largeStores holds BenchmarkReadLarge's filled stores, one per memtable
// size, so that -count repeats the reads, not the fill; TestMain closes
// and removes them.
var largeStores struct {
	sync.Mutex
	m map[uint64]*largeStore
}

type largeStore struct {
	s   *Store
	dir string
	cpu float64 // fill: process CPU per message, µs
}

func closeLargeStores() {
	largeStores.Lock()
	defer largeStores.Unlock()
	for _, ls := range largeStores.m {
		ls.s.Close()
		os.RemoveAll(ls.dir)
	}
	largeStores.m = nil
}

// BenchmarkReadLarge reads a namespace of 1,000,000 messages (1000 streams
// of 1000; 100-message appends of 200-byte data, 16 per ApplyBatch) once
// the fill's compactions are done, with none forced: the LSM shape
// (memtables, level 0, level sizes) is the one the memtable size gives. Per memtable size (32, 64, 128
// MiB), each read on a fresh view:
//
//   - stream: 100 messages of a random stream from a random position;
//   - category: 100 messages of member 0 of 4 of a consumer group, from
//     a random global position;
//   - last-type: the last message of a type in a random stream.
//
// fill-cpu-µs/msg is the process CPU per message of the fill. The fill
// runs once per memtable size and process (about a minute each on 2
// cores); the databases (about 500 MB each) are removed at exit.
func BenchmarkReadLarge(b *testing.B) {
	for _, mt := range []uint64{32 << 20, 64 << 20, 128 << 20} {
		b.Run(fmt.Sprintf("memtable=%dMiB", mt>>20), func(b *testing.B) {
			ls := largeFill(b, mt)
			b.Run("stream", func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 1))
				benchViews(b, ls.s, func(v *View) error {
					msgs, err := v.ReadStream(StreamQuery{Stream: fmt.Sprintf("account-%d", r.IntN(largeStreams)), Position: int64(r.IntN(900)), Limit: 100})
					if err == nil && len(msgs) != 100 {
						err = fmt.Errorf("read %d messages", len(msgs))
					}
					return err
				})
				b.ReportMetric(ls.cpu, "fill-cpu-µs/msg")
			})
			b.Run("category", func(b *testing.B) {
				r := rand.New(rand.NewPCG(2, 2))
				benchViews(b, ls.s, func(v *View) error {
					msgs, err := v.ReadCategory(CategoryQuery{Category: "account", GlobalPosition: 1 + r.Int64N(largeMessages-10_000), Limit: 100, Member: 0, Size: 4})
					if err == nil && len(msgs) != 100 {
						err = fmt.Errorf("read %d messages", len(msgs))
					}
					return err
				})
			})
			b.Run("last-type", func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 3))
				benchViews(b, ls.s, func(v *View) error {
					_, ok, err := v.LastMessage(fmt.Sprintf("account-%d", r.IntN(largeStreams)), "Deposited")
					if err == nil && !ok {
						err = fmt.Errorf("no last message")
					}
					return err
				})
			})
		})
	}
}

// largeFill returns the filled store of memtable size mt, filling it on
// first use.
func largeFill(b *testing.B, mt uint64) *largeStore {
	largeStores.Lock()
	defer largeStores.Unlock()
	if ls, ok := largeStores.m[mt]; ok {
		return ls
	}
	dir, err := os.MkdirTemp("", "skald-readlarge-")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(Options{Dir: dir + "/fsm", MemTableSize: mt})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	ls := &largeStore{s: s, dir: dir}
	if largeStores.m == nil {
		largeStores.m = map[uint64]*largeStore{}
	}
	largeStores.m[mt] = ls
	f := newFeeder(b, s)
	f.must(createNSAllTypes("bench"))
	const perAppend, perBatch = 100, 16
	r := rand.New(rand.NewPCG(1, 2))
	cpu0 := processCPU(b)
	batch := make([]Entry, 0, perBatch)
	next := f.next
	for i := 0; i < largeMessages; i += perAppend {
		msgs := make([]*fsmv1.NewMessage, perAppend)
		for j := range msgs {
			data := append(make([]byte, 0, 200), `{"p":"`...)
			for len(data) < 198 {
				data = append(data, byte('a'+r.IntN(26)))
			}
			msgs[j] = &fsmv1.NewMessage{Id: fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", i+j), Type: "Deposited", Data: append(data, `"}`...)}
		}
		data, err := EncodeCommand(appendCmd("bench", fmt.Sprintf("account-%d", (i/perAppend)%largeStreams), msgs...))
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, Entry{Term: 1, Data: data})
		if len(batch) == perBatch || i+perAppend >= largeMessages {
			next = applyRing(b, s, batch, 0, make([]Entry, len(batch)), next) // checks each is an append
			batch = batch[:0]
		}
	}
	ls.cpu = float64(processCPU(b)-cpu0) / 1e3 / largeMessages
	// Read a database at rest, as one written a while ago is: the fill's
	// compactions sharing the two cores with the reads swing the figures
	// by several times.
	// Not Compact.EstimatedDebt: with 128 MiB memtables it stayed near
	// 300 MB for minutes with no compaction scheduled.
	db := benchDB(s, "bench")
	deadline := time.Now().Add(5 * time.Minute)
	for idle := 0; idle < 20; { // 2 s without a flush or compaction running
		if m := db.Metrics(); m.Compact.NumInProgress > 0 || m.Flush.NumInProgress > 0 {
			idle = 0
		} else {
			idle++
		}
		if time.Now().After(deadline) {
			b.Fatal("flushes or compactions still running after 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ls
}
