package fsm

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestKindsCoverCommand fails when a field of the Command oneof has no row
// in kinds (a new kind must state its facts), when a row names its field
// wrongly, or answers with a field the Result oneof lacks.
func TestKindsCoverCommand(t *testing.T) {
	oneof := (&fsmv1.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	results := (&fsmv1.Result{}).ProtoReflect().Descriptor().Oneofs().ByName("result")
	if oneof == nil || results == nil {
		t.Fatal("Command has no oneof kind, or Result no oneof result")
	}
	fields := oneof.Fields()
	seen := make(map[reflect.Type]bool)
	for i := range fields.Len() {
		fd := fields.Get(i)
		cmd := &fsmv1.Command{}
		m := cmd.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		seen[reflect.TypeOf(cmd.Kind)] = true
		k, ok := KindOf(cmd)
		if !ok {
			t.Errorf("Command.%s (field %d) has no row in kinds (fsm/kinds.go)", fd.Name(), fd.Number())
			continue
		}
		if k.Name != fd.Name() {
			t.Errorf("Command.%s: row named %q", fd.Name(), k.Name)
		}
		r := results.Fields().ByName(k.Result.Name)
		if r == nil {
			t.Errorf("Command.%s: answered by Result.%s, which Result's oneof lacks", fd.Name(), k.Result.Name)
			continue
		}
		// The typed setter and test name the field the row names.
		res := &fsmv1.Result{}
		rm := res.ProtoReflect()
		var v any = true
		if r.Message() != nil {
			v = rm.NewField(r).Message().Interface()
		}
		if !k.Result.set(res, v) {
			t.Errorf("Command.%s: Result.%s does not take a %T", fd.Name(), k.Result.Name, v)
		} else if got := rm.WhichOneof(results); got == nil || got.Name() != k.Result.Name || !k.Answered(res) {
			t.Errorf("Command.%s: setting Result.%s set %v (answered %v)", fd.Name(), k.Result.Name, got, k.Answered(res))
		}
		if k.Answered(&fsmv1.Result{}) || k.Result.set(&fsmv1.Result{}, &fsmv1.Rejection{}) {
			t.Errorf("Command.%s: an empty Result answers it, or Result.%s takes a Rejection", fd.Name(), k.Result.Name)
		}
		if k.apply == nil {
			t.Errorf("Command.%s: no apply function", fd.Name())
		}
	}
	for typ := range kinds {
		if !seen[typ] {
			t.Errorf("kinds has a row for %v, which is not a field of the Command oneof", typ)
		}
	}
}

// TestKindStamp checks the leader's stamps: times only where unset (the
// expiry's always), ids only for messages without one.
func TestKindStamp(t *testing.T) {
	const now = int64(1_700_000_000_000_000_000)
	id := func() string { return "new-id" }
	cases := []struct {
		name string
		cmd  *fsmv1.Command
		got  func(*fsmv1.Command) []any
		want []any
	}{
		{"append", &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{Messages: []*fsmv1.NewMessage{{Id: "given"}, {}}}}},
			func(c *fsmv1.Command) []any {
				a := c.GetAppend()
				return []any{a.TimeUnixNano, a.Messages[0].Id, a.Messages[1].Id}
			}, []any{now, "given", "new-id"}},
		{"append keeps a time", &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{TimeUnixNano: 5}}},
			func(c *fsmv1.Command) []any { return []any{c.GetAppend().TimeUnixNano} }, []any{int64(5)}},
		{"append_multi", &fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: &fsmv1.AppendMulti{Streams: []*fsmv1.StreamAppend{{Messages: []*fsmv1.NewMessage{{}}}}}}},
			func(c *fsmv1.Command) []any {
				a := c.GetAppendMulti()
				return []any{a.TimeUnixNano, a.Streams[0].Messages[0].Id}
			}, []any{now, "new-id"}},
		{"create_namespace", &fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespace{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetCreateNamespace().CreatedUnixNano} }, []any{now}},
		{"delete_namespace", &fsmv1.Command{Kind: &fsmv1.Command_DeleteNamespace{DeleteNamespace: &fsmv1.DeleteNamespace{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetDeleteNamespace().DeletedUnixNano} }, []any{now}},
		{"create_group", &fsmv1.Command{Kind: &fsmv1.Command_CreateGroup{CreateGroup: &fsmv1.CreateGroup{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetCreateGroup().CreatedUnixNano} }, []any{now}},
		{"expire_messages always now", &fsmv1.Command{Kind: &fsmv1.Command_ExpireMessages{ExpireMessages: &fsmv1.ExpireMessages{TimeUnixNano: 5}}},
			func(c *fsmv1.Command) []any { return []any{c.GetExpireMessages().TimeUnixNano} }, []any{now}},
		{"create_credential", &fsmv1.Command{Kind: &fsmv1.Command_CreateCredential{CreateCredential: &fsmv1.CreateCredential{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetCreateCredential().CreatedUnixNano} }, []any{now}},
		{"revoke_credential", &fsmv1.Command{Kind: &fsmv1.Command_RevokeCredential{RevokeCredential: &fsmv1.RevokeCredential{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetRevokeCredential().RevokedUnixNano} }, []any{now}},
		{"create_index", &fsmv1.Command{Kind: &fsmv1.Command_CreateIndex{CreateIndex: &fsmv1.CreateIndex{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetCreateIndex().TimeUnixNano} }, []any{now}},
		{"rebuild_index", &fsmv1.Command{Kind: &fsmv1.Command_RebuildIndex{RebuildIndex: &fsmv1.RebuildIndex{}}},
			func(c *fsmv1.Command) []any { return []any{c.GetRebuildIndex().TimeUnixNano} }, []any{now}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := KindOf(tc.cmd)
			if !ok || k.Stamp == nil {
				t.Fatalf("no stamp for %T", tc.cmd.Kind)
			}
			k.Stamp(tc.cmd, now, id)
			if got := tc.got(tc.cmd); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("stamped %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKindMayGrow: a row's GrowsWhen decides in place of its Grows.
func TestKindMayGrow(t *testing.T) {
	cmd := &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{Stream: "grow"}}}
	cases := []struct {
		name string
		k    Kind
		want bool
	}{
		{"grows", Kind{Grows: true}, true},
		{"does not grow", Kind{}, false},
		{"decided by the command", Kind{Grows: false, GrowsWhen: func(c *fsmv1.Command) bool { return c.GetAppend().Stream == "grow" }}, true},
		{"decided by the command, against Grows", Kind{Grows: true, GrowsWhen: func(*fsmv1.Command) bool { return false }}, false},
	}
	for _, tc := range cases {
		if got := tc.k.MayGrow(cmd); got != tc.want {
			t.Errorf("%s: MayGrow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkKindAnswer is what putting an append's result in its Result
// costs per entry (the wrapper and the Result, set through the row's
// Answer), beside the same written out by hand.
func BenchmarkKindAnswer(b *testing.B) {
	k, _ := KindOf(&fsmv1.Command{Kind: &fsmv1.Command_Append{}})
	for _, bc := range []struct {
		name   string
		answer func(index uint64, m *fsmv1.AppendResult) any
	}{
		{"row", func(index uint64, m *fsmv1.AppendResult) any { return k.answer(index, m) }},
		{"by-hand", func(index uint64, m *fsmv1.AppendResult) any {
			return &fsmv1.Result{Index: index, Result: &fsmv1.Result_Append{Append: m}}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if bc.answer(uint64(i), &fsmv1.AppendResult{Namespace: "ns", Stream: "s-1", FirstPosition: 1, LastPosition: 1}) == nil {
					b.Fatal("no answer")
				}
			}
		})
	}
}
