package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// cpuMeter reads how much CPU the cluster's server processes have used, from
// process_cpu_seconds_total on each node's /metrics (admin token).
//
// Why: on a machine whose CPUs neighbours steal, or that the bench client
// shares with the servers, ops/s of one build swings by a third from run to
// run; the CPU the servers spend per operation barely moves, so it is the
// figure that compares two builds.
type cpuMeter struct {
	hc    *http.Client
	token string
	urls  []string
}

func newCPUMeter(cf *command.Flags, nodes []string) *cpuMeter {
	m := &cpuMeter{hc: cf.HTTPClient(), token: cf.Token}
	for _, n := range nodes {
		m.urls = append(m.urls, (&command.Flags{Addr: n}).BaseURL()+"/metrics")
	}
	return m
}

// seconds sums every node's CPU seconds.
func (m *cpuMeter) seconds(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var sum float64
	for _, u := range m.urls {
		s, err := m.scrape(ctx, u)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum, nil
}

func (m *cpuMeter) scrape(ctx context.Context, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("server CPU: GET %s: %s", url, resp.Status)
	}
	return parseCPUSeconds(resp.Body, url)
}

// parseCPUSeconds finds process_cpu_seconds_total in a Prometheus text
// exposition.
func parseCPUSeconds(r io.Reader, url string) (float64, error) {
	const name = "process_cpu_seconds_total "
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("server CPU: %s: %w", url, err)
			}
			return f, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("server CPU: read %s: %w", url, err)
	}
	return 0, fmt.Errorf("server CPU: %s has no process_cpu_seconds_total", url)
}

// start begins a measurement; the returned function ends it and gives the
// CPU seconds used in between, or ok false when a node could not be read
// (a token without access to /metrics, a node down).
func (m *cpuMeter) start(ctx context.Context) func() (float64, bool) {
	if m == nil {
		return func() (float64, bool) { return 0, false }
	}
	s0, err0 := m.seconds(ctx)
	return func() (float64, bool) {
		s1, err1 := m.seconds(ctx)
		return s1 - s0, err0 == nil && err1 == nil
	}
}
