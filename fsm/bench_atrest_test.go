package fsm

import (
	"crypto/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/skalddb/skald/internal/atrest"
)

// BenchmarkApplyAtRest runs BenchmarkApplyAppend and
// BenchmarkApplyAppendBatchSustained on the operating system's file system
// (plain) and through the encrypting one (atrest), in one run, for the cost
// of encryption at rest per write: compare ns/op and cpu-µs/msg.
func BenchmarkApplyAtRest(b *testing.B) {
	for _, bench := range []struct {
		name string
		run  func(*testing.B, *Store)
	}{{"append", benchApplyAppend}, {"sustained", benchSustained}} {
		for _, encrypted := range []bool{false, true} {
			name := bench.name + "/plain"
			if encrypted {
				name = bench.name + "/atrest"
			}
			b.Run(name, func(b *testing.B) {
				var fs vfs.FS = vfs.Default
				if encrypted {
					fs = atrest.NewFS(vfs.Default, benchKeyring(b))
				}
				s, err := Open(Options{Dir: b.TempDir() + "/fsm", FS: fs})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				bench.run(b, s)
			})
		}
	}
}

func benchKeyring(b *testing.B) *atrest.Keyring {
	b.Helper()
	key := make([]byte, atrest.StoreKeySize)
	if _, err := rand.Read(key); err != nil {
		b.Fatal(err)
	}
	k, err := atrest.CreateKeyring(b.TempDir(), key)
	if err != nil {
		b.Fatal(err)
	}
	return k
}
