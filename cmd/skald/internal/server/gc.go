package server

import (
	"bufio"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is the server's GOGC. Go's 100 collects whenever the
// heap doubles; the write path allocates a few KiB per request, and at
// 400 the three servers spend about 7 % less CPU per replicated append
// (make bench-ab-style runs, bench/README.md). The soft memory limit
// below keeps the larger heap from outgrowing the machine: near the
// limit the collector runs as often as it must, whatever the percent.
const DefaultGCPercent = 400

// memoryLimitShare is the part of the machine's (or the container's)
// memory the Go heap may use before the collector works harder. Pebble's
// block cache and memtables live on the Go heap when built without cgo
// (the Docker image), so they count against it.
const memoryLimitShare = 0.75

// gcSettings is what applyGCSettings decided, for the start-up log.
type gcSettings struct {
	percent     int
	limit       int64 // bytes; math.MaxInt64 for none
	percentFrom string
	limitFrom   string
}

// applyGCSettings sets the collector's percent and soft memory limit for
// this process. The GOGC and GOMEMLIMIT environment variables, when set,
// win over the flags (the Go runtime has already applied them); a
// memoryLimit of 0 means memoryLimitShare of the memory found by
// totalMemory, or no limit when none is found.
func applyGCSettings(percent int, memoryLimit uint64, env func(string) string, total func() (uint64, bool)) gcSettings {
	s := gcSettings{percent: percent, percentFrom: "--gc-percent", limitFrom: "--memory-limit-bytes"}
	if v := env("GOGC"); v != "" {
		s.percent, s.percentFrom = debug.SetGCPercent(-1), "GOGC"
		debug.SetGCPercent(s.percent) // read back what the runtime parsed
	} else {
		debug.SetGCPercent(percent)
	}
	if env("GOMEMLIMIT") != "" {
		s.limit, s.limitFrom = debug.SetMemoryLimit(-1), "GOMEMLIMIT"
		return s
	}
	s.limit = math.MaxInt64
	switch {
	case memoryLimit > 0:
		s.limit = int64(min(memoryLimit, math.MaxInt64))
	default:
		if mem, ok := total(); ok {
			s.limit, s.limitFrom = int64(float64(mem)*memoryLimitShare), "75% of memory"
		} else {
			s.limitFrom = "none: memory size unknown"
		}
	}
	debug.SetMemoryLimit(s.limit)
	return s
}

func (s gcSettings) logAttrs() []any {
	limit := "none"
	if s.limit != math.MaxInt64 {
		limit = strconv.FormatInt(s.limit>>20, 10) + " MiB"
	}
	return []any{slog.Int("gc_percent", s.percent), slog.String("gc_percent_from", s.percentFrom),
		slog.String("memory_limit", limit), slog.String("memory_limit_from", s.limitFrom)}
}

// totalMemory is the memory this process may use: the cgroup v2 or v1
// limit when one is set, else the machine's MemTotal.
func totalMemory() (uint64, bool) {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(path); err == nil {
			if n, ok := parseCgroupLimit(string(b)); ok {
				return n, true
			}
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseMemTotal(f)
}

// parseCgroupLimit reads a cgroup memory limit file: a byte count, or
// "max" (v2) or a value near 2^63 (v1) for none.
func parseCgroupLimit(s string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

// parseMemTotal reads MemTotal (kB) from /proc/meminfo.
func parseMemTotal(r io.Reader) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil || kb == 0 {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
