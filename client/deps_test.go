package client

import (
	"os/exec"
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

// TestClientDependencies fails when a package outside clientDeps (Raft,
// Pebble, memberlist, Prometheus, the OpenTelemetry SDK, gRPC, or any
// server package of this module) enters what an application importing
// the client compiles, naming the package and who imports it.
func TestClientDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the client's dependencies")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{join .Imports \",\"}}{{end}}", ".").Output()
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
