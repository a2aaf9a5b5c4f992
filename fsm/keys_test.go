package fsm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every key and prefix of the databases is declared in keys.go, no two
// share bytes, and none is a prefix of another: a new prefix that starts
// another's keys would make a range read or deletion of one take the
// other's keys too. The test reads the package's source, so a prefix
// declared anywhere else fails it.
func TestKeyPrefixesDoNotCollide(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	type decl struct{ name, file, value string }
	var keys []decl
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) || !(strings.HasPrefix(name.Name, "prefix") || strings.HasPrefix(name.Name, "key")) {
					continue
				}
				call, ok := vs.Values[i].(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					continue
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, decl{name.Name, f, v})
			}
			return true
		})
	}
	if len(keys) < 20 {
		t.Fatalf("found only %d key declarations: the test no longer sees them", len(keys))
	}
	for i, a := range keys {
		if a.file != "keys.go" {
			t.Errorf("%s (%q) is declared in %s, not keys.go", a.name, a.value, a.file)
		}
		for _, b := range keys[i+1:] {
			if strings.HasPrefix(a.value, b.value) || strings.HasPrefix(b.value, a.value) {
				t.Errorf("%s %q and %s %q collide: one is a prefix of the other", a.name, a.value, b.name, b.value)
			}
		}
	}
}
