package fsm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// indexHeapBound is what building a string index may add to the Go heap
// over what it was before, whatever the size of the indexed values: the
// bound docs/security.md states (a round holds at most its byte budgets,
// DefaultIndexRoundReadBytes of messages read and
// DefaultIndexRoundBatchBytes staged, the latter in about three copies;
// the rest is the collector's headroom over garbage).
const indexHeapBound = 64 << 20

// Building a string index over large values keeps the heap under
// indexHeapBound: values over MaxIndexValueBytes are not indexed, and a
// round of values under it stops at its byte budgets instead of holding
// DefaultIndexRoundMessages of them in one batch. The heap is sampled
// while the rounds run (HeapInuse, its peak over the heap after a
// collection before the first round); the store is on disk, so the
// messages themselves are not in the heap.
//
// The test runs in a process of its own: the collector lets garbage grow
// in proportion to the live heap, so the stores of the tests before it
// would move the peak by hundreds of MiB.
func TestIndexRoundHeapBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 MB")
	}
	if raceEnabled {
		t.Skip("under the race detector Pebble's memtables and block cache are in the Go heap; " +
			"make test runs this test without it")
	}
	if os.Getenv(heapChildEnv) == "" {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIndexRoundHeapBound$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), heapChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a process of its own:\n%s", out)
		if err != nil {
			t.Fatalf("TestIndexRoundHeapBound in a process of its own: %v", err)
		}
		if !strings.Contains(string(out), "--- PASS: TestIndexRoundHeapBound") {
			t.Fatal("TestIndexRoundHeapBound did not run in its process")
		}
		return
	}
	for _, tc := range []struct {
		name          string
		messages      int
		valueBytes    int
		wantIndexed   int64
		wantSkippedAt int64 // Skipped counter at least
	}{
		// Values of 1 MiB: none is indexed (MaxIndexValueBytes).
		{name: "1 MiB values", messages: 256, valueBytes: 1 << 20, wantIndexed: 0, wantSkippedAt: 256},
		// Values at the cap: every one is indexed, in rounds bounded by
		// bytes (10,000 of them are 20 MB of entries in one batch).
		{name: "1 KiB values", messages: 30_000, valueBytes: MaxIndexValueBytes, wantIndexed: 30_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, vfs.Default, func(o *Options) {
				o.Dir = t.TempDir()
				o.CacheSize = 8 << 20
			})
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			f.must(createIndexCmd("ns", &fsmv1.IndexDefinition{Name: "big", Version: 1, Category: "doc",
				Fields: []*fsmv1.IndexField{dataField("/v", tString)}}))
			perCall := min(1000, max(1, (4<<20)/tc.valueBytes))
			for i := 0; i < tc.messages; i += perCall {
				var msgs []*fsmv1.NewMessage
				for j := i; j < min(tc.messages, i+perCall); j++ {
					v := fmt.Sprintf("%08d", j)
					v += strings.Repeat("v", tc.valueBytes-len(v))
					msgs = append(msgs, newMsg("Doc", `{"v":"`+v+`"}`))
				}
				f.must(appendCmd("ns", fmt.Sprintf("doc-%d", i), msgs...))
			}
			// The appends' memtable goes to disk first, so the flush and
			// its compactions do not run during the rounds.
			h, err := s.acquire("ns")
			if err != nil {
				t.Fatal(err)
			}
			err = h.db.Flush()
			s.release(h)
			if err != nil {
				t.Fatal(err)
			}

			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			peak := newHeapPeak()
			total := IndexRoundResult{}
			for i := 0; ; i++ {
				res, err := s.IndexRound("ns", 0)
				if err != nil {
					t.Fatalf("index round: %v", err)
				}
				peak.sample()
				total.Indexed += res.Indexed
				total.Skipped += res.Skipped
				if !res.More {
					break
				}
				if i > 10_000 {
					t.Fatal("index rounds never end")
				}
			}
			max := peak.stop()
			grew := int64(max) - int64(base)
			t.Logf("%d messages of %d-byte values: heap in use %d MiB before, peak %d MiB (+%d MiB)",
				tc.messages, tc.valueBytes, base>>20, max>>20, grew>>20)
			if grew > indexHeapBound {
				t.Fatalf("building the index took the heap from %d to %d bytes (+%d), more than the bound of +%d",
					base, max, grew, indexHeapBound)
			}
			if total.Indexed != tc.wantIndexed || total.Skipped < tc.wantSkippedAt {
				t.Fatalf("indexed %d, skipped %d; want %d indexed, at least %d skipped",
					total.Indexed, total.Skipped, tc.wantIndexed, tc.wantSkippedAt)
			}
		})
	}
}

// heapChildEnv marks the process TestIndexRoundHeapBound runs itself in.
const heapChildEnv = "SKALD_TEST_INDEX_HEAP_CHILD"

// heapPeak samples HeapInuse every millisecond until stop.
type heapPeak struct {
	mu   sync.Mutex
	peak uint64
	done chan struct{}
	wg   sync.WaitGroup
}

func newHeapPeak() *heapPeak {
	p := &heapPeak{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.sample()
			}
		}
	}()
	return p
}

func (p *heapPeak) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.mu.Lock()
	p.peak = max(p.peak, ms.HeapInuse)
	p.mu.Unlock()
}

// stop ends the sampling and returns the peak.
func (p *heapPeak) stop() uint64 {
	close(p.done)
	p.wg.Wait()
	p.sample()
	return p.peak
}
