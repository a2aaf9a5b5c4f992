package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// checkDockerfile parses the Dockerfile with BuildKit's own parser and
// runs BuildKit's build checks (`docker build --check`) on it, plus the
// image rules deploy/README.md promises: a non-root final stage, /data,
// the three ports, a health check.
func checkDockerfile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var warnings []string
	lint := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		warnings = append(warnings, fmt.Sprintf("%s:%d: %s: %s", path, line, rule, msg))
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range res.Warnings {
		warnings = append(warnings, fmt.Sprintf("%s:%d: %s", path, w.Location.Start.Line, w.Short))
	}
	if len(warnings) > 0 {
		return 0, fmt.Errorf("lint:\n  %s", strings.Join(warnings, "\n  "))
	}
	final := stages[len(stages)-1]
	want := map[string]bool{"nonroot": false, "volume /data": false, "8080": false, "8081": false, "7946": false, "healthcheck": false}
	if strings.Contains(final.BaseName, ":nonroot") {
		want["nonroot"] = true
	}
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			want["nonroot"] = c.User != "root" && c.User != "0"
		case *instructions.VolumeCommand:
			for _, v := range c.Volumes {
				if v == "/data" {
					want["volume /data"] = true
				}
			}
		case *instructions.ExposeCommand:
			for _, p := range c.Ports {
				want[strings.SplitN(p, "/", 2)[0]] = true
			}
		case *instructions.HealthCheckCommand:
			want["healthcheck"] = true
		}
	}
	for k, ok := range want {
		if !ok {
			return 0, fmt.Errorf("%s: final stage lacks %s", path, k)
		}
	}
	return len(stages), nil
}
