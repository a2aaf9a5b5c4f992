package bench

import (
	"strings"
	"testing"
)

func TestParseCPUSeconds(t *testing.T) {
	cases := []struct {
		name, text string
		want       float64
		err        string
	}{
		{"value", "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.34\nprocess_open_fds 9\n", 12.34, ""},
		{"exponent", "go_goroutines 7\nprocess_cpu_seconds_total 1.5e+03\n", 1500, ""},
		{"similar name is not it", "process_cpu_seconds_total_other 3\n", 0, "has no process_cpu_seconds_total"},
		{"missing", "go_goroutines 7\n", 0, "has no process_cpu_seconds_total"},
		{"not a number", "process_cpu_seconds_total many\n", 0, "invalid syntax"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUSeconds(strings.NewReader(tc.text), "http://n1/metrics")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
