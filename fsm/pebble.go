package fsm

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pebbleConfig builds the options every database of a store shares.
type pebbleConfig struct {
	fs           vfs.FS
	cache        *pebble.Cache
	memTableSize uint64
	log          *slog.Logger
	// waiter, when set, makes every database wait out resource errors in
	// its writes once open (waitFS). Nil for the short-lived databases of
	// tools (reading a checkpoint's floor).
	waiter *waiter
	// events, when set, listens to every database (pebbleEvents). Nil
	// for the short-lived databases of tools.
	events *pebbleEvents
}

func (c *pebbleConfig) options(fs vfs.FS, db string) *pebble.Options {
	var events *pebble.EventListener
	if c.events != nil {
		events = c.events.listener(db)
	}
	return &pebble.Options{
		EventListener:      events,
		FS:                 fs,
		Cache:              c.cache,
		MemTableSize:       c.memTableSize,
		MaxOpenFiles:       256,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{c.log},
	}
}

// open opens (creating if needed) the database in dir, which name names
// in logs ("_metadata", `namespace "shop"`). Its files sit on
// walPreallocFS (WAL preallocated in steps, prealloc.go) under waitFS
// (resource errors waited out once the database is open, waitfs.go).
// A lock held elsewhere is ErrLocked naming the lock file.
func (c *pebbleConfig) open(dir, name string) (_ *pebble.DB, err error) {
	defer func() {
		// Pebble's Open calls Logger.Fatalf on some failures of its own
		// writes (moving a new database's MANIFEST marker): Fatalf panics
		// (pebbleFatal), and Open releases what it took before passing the
		// panic on. When the cause is a resource (no descriptor, no
		// space), the open returns it as an error instead, so apply waits
		// it out as for any other resource error; a database cut short
		// that way is in the state a crash at that point leaves, which
		// Pebble's next Open handles. Every other fatal still panics.
		if r := recover(); r != nil {
			f, ok := r.(pebbleFatal)
			errno, resource := f.resourceErrno()
			if !ok || !resource {
				panic(r)
			}
			err = fmt.Errorf("fsm: open database %s: pebble: %s: %w", name, f.msg, errno)
		}
	}()
	if c.waiter == nil {
		db, err := pebble.Open(dir, c.options(walPreallocFS{c.fs}, name))
		return db, c.lockError(dir, err)
	}
	wfs := &waitFS{FS: c.fs, w: c.waiter}
	db, err := pebble.Open(dir, c.options(walPreallocFS{wfs}, name))
	if err != nil {
		return nil, c.lockError(dir, err)
	}
	wfs.armed.Store(true)
	return db, nil
}

// lockError turns Pebble's failure to take dir's lock file into ErrLocked
// naming the file; other errors (nil included) pass through. Pebble
// reports a lock another process holds as fcntl's bare EAGAIN or EACCES
// ("resource temporarily unavailable"), unlike a file it cannot open (a
// *fs.PathError), and one this process holds as "lock held by current
// process".
func (c *pebbleConfig) lockError(dir string, err error) error {
	if err == nil {
		return nil
	}
	lock := c.fs.PathJoin(dir, "LOCK")
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return err
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%w: another process holds its lock file %s (is another skald server running on this data directory?): %v", ErrLocked, lock, err)
	case err.Error() == "lock held by current process":
		return fmt.Errorf("%w: this process holds its lock file %s already (the store is open twice): %v", ErrLocked, lock, err)
	}
	return err
}

// pebbleLogger routes Pebble's messages into slog.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by Pebble on unrecoverable corruption and on some
// failed writes; it must not return. It panics with a pebbleFatal.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble")
	panic(pebbleFatal{msg: msg})
}

// pebbleFatal is the panic of pebbleLogger.Fatalf. Pebble formats its
// cause into the message, so only the text says what failed.
type pebbleFatal struct{ msg string }

func (f pebbleFatal) String() string { return "pebble: " + f.msg }

// resourceErrno is the resource errno (IsResourceError) the message
// names, if any, by the text the C library gives it.
func (f pebbleFatal) resourceErrno() (syscall.Errno, bool) {
	for _, errno := range resourceErrnos {
		if strings.Contains(f.msg, errno.Error()) {
			return errno, true
		}
	}
	return 0, false
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
