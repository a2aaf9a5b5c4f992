package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkRules parses a Prometheus rule file as Prometheus loads it: the
// YAML strictly (an unknown field fails), every expression through the
// PromQL parser, every template through Go's. It returns the rules.
func checkRules(path string) (int, error) {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, parser.NewParser(parser.Options{}),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && r.Annotations["summary"] == "" {
				return 0, fmt.Errorf("%s: alert %s has no summary annotation", path, r.Alert)
			}
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no rules", path)
	}
	return n, nil
}
