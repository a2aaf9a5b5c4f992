//go:build race

package fsm

// raceEnabled: the race detector is on. Pebble then allocates its
// manually managed memory (memtables, the block cache) from the Go heap,
// so the Go heap no longer measures what Skald's own code holds.
const raceEnabled = true
