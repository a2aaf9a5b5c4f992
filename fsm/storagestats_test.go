package fsm

import (
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// StorageStats counts the open namespaces and what their databases hold,
// and leaves every reference it took: a deleted namespace still closes.
func TestStorageStats(t *testing.T) {
	s := openTestStore(t, nil)
	if st := s.StorageStats(); st.OpenNamespaces != 0 || st.DiskBytes != 0 {
		t.Fatalf("empty store: %+v", st)
	}
	cmds := []*fsmv1.Command{createNS("a"), createNS("b")}
	for range 50 {
		cmds = append(cmds, appendCmd("a", "s-1", newMsg("T", `{"x":1}`)))
	}
	s.ApplyBatch(commandEntries(t, 1, cmds...))
	st := s.StorageStats()
	if st.OpenNamespaces != 2 || st.DiskBytes == 0 {
		t.Fatalf("two namespaces open, one written: %+v", st)
	}
	s.ApplyBatch(commandEntries(t, uint64(len(cmds)+1), &fsmv1.Command{Kind: &fsmv1.Command_DeleteNamespace{DeleteNamespace: &fsmv1.DeleteNamespace{Name: "b"}}}))
	if st := s.StorageStats(); st.OpenNamespaces != 1 {
		t.Fatalf("after deleting b: %+v (a reference StorageStats took kept it open?)", st)
	}
}
