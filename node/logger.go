package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogFor returns an hclog.Logger (what Raft takes) that writes into log
// with kebab-case keys as Raft emits them. Trace lines are dropped.
func hclogFor(log *slog.Logger, name string) hclog.Logger {
	// The base logger is Off: every call still reaches the sink (an
	// intercept logger hands sinks every level), and nothing is formatted
	// into io.Discard first.
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: name, Level: hclog.Off, Output: io.Discard})
	l.RegisterSink(slogSink{log})
	return l
}

type slogSink struct{ log *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	var lvl slog.Level
	switch level {
	case hclog.Trace, hclog.NoLevel, hclog.Off:
		return
	case hclog.Debug:
		lvl = slog.LevelDebug
	case hclog.Info:
		lvl = slog.LevelInfo
	case hclog.Warn:
		lvl = slog.LevelWarn
	default:
		lvl = slog.LevelError
	}
	if msg == "unable to get address for server, using fallback address" {
		// Expected for every server membership has not reported yet.
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, len(args)/2+1)
	attrs = append(attrs, slog.String("component", name))
	for i := 0; i+1 < len(args); i += 2 {
		attrs = append(attrs, slog.Any(fmt.Sprint(args[i]), args[i+1]))
	}
	s.log.LogAttrs(ctx, lvl, strings.TrimSpace(msg), attrs...)
}
