//go:build !race

package fsm

// raceEnabled: the race detector is on (race_on_test.go).
const raceEnabled = false
