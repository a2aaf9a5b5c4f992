package fsm

import (
	"errors"
	"reflect"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func createNSMax(name string, max int64) *fsmv1.Command {
	c := createNS(name)
	c.GetCreateNamespace().MaxNamespaces = max
	return c
}

// TestNamespaceLimit: a create stamped with a limit is refused, changing
// nothing, when as many namespaces exist (deletes and creates earlier in
// the same call counted); the verdict depends only on the log, not on how
// it is cut into ApplyBatch calls; 0 means no limit.
func TestNamespaceLimit(t *testing.T) {
	log := []*fsmv1.Command{
		createNSMax("a", 2),
		createNSMax("b", 2),
		createNSMax("c", 2), // refused: a and b exist
		deleteNS("a"),
		createNSMax("c", 2), // a is gone
		createNSMax("d", 2), // refused
		deleteNS("b"),
		createNSMax("b", 2), // b again, in the place it left
		createNSMax("e", 0), // no limit
	}
	refused := map[int]string{2: "c", 5: "d"}
	entries := commandEntries(t, 1, log...)

	whole := openTestStore(t, nil)
	got := whole.ApplyBatch(entries)
	for i, r := range got {
		name, isRefused := refused[i]
		var le *NamespaceLimitError
		switch {
		case isRefused && (!errors.As(r.(error), &le) || le.Name != name || le.Limit != 2 || !errors.Is(r.(error), ErrNamespaceLimit)):
			t.Fatalf("entry %d: %v, want the limit of 2 refusing %q", i, r, name)
		case !isRefused:
			if _, ok := memberOK[*fsmv1.CreateNamespaceResult](r); !ok {
				if _, ok := memberOK[*fsmv1.DeleteNamespaceResult](r); !ok {
					t.Fatalf("entry %d: %v", i, r)
				}
			}
		}
	}
	var names []string
	for _, ns := range whole.Namespaces() {
		names = append(names, ns.Name)
	}
	if !reflect.DeepEqual(names, []string{"b", "c", "e"}) {
		t.Fatalf("namespaces %v, want [b c e]", names)
	}

	oneByOne := openTestStore(t, nil)
	var got1 []any
	for i := range entries {
		got1 = append(got1, oneByOne.ApplyBatch(entries[i:i+1])...)
	}
	for i := range got {
		if len(got) != len(got1) || !sameAnswer(got[i], got1[i]) {
			t.Fatalf("one call and one call per entry disagree:\n%s\n%s", describe(got), describe(got1))
		}
	}
	if contentHash(t, whole) != contentHash(t, oneByOne) {
		t.Fatal("stored state depends on how the log was cut")
	}
}
