package rpc

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureMap keeps docs/architecture.md's package map (the
// table of its section 1) true to the tree: every package of the root
// module one or two folders deep (node, node/delivery, internal/durable)
// has a row of its own, but for generated code (a folder named like
// fsmv1); every deeper package (cmd/skald/internal/cli) lies under a row;
// and every folder a row names exists.
func TestArchitectureMap(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root := filepath.Join("..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutRows(t, string(doc))
	for _, r := range rows {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r))); err != nil {
			t.Errorf("docs/architecture.md maps %q, which is not in the tree: %v", r, err)
		}
	}
	cmd := exec.Command(goBin, "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	generated := regexp.MustCompile(`v[0-9]+($|/)`)
	const mod = "github.com/skalddb/skald"
	for _, pkg := range strings.Fields(string(out)) {
		dir := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		if dir == "" {
			continue
		}
		own := strings.Count(dir, "/") < 2 && !generated.MatchString(dir)
		if own && !mapped(rows, dir, true) {
			t.Errorf("package %s has no row in docs/architecture.md's package map", dir)
		} else if !own && !mapped(rows, dir, false) {
			t.Errorf("package %s lies under no row of docs/architecture.md's package map", dir)
		}
	}
}

// layoutRows returns the folders that the package map's rows name (the
// backquoted names of each row's first cell, without a trailing '/').
func layoutRows(t *testing.T, doc string) []string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## 1. Layout")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## 1. Layout" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	name := regexp.MustCompile("`([^`]+)`")
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			rows = append(rows, strings.TrimSuffix(m[1], "/"))
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md's package map has no rows")
	}
	return rows
}

// mapped reports whether dir has a row (exact) or lies under one.
func mapped(rows []string, dir string, exact bool) bool {
	for _, r := range rows {
		if r == dir || !exact && strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}
