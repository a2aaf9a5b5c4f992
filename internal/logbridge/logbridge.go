// Package logbridge routes the loggers of Skald's dependencies into one
// slog.Logger, so --log-format json makes every line JSON: hclog (Raft,
// raft-wal, autopilot), the standard library's log.Logger (memberlist,
// net/http's ErrorLog), each message without the library's own level or
// name prefix and with a "component" attribute.
package logbridge

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// HCLog returns an hclog.Logger that writes into l with component name
// and hclog's keys as attributes. Trace lines are dropped. A value
// formatted with hclog.Fmt is rendered here (Raft's server lists as
// objects, anything else with its format), never as the format's parts.
func HCLog(l *slog.Logger, name string) hclog.Logger {
	// The base logger is Off: every call still reaches the sink (an
	// intercept logger hands sinks every level), and nothing is formatted
	// into io.Discard first.
	h := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: name, Level: hclog.Off, Output: io.Discard})
	h.RegisterSink(sink{l})
	return h
}

type sink struct{ log *slog.Logger }

func (s sink) Accept(name string, level hclog.Level, msg string, args ...any) {
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
		attrs = append(attrs, slog.Any(fmt.Sprint(args[i]), value(args[i+1])))
	}
	s.log.LogAttrs(ctx, lvl, strings.TrimSpace(msg), attrs...)
}

// server is a Raft server as a log attribute.
type server struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// value renders hclog's formatted values: hclog.Fmt("%+v", servers)
// (Raft's configuration lines) as a list of servers, any other Format
// with fmt.
func value(v any) any {
	f, ok := v.(hclog.Format)
	if !ok || len(f) == 0 {
		return v
	}
	if servers, ok := f[len(f)-1].([]raft.Server); ok && len(f) == 2 {
		out := make([]server, len(servers))
		for i, s := range servers {
			out[i] = server{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()}
		}
		return out
	}
	format, ok := f[0].(string)
	if !ok {
		return fmt.Sprint(f...)
	}
	return fmt.Sprintf(format, f[1:]...)
}

// Std returns a log.Logger that writes each line into l with component
// name: a leading level tag ("[WARN]", "[ERR]", "[INFO]", "[DEBUG]", as
// memberlist writes) sets the level and is cut, as is a "name: " prefix;
// lines without a tag are at level def (net/http's ErrorLog: "http: TLS
// handshake error ...").
func Std(l *slog.Logger, name string, def slog.Level) *log.Logger {
	return log.New(writer{l, name, def}, "", 0)
}

type writer struct {
	log  *slog.Logger
	name string
	def  slog.Level
}

func (w writer) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	lvl := w.def
	for _, t := range []struct {
		tag string
		lvl slog.Level
	}{{"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}, {"[WARN]", slog.LevelWarn}, {"[INFO]", slog.LevelInfo}, {"[DEBUG]", slog.LevelDebug}, {"[TRACE]", slog.LevelDebug}} {
		if rest, ok := strings.CutPrefix(msg, t.tag); ok {
			msg, lvl = strings.TrimSpace(rest), t.lvl
			break
		}
	}
	msg = strings.TrimPrefix(msg, w.name+": ")
	w.log.LogAttrs(context.Background(), lvl, msg, slog.String("component", w.name))
	return len(p), nil
}
