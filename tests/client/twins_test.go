package client_test

import (
	"bytes"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"testing"
)

// TestExamplesHaveTwins: each example of the client package is compiled
// there (go doc shows it) but not run, for it needs a cluster; its twin
// here has the same body and checks its output against the test cluster
// (TestMain). An example changed without its twin, an example without a
// twin or the reverse, an example that would run there and a twin that
// would not run here all fail.
func TestExamplesHaveTwins(t *testing.T) {
	theirs := examples(t, "../../client/example_test.go")
	ours := examples(t, "example_test.go")
	if len(theirs) == 0 {
		t.Fatal("no example in client/example_test.go")
	}
	for name, ex := range theirs {
		if ex.Output != "" || ex.EmptyOutput {
			t.Errorf("client's Example%s has an Output comment: go test would run it without a cluster", name)
		}
		twin, ok := ours[name]
		switch {
		case !ok:
			t.Errorf("client's Example%s has no twin in tests/client/example_test.go", name)
		case twin.Output == "":
			t.Errorf("the twin of Example%s has no Output comment: it would not run", name)
		case code(t, twin.Code) != code(t, ex.Code):
			t.Errorf("the twin of Example%s differs from the example:\n--- client\n%s\n--- tests/client\n%s", name, code(t, ex.Code), code(t, twin.Code))
		}
	}
	for name := range ours {
		if _, ok := theirs[name]; !ok {
			t.Errorf("Example%s in tests/client has no example in client/example_test.go", name)
		}
	}
}

func examples(t *testing.T, path string) map[string]*doc.Example {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*doc.Example{}
	for _, ex := range doc.Examples(f) {
		out[ex.Name] = ex
	}
	return out
}

// code prints an example's body without its comments.
func code(t *testing.T, n ast.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := printer.Fprint(&b, token.NewFileSet(), n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
