package node

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestRefusedWhenFullByKind: the disk-space alarm lets through exactly
// the kinds that free space or must always go (fsm.Kind.MayGrow, which
// applyKind reads), and refuses every other kind of the Command oneof.
func TestRefusedWhenFullByKind(t *testing.T) {
	let := map[protoreflect.Name]bool{
		"delete_namespace": true, "set_node_info": true, "delete_stream": true, "truncate_stream": true,
		"delete_by_watermark": true, "set_retention_policy": true, "expire_messages": true,
		"revoke_credential": true, "delete_index": true,
	}
	fields := (&fsmv1.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		cmd := &fsmv1.Command{}
		m := cmd.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		if got, want := refusedWhenFull(cmd), !let[fd.Name()]; got != want {
			t.Errorf("%s: refused when full %v, want %v", fd.Name(), got, want)
		}
	}
	// set_index_state above resumes (refused); pausing stops growth.
	if refusedWhenFull(&fsmv1.Command{Kind: &fsmv1.Command_SetIndexState{SetIndexState: &fsmv1.SetIndexState{Paused: true}}}) {
		t.Error("pausing an index is refused when full")
	}
	if _, ok := fsm.KindOf(&fsmv1.Command{}); ok {
		t.Error("an empty command has a kind: applyKind would propose it")
	}
}

// refusedWhenFull is what applyKind asks of the alarm for cmd.
func refusedWhenFull(cmd *fsmv1.Command) bool {
	k, ok := fsm.KindOf(cmd)
	return !ok || k.MayGrow(cmd)
}
