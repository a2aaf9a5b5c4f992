package node

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"

	"github.com/skalddb/skald/internal/logbridge"
)

// hclogFor returns an hclog.Logger (what Raft takes) that writes into log
// with kebab-case keys as Raft emits them (logbridge.HCLog).
func hclogFor(log *slog.Logger, name string) hclog.Logger {
	return logbridge.HCLog(log, name)
}
