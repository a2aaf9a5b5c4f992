package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// day is the unit --max-age takes beyond Go's durations: retention is
// thought of in days (30d), which time.ParseDuration does not know.
const day = 24 * time.Hour

// parseDays parses s: an optional "Nd" followed by a Go duration, or a
// Go duration alone.
func parseDays(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 32)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad day count %q", s[:i])
		}
		days, s = time.Duration(n)*day, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return days + d, nil
}

// formatDays prints a whole number of days as "30d", anything else as
// time.Duration does.
func formatDays(d time.Duration) string {
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}
