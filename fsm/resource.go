package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// Resource errors: the operating system is short of something it will have
// again once someone frees it (file descriptors, disk space, quota,
// kernel memory). They say nothing about the data, and every replica may
// meet them on the same entry, so apply waits for the resource instead of
// stopping the node: skipping the entry would let replicas diverge, and
// stopping every replica on the same entry stops the cluster.
var resourceErrnos = []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM}

// IsResourceError reports whether err is a transient shortage of an
// operating-system resource: too many open files (EMFILE, ENFILE), no
// space or quota left on the device (ENOSPC, EDQUOT), or out of kernel
// memory (ENOMEM).
func IsResourceError(err error) bool {
	for _, e := range resourceErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// isSpaceError reports whether err says the device (or the quota) is full.
func isSpaceError(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// isDescriptorError reports whether err says no file descriptor is free.
func isDescriptorError(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// ResourceAdvice says what an operator frees so that a store waiting on
// err (a resource error) in directory dir resumes.
func ResourceAdvice(err error, dir string) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return "the process has no file descriptor left: raise its limit (ulimit -n, systemd LimitNOFILE) or close connections to it"
	case errors.Is(err, syscall.ENFILE):
		return "the system has no file descriptor left (fs.file-max): stop other processes' open files or raise the limit"
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Sprintf("the volume of %s is full: free space on it (delete namespaces or other files) or grow it", dir)
	case errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("the disk quota for %s is used up: raise the quota or free space under it", dir)
	case errors.Is(err, syscall.ENOMEM):
		return "the system is out of kernel memory: stop other processes or add memory"
	}
	return "free the resource it names"
}

// Stall describes the store waiting for a resource: apply, or a write of
// Pebble's, met a resource error and retries it until it succeeds.
type Stall struct {
	Since time.Time // when the oldest wait began
	Err   error     // the most recent resource error
	Ops   int       // operations waiting
}

// Backoff between retries of an operation that met a resource error.
const (
	minResourceBackoff = 10 * time.Millisecond
	maxResourceBackoff = time.Second
	// stallLogEvery spaces the reminders a long stall logs.
	stallLogEvery = 30 * time.Second
)

// waiter makes operations that meet resource errors wait and retry, and
// keeps the store's stall state. One waiter serves a store: apply's retries
// and every Pebble database's file system (waitFS) share it.
type waiter struct {
	log  *slog.Logger
	dir  string
	stop chan struct{} // closed by interrupt: waits give up
	once sync.Once

	mu struct {
		sync.Mutex
		ops     int // operations waiting now
		since   time.Time
		err     error
		logged  time.Time
		stalls  uint64 // stalls begun (ops went from 0 to 1)
		stopped bool   // a wait gave up because of interrupt
	}
}

func newWaiter(log *slog.Logger, dir string) *waiter {
	return &waiter{log: log, dir: dir, stop: make(chan struct{})}
}

// interrupt makes every wait, now and later, give up at once.
func (w *waiter) interrupt() { w.once.Do(func() { close(w.stop) }) }

// retry runs op until it succeeds or fails with an error that is not
// waitable, sleeping a growing backoff between attempts while the store
// reports a stall. It returns op's last error, which is waitable only when
// the store was interrupted meanwhile.
func (w *waiter) retry(waitable func(error) bool, op func() error) error {
	err := op()
	if err == nil || !waitable(err) {
		return err
	}
	return w.retryAfter(err, waitable, op)
}

// retryAfter is retry once op's first attempt failed with err, a waitable
// error.
func (w *waiter) retryAfter(err error, waitable func(error) bool, op func() error) error {
	w.begin(err)
	defer w.end()
	for attempt := 0; ; attempt++ {
		if !w.pause(attempt, err) {
			return err
		}
		if err = op(); err == nil || !waitable(err) {
			return err
		}
	}
}

// begin records an operation that starts waiting on err.
func (w *waiter) begin(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.ops++
	w.mu.err = err
	if w.mu.ops > 1 {
		return
	}
	w.mu.stalls++
	w.mu.since = time.Now()
	w.mu.logged = w.mu.since
	w.log.Error("storage waiting for a resource: apply and writes pause and resume by themselves once it is free",
		"err", err, "what-to-free", ResourceAdvice(err, w.dir))
}

// pause sleeps before retry attempt, logging a reminder now and then. It
// reports false when the store was interrupted.
func (w *waiter) pause(attempt int, err error) bool {
	w.mu.Lock()
	w.mu.err = err
	if now := time.Now(); now.Sub(w.mu.logged) >= stallLogEvery {
		w.mu.logged = now
		w.log.Error("storage still waiting for a resource", "for", now.Sub(w.mu.since).Round(time.Second),
			"err", err, "what-to-free", ResourceAdvice(err, w.dir))
	}
	w.mu.Unlock()
	d := maxResourceBackoff
	if attempt < 10 {
		d = min(minResourceBackoff<<attempt, maxResourceBackoff)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stop:
		w.mu.Lock()
		w.mu.stopped = true
		w.mu.Unlock()
		return false
	}
}

// end records that a waiting operation finished (or gave up).
func (w *waiter) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.ops--
	if w.mu.ops == 0 && !w.mu.stopped {
		w.log.Info("storage resource available again: resumed", "waited", time.Since(w.mu.since).Round(time.Millisecond))
	}
}

// stall returns the current stall, ok false when nothing waits.
func (w *waiter) stall() (Stall, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.ops == 0 {
		return Stall{}, false
	}
	return Stall{Since: w.mu.since, Err: w.mu.err, Ops: w.mu.ops}, true
}

// Stall reports whether the store is waiting for a resource now (apply or
// one of Pebble's writes met a resource error and retries it), and since
// when. A node that stalls is not ready: it applies nothing until the
// resource is free.
func (s *Store) Stall() (Stall, bool) { return s.waiter.stall() }

// Stalls returns how many stalls began since the store opened.
func (s *Store) Stalls() uint64 {
	s.waiter.mu.Lock()
	defer s.waiter.mu.Unlock()
	return s.waiter.mu.stalls
}

// Interrupt ends every wait for a resource, now and later: the node calls
// it first when it shuts down, so that a stalled apply cannot hold Raft's
// shutdown. An ApplyBatch that gives up applies none of its entries
// (answering ErrInterrupted for each) and leaves the store refusing to
// apply or record a durable floor beyond what it holds, as a crash would;
// the entries apply on the next start. A write Pebble was retrying fails
// with its error, which Pebble treats as fatal.
func (s *Store) Interrupt() { s.waiter.interrupt() }

// Interrupted reports whether an ApplyBatch gave up its entries because of
// Interrupt (see there).
func (s *Store) Interrupted() bool { return s.interrupted.Load() }
