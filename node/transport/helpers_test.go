package transport

import (
	"errors"
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/internal/logbridge"
)

// testClusterSecret is the secret test ports derive their credentials
// from.
const testClusterSecret = "test-cluster-secret"

// waitTimeout bounds what a test waits for.
const waitTimeout = 20 * time.Second

func hclogFor(log *slog.Logger, name string) hclog.Logger { return logbridge.HCLog(log, name) }

// noAddrs knows no server's address: the transport dials the address
// Raft names.
type noAddrs struct{}

func (noAddrs) ServerAddr(raft.ServerID) (raft.ServerAddress, error) {
	return "", errors.New("test: no address reported")
}
