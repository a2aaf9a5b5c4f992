package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// Every answer comes from a fetch that started after the request: the
// shared answer is never older than a private one would be.
func TestIndexBatcherAnswersOnlyFromLaterFetches(t *testing.T) {
	t.Parallel()
	var started atomic.Uint64
	b := newIndexBatcher(context.Background(), func(context.Context) (uint64, error) {
		seq := started.Add(1)
		time.Sleep(200 * time.Microsecond) // let requests pile up behind it
		return seq, nil
	}, time.Second, func(int) {})
	var wg sync.WaitGroup
	errs := make(chan error, 64*50)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				before := started.Load()
				got, err := b.get(context.Background())
				if err != nil {
					errs <- err
					return
				}
				if got <= before {
					errs <- errors.New("answered by a fetch that started before the request")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := started.Load(); n >= 64*50 {
		t.Fatalf("%d fetches for %d requests: nothing was coalesced", n, 64*50)
	}
}

// Requests that arrive while a fetch runs share the next one.
func TestIndexBatcherCoalescesWaiters(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var fetches atomic.Int32
	b := newIndexBatcher(context.Background(), func(context.Context) (uint64, error) {
		n := fetches.Add(1)
		<-release
		return uint64(n), nil
	}, 5*time.Second, func(int) {})

	first := make(chan uint64, 1)
	go func() { idx, _ := b.get(context.Background()); first <- idx }()
	testutil.Eventually(t, 5*time.Second, "the first fetch", func() bool { return fetches.Load() == 1 })

	const n = 40
	got := make(chan uint64, n)
	for i := 0; i < n; i++ {
		go func() { idx, _ := b.get(context.Background()); got <- idx }()
	}
	testutil.Eventually(t, 5*time.Second, "every request to wait for the next fetch", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.next != nil && b.next.waiters == n
	})
	close(release)
	if idx := <-first; idx != 1 {
		t.Fatalf("first request got index %d, want 1", idx)
	}
	for i := 0; i < n; i++ {
		if idx := <-got; idx != 2 {
			t.Fatalf("waiter got index %d, want 2 (the second fetch)", idx)
		}
	}
	if f := fetches.Load(); f != 2 {
		t.Fatalf("%d fetches, want 2", f)
	}
}

func TestIndexBatcherErrorsAndCancellation(t *testing.T) {
	t.Parallel()
	ended, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	cases := []struct {
		name    string
		fetch   func(context.Context) (uint64, error)
		ctx     func() context.Context
		closing bool
		want    error
	}{
		{"fetch error reaches the caller", func(context.Context) (uint64, error) { return 0, errNotLeader },
			context.Background, false, errNotLeader},
		{"caller's context ends first", blockUntilDone,
			func() context.Context { return ended },
			false, context.DeadlineExceeded},
		{"node closing", blockUntilDone, context.Background, true, nodeapi.ErrShutdown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			life, end := context.WithCancel(context.Background())
			defer end()
			b := newIndexBatcher(life, tc.fetch, 200*time.Millisecond, func(int) {})
			if tc.closing {
				end()
			}
			_, err := b.get(tc.ctx())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func blockUntilDone(ctx context.Context) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}
