// Package delivery is the consumer-group delivery engine of the leader:
// one dispatcher per subscription group with a consumer attached, which
// reads the group's source from its checkpoint, hands messages to the
// consumers (round robin or pinned by stream), takes back what times
// out, is refused or is left by a consumer, parks what fails past the
// group's max retries, and saves the group's progress (checkpoint, parks,
// settled replays) as a GroupProgress command. It also exports the owned
// groups' live state as metrics.
//
// It owns only what is in memory: deliveries in flight, retry counts,
// timers. A group's definition, checkpoint and parked messages are
// replicated state, applied by fsm; this package reads them from
// committed views and changes them only by proposing commands through
// Node, the interface its node implements. It never writes to Pebble,
// never calls Raft, never speaks to clients or to other nodes: package
// node relays a follower's consumers to the leader and maps its errors
// onto the peer service.
//
// DESIGN.md beside this file explains the mechanisms.
package delivery
