package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// checkDockerfile parses the Dockerfile with BuildKit's own parser and
// runs BuildKit's build checks (`docker build --check`) on it, plus the
// image rules deploy/README.md promises: a non-root final stage, /data,
// the three ports, a health check; and that the first stage copies the
// go.mod and go.sum of every module the root go.mod replaces with a
// folder (api/, client/) before it runs go mod download, which fails
// without them.
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
	if err := checkModuleCopies(path, stages[0]); err != nil {
		return 0, err
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

// checkModuleCopies fails unless build copies DIR/go.mod and DIR/go.sum
// for each `=> ./DIR` replace of the repository's go.mod (two folders up
// from the Dockerfile, deploy/) before its first `go mod download`.
func checkModuleCopies(path string, build instructions.Stage) error {
	gomod := filepath.Join(filepath.Dir(path), "..", "go.mod")
	src, err := os.ReadFile(gomod)
	if err != nil {
		return fmt.Errorf("%s: the module copies: %w", path, err)
	}
	var dirs []string
	for line := range strings.Lines(string(src)) {
		if _, dir, ok := strings.Cut(line, "=> ./"); ok {
			dirs = append(dirs, strings.TrimSpace(dir))
		}
	}
	copied := map[string]bool{}
	for _, c := range build.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			for _, s := range c.SourcePaths {
				copied[filepath.Clean(s)] = true
			}
		case *instructions.RunCommand:
			if !strings.Contains(strings.Join(c.CmdLine, " "), "go mod download") {
				continue
			}
			for _, d := range dirs {
				for _, f := range []string{"go.mod", "go.sum"} {
					if !copied[filepath.Join(d, f)] {
						return fmt.Errorf("%s: %s/%s is not copied before go mod download (%s replaces a module with ./%s)", path, d, f, gomod, d)
					}
				}
			}
			return nil
		}
	}
	return fmt.Errorf("%s: the first stage runs no go mod download", path)
}
