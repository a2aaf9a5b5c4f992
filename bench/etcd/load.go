package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// loadRun is what closedLoop measured.
type loadRun struct {
	ops, errs int64
	lat       []time.Duration // of the successful operations
	elapsed   time.Duration
	firstErr  string
}

// closedLoop runs workers callers for d, each with one operation
// outstanding at a time, each operation bounded by 10 s. newOp gives
// worker w its operation (an error there counts once and idles the
// worker); rng is the worker's own.
func closedLoop(workers int, d time.Duration, newOp func(w int) (func(ctx context.Context, rng *rand.Rand) error, error)) loadRun {
	var (
		ops, errs atomic.Int64
		firstErr  atomic.Value
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	start := time.Now()
	stop := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op, err := newOp(w)
			if err != nil {
				fail(err)
				return
			}
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []time.Duration
			for time.Now().Before(stop) {
				t := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := op(ctx, rng)
				cancel()
				if err != nil {
					fail(err)
					continue
				}
				mine = append(mine, time.Since(t))
				ops.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	run := loadRun{ops: ops.Load(), errs: errs.Load(), lat: lat, elapsed: time.Since(start)}
	if e, ok := firstErr.Load().(string); ok {
		run.firstErr = e
	}
	return run
}
