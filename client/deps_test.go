package client

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// clientDeps are the only import paths outside the standard library the
// client's non-test packages may reach (issue 32 item 7: an application
// that imports the client must not pull the server's graph). A prefix
// ending in "/" admits the packages under it; any other is one package
// or module root and what is under it.
var clientDeps = []string{
	"connectrpc.com/connect",
	"google.golang.org/protobuf/",
	"google.golang.org/genproto/googleapis/rpc/errdetails",
	"github.com/google/uuid",
	"github.com/skalddb/skald/client",
	"github.com/skalddb/skald/api/", // the generated API (its own module)
	// The OpenTelemetry API, to send a caller's traceparent: never the
	// SDK or an exporter.
	"go.opentelemetry.io/otel/attribute",
	"go.opentelemetry.io/otel/codes",
	"go.opentelemetry.io/otel/semconv/",
	"go.opentelemetry.io/otel/trace",
	"github.com/cespare/xxhash/v2", // of otel/attribute
}

// clientModules are the modules that hold clientDeps' packages: the only
// ones the client module's go.mod (its code and its tests) may require.
var clientModules = []string{
	"connectrpc.com/connect",
	"google.golang.org/protobuf",
	"google.golang.org/genproto/googleapis/rpc",
	"github.com/google/uuid",
	"github.com/skalddb/skald/api",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/otel/trace",
	"github.com/cespare/xxhash/v2",
}

// TestClientDependencies fails when a package outside clientDeps (Raft,
// Pebble, memberlist, Prometheus, the OpenTelemetry SDK, gRPC, or any
// server package) enters what an application importing the client
// compiles, naming the package and who imports it; and when the client
// module's graph holds a module that none of clientModules' own go.mod
// files brought in, as a test's dependency on the server module would.
// It runs in the client module (client/go.mod), where go test runs it.
func TestClientDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the client's dependencies")
	}
	t.Run("packages", func(t *testing.T) { checkPackages(t, gobin) })
	t.Run("modules", func(t *testing.T) { checkModules(t, gobin) })
}

// checkPackages checks go list -deps of the client's packages (not its
// tests): what an application that imports the client compiles.
func checkPackages(t *testing.T, gobin string) {
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{join .Imports \",\"}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	importers := map[string][]string{}
	var pkgs []string
	for line := range strings.Lines(string(out)) {
		path, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		if path == "" {
			continue
		}
		pkgs = append(pkgs, path)
		for _, imp := range strings.Split(imports, ",") {
			importers[imp] = append(importers[imp], path)
		}
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %v: not the client's graph", pkgs)
	}
	bad := 0
	for _, p := range pkgs {
		if !allowedDep(p) {
			bad++
			t.Errorf("the client depends on %s (imported by %v)", p, importers[p])
		}
	}
	if bad > 0 {
		t.Logf("only these may enter an application's build through the client: %v", clientDeps)
	}
}

func allowedDep(path string) bool {
	if strings.HasPrefix(path, "vendor/") { // the standard library's own
		return true
	}
	for _, a := range clientDeps {
		if strings.HasSuffix(a, "/") && strings.HasPrefix(path, a) ||
			path == a || strings.HasPrefix(path, a+"/") {
			return true
		}
	}
	return false
}

// checkModules checks the client module's graph, tests included (go list
// -m all): the client module may require only clientModules, and any
// other module must come from the go.mod of one of them or of a module
// they brought in (otel's test dependencies, say: listed, never
// compiled into an application, as checkPackages shows).
func checkModules(t *testing.T, gobin string) {
	out, err := exec.Command(gobin, "list", "-m", "-f", "{{.Path}}", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	mods := strings.Fields(string(out))
	if len(mods) < 2 || mods[0] != "github.com/skalddb/skald/client" {
		t.Fatalf("go list -m all = %v: not the client module's graph (run in client/, its own module)", mods)
	}
	main := mods[0]
	graph, err := exec.Command(gobin, "mod", "graph").Output()
	if err != nil {
		t.Fatalf("go mod graph: %v", err)
	}
	requiredBy := map[string][]string{} // module path -> paths requiring it
	for line := range strings.Lines(string(graph)) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		from, _, _ = strings.Cut(from, "@")
		to, _, _ = strings.Cut(to, "@")
		requiredBy[to] = append(requiredBy[to], from)
	}
	// Admitted: clientModules, then whatever only admitted modules
	// require, until nothing changes.
	admitted := map[string]bool{}
	for _, m := range clientModules {
		admitted[m] = true
	}
	for changed := true; changed; {
		changed = false
		for _, m := range mods[1:] {
			if admitted[m] {
				continue
			}
			ok := len(requiredBy[m]) > 0
			for _, from := range requiredBy[m] {
				if from == main || !admitted[from] {
					ok = false
				}
			}
			if ok {
				admitted[m], changed = true, true
			}
		}
	}
	var others []string // not admitted, brought in by another of them
	for _, m := range mods[1:] {
		switch {
		case admitted[m]:
		case slices.Contains(requiredBy[m], main):
			t.Errorf("the client module requires %s (its code or its tests)", m)
		default:
			others = append(others, m)
		}
	}
	if len(others) > 0 {
		t.Errorf("and %d modules those bring in, the first %v", len(others), others[:min(len(others), 5)])
	}
	if t.Failed() {
		t.Logf("the client module may require only %v", clientModules)
	}
}
