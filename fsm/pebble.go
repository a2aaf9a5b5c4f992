package fsm

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pebbleConfig builds the options every database of a store shares.
type pebbleConfig struct {
	fs           vfs.FS
	cache        *pebble.Cache
	memTableSize uint64
	log          *slog.Logger
}

func (c *pebbleConfig) options() *pebble.Options {
	return &pebble.Options{
		FS:                 c.fs,
		Cache:              c.cache,
		MemTableSize:       c.memTableSize,
		MaxOpenFiles:       256,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{c.log},
	}
}

func (c *pebbleConfig) open(dir string) (*pebble.DB, error) {
	return pebble.Open(dir, c.options())
}

// pebbleLogger routes Pebble's messages into slog.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by Pebble on unrecoverable corruption; it must not return.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
