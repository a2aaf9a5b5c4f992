package rpc

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsRunDownward keeps the layering: the API layer (rpc and
// the protocols beside it, rpc/kurrentdb) builds without Raft (it speaks
// node/nodeapi, not node), nothing below it imports it back, the
// EventoDB wire contract (rpc/evdb) sits below rpc and reaches neither
// rpc nor the node, the group delivery engine (node/delivery) sits
// between node and fsm and reaches Raft and Pebble only through them, the
// cluster port (node/transport) imports none of node, fsm, rpc and
// membership, and internal/ (the ground floor) imports nothing of ours
// outside it. Test files are not counted: rpc's tests start real nodes.
func TestImportsRunDownward(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	const mod = "github.com/skalddb/skald/"
	for _, c := range []struct {
		pkgs   []string
		denied func(dep string) bool
	}{
		{[]string{mod + "rpc", mod + "rpc/kurrentdb", mod + "rpc/evdb", mod + "fsm", mod + "node/nodeapi",
			mod + "node/delivery"}, func(dep string) bool {
			return strings.HasPrefix(dep, "github.com/hashicorp/raft") // raft, raft-wal, raft-boltdb, raft-autopilot
		}},
		// rpc/kurrentdb, a sibling protocol, reaches the node only through
		// rpc (rpc.Local) and nodeapi.
		{[]string{mod + "rpc", mod + "rpc/kurrentdb"}, func(dep string) bool {
			return dep == mod+"node" || dep == mod+"node/delivery" || dep == mod+"membership"
		}},
		// The EventoDB wire contract sits below rpc, which mounts it: it
		// never imports rpc back, nor the node by any road.
		{[]string{mod + "rpc/evdb"}, func(dep string) bool {
			return dep == mod+"rpc" || strings.HasPrefix(dep, mod+"node") || dep == mod+"membership"
		}},
		{[]string{mod + "node/delivery"}, func(dep string) bool {
			return dep == mod+"node" || strings.HasPrefix(dep, mod+"node/peerv1") || dep == mod+"membership"
		}},
		{[]string{mod + "fsm", mod + "node", mod + "node/delivery"}, func(dep string) bool {
			return strings.HasPrefix(dep, mod+"rpc") || dep == mod+"membership"
		}},
		// The cluster port knows nothing of what its connections carry
		// beyond Raft's RPCs: none of node (nor its other packages), fsm,
		// rpc or membership.
		{[]string{mod + "node/transport"}, func(dep string) bool {
			for _, p := range []string{"node", "fsm", "rpc", "membership"} {
				if dep == mod+p || strings.HasPrefix(dep, mod+p+"/") && dep != mod+"node/transport" {
					return true
				}
			}
			return false
		}},
		// The ground floor: internal/ imports nothing of ours above it
		// (a harness that needs node or rpc lives under tests/).
		{[]string{mod + "internal/..."}, func(dep string) bool {
			return strings.HasPrefix(dep, mod) && !strings.HasPrefix(dep, mod+"internal/")
		}},
	} {
		out, err := exec.Command(goBin, append([]string{"list", "-deps"}, c.pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", c.pkgs, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if c.denied(dep) {
				t.Errorf("%v import %s", c.pkgs, dep)
			}
		}
	}
	// Direct imports only: the delivery engine reads committed state
	// through fsm's views and proposes through its node, so it never
	// opens Pebble itself.
	out, err := exec.Command(goBin, "list", "-f", `{{join .Imports "\n"}}`, mod+"node/delivery").Output()
	if err != nil {
		t.Fatalf("go list -f .Imports node/delivery: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") {
			t.Errorf("node/delivery imports %s", imp)
		}
	}
}
