package fsm

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	closeLargeStores() // BenchmarkReadLarge's databases
	os.Exit(code)
}
