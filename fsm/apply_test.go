package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func TestAppendAssignsPositions(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	res := f.apply(
		appendCmd("app", "account-1", newMsg("Opened", `{"a":1}`), newMsg("Deposited", `{"n":5}`)),
		appendCmd("app", "account-2", newMsg("Opened", `{}`)),
		appendCmd("app", "account-1", newMsg("Withdrawn", `{"n":2}`)),
	)
	want := []*fsmv1.Result{
		{Index: 2, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "app", Stream: "account-1", FirstPosition: 0, LastPosition: 1, FirstGlobalPosition: 1, LastGlobalPosition: 2}}},
		{Index: 3, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "app", Stream: "account-2", FirstPosition: 0, LastPosition: 0, FirstGlobalPosition: 3, LastGlobalPosition: 3}}},
		{Index: 4, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "app", Stream: "account-1", FirstPosition: 2, LastPosition: 2, FirstGlobalPosition: 4, LastGlobalPosition: 4}}},
	}
	for i, w := range want {
		if !sameAnswer(res[i], w) {
			t.Errorf("result %d = %#v, want %#v", i, res[i], w)
		}
	}
	msgs := streamOf(t, s, "app", "account-1")
	pos, gps := positions(msgs)
	if !reflect.DeepEqual(pos, []int64{0, 1, 2}) || !reflect.DeepEqual(gps, []int64{1, 2, 4}) {
		t.Fatalf("account-1 positions %v global %v", pos, gps)
	}
	if msgs[1].Type != "Deposited" || string(msgs[1].Data) != `{"n":5}` || msgs[1].Metadata != nil || msgs[1].Time != testTime || msgs[1].Stream != "account-1" {
		t.Fatalf("message 1 = %+v", msgs[1])
	}
	if s.AppliedIndex() != 4 {
		t.Fatalf("applied index %d, want 4", s.AppliedIndex())
	}
}

func TestExpectedVersion(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	// Checked entry by entry inside one batch: the second entry sees the first.
	res := f.apply(
		appendExpect("app", "s-1", -1, newMsg("A", `{}`)),
		appendExpect("app", "s-1", -1, newMsg("B", `{}`)),
		appendExpect("app", "s-1", 0, newMsg("C", `{}`)),
		appendExpect("app", "s-1", 5, newMsg("D", `{}`)),
	)
	if _, ok := memberOK[*fsmv1.AppendResult](res[0]); !ok {
		t.Fatalf("first append: %v", res[0])
	}
	var vc *VersionConflictError
	if !errors.As(res[1].(error), &vc) || vc.Expected != -1 || vc.Actual != 0 || vc.Stream != "s-1" {
		t.Fatalf("second append: %v", res[1])
	}
	if r, ok := memberOK[*fsmv1.AppendResult](res[2]); !ok || r.FirstPosition != 1 {
		t.Fatalf("third append: %v", res[2])
	}
	if !errors.As(res[3].(error), &vc) || vc.Actual != 1 {
		t.Fatalf("fourth append: %v", res[3])
	}
	msgs := streamOf(t, s, "app", "s-1")
	if len(msgs) != 2 || msgs[0].Type != "A" || msgs[1].Type != "C" {
		t.Fatalf("stream holds %+v", msgs)
	}
	// A rejected append consumed no global position.
	if msgs[1].GlobalPosition != 2 {
		t.Fatalf("global position %d after a conflict, want 2", msgs[1].GlobalPosition)
	}
}

func TestApplyRejectsBadInput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxStreamName+1)
	many := make([]*fsmv1.NewMessage, MaxAppendMessages+1)
	for i := range many {
		many[i] = newMsg("T", `{}`)
	}
	noID := newMsg("T", `{}`)
	noID.Id = ""
	minus2 := int64(-2)
	cases := []struct {
		name  string
		cmd   *fsmv1.Command
		field string
	}{
		{"empty stream", appendCmd("app", "", newMsg("T", `{}`)), "stream"},
		{"long stream", appendCmd("app", long, newMsg("T", `{}`)), "stream"},
		{"NUL in stream", appendCmd("app", "a\x00b", newMsg("T", `{}`)), "stream"},
		{"no messages", appendCmd("app", "s-1"), "messages"},
		{"too many messages", appendCmd("app", "s-1", many...), "messages"},
		{"empty type", appendCmd("app", "s-1", newMsg("", `{}`)), "messages[0].type"},
		{"NUL in type", appendCmd("app", "s-1", newMsg("a\x00", `{}`)), "messages[0].type"},
		{"array data", appendCmd("app", "s-1", newMsg("T", `{}`), newMsg("T", `[1]`)), "messages[1].data"},
		{"invalid JSON data", appendCmd("app", "s-1", newMsg("T", `{"a":`)), "messages[0].data"},
		{"empty data", appendCmd("app", "s-1", newMsg("T", ``)), "messages[0].data"},
		{"string metadata", appendCmd("app", "s-1", withMeta(newMsg("T", `{}`), `"x"`)), "messages[0].metadata"},
		{"missing id", appendCmd("app", "s-1", noID), "messages[0].id"},
		{"expected version -2", func() *fsmv1.Command {
			c := appendCmd("app", "s-1", newMsg("T", `{}`))
			c.GetAppend().ExpectedVersion = &minus2
			return c
		}(), "expected_version"},
		{"bad namespace name", createNS("a/b"), "name"},
		{"empty namespace name", createNS(""), "name"},
		{"empty node id", nodeInfo("", "127.0.0.1:1"), "node_id"},
	}
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	before := contentHash(t, s)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := f.apply(c.cmd)[0]
			var ve *ValidationError
			if err, _ := res.(error); !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("result %v, want a validation error on %q", res, c.field)
			}
		})
	}
	if after := contentHash(t, s); after != before {
		t.Fatal("rejected commands changed the stored state")
	}
}

func TestValidateNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
	}{
		{"account-1", nil},
		{"a\xffb", &ValidationError{Field: "stream", Reason: "must be valid UTF-8"}},
		{"", &ValidationError{Field: "stream", Reason: "must not be empty"}},
		{strings.Repeat("é", 256), nil}, // 512 bytes
	}
	for _, c := range cases {
		err := ValidateStreamName("stream", c.name)
		if !reflect.DeepEqual(err, c.err) {
			t.Errorf("ValidateStreamName(%q) = %v, want %v", c.name, err, c.err)
		}
	}
	for name, ok := range map[string]bool{"default": true, "test-write-001_x.y": true, "a b": false, "ü": false, strings.Repeat("a", 129): false} {
		if err := ValidateNamespaceName(name); (err == nil) != ok {
			t.Errorf("ValidateNamespaceName(%q) = %v", name, err)
		}
	}
}

func TestMetadataNullIsStoredAsNull(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "s-1", withMeta(newMsg("T", `{}`), ` null `), withMeta(newMsg("T", `{}`), `{"k":"v"}`)))
	msgs := streamOf(t, s, "app", "s-1")
	if msgs[0].Metadata != nil || string(msgs[1].Metadata) != `{"k":"v"}` {
		t.Fatalf("metadata %q, %q", msgs[0].Metadata, msgs[1].Metadata)
	}
}

func TestBadCommandAndConfiguration(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	res := s.ApplyBatch([]Entry{
		{Index: 1, Term: 1, Data: []byte{0xff, 0xff, 0xff}},
		{Index: 2, Term: 1, Kind: EntryConfiguration, Data: []byte("config-bytes")},
		{Index: 3, Term: 2, Data: nil},
	})
	if err, _ := res[0].(error); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("garbage entry: %v", res[0])
	}
	if res[1] != nil {
		t.Fatalf("configuration entry result %v", res[1])
	}
	if err, _ := res[2].(error); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("empty command: %v", res[2])
	}
	s.applyMu.Lock()
	cfg := s.config
	s.applyMu.Unlock()
	if cfg.index != 2 || string(cfg.data) != "config-bytes" {
		t.Fatalf("configuration %d %q", cfg.index, cfg.data)
	}
	if s.AppliedIndex() != 3 {
		t.Fatalf("applied %d", s.AppliedIndex())
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	if r := f.apply(createNS("app"), createNS("app"))[1]; r != ErrNamespaceExists {
		t.Fatalf("second create: %v", r)
	}
	if r := f.apply(appendCmd("nope", "s-1", newMsg("T", `{}`)))[0]; r != ErrNamespaceNotFound {
		t.Fatalf("append to unknown namespace: %v", r)
	}
	f.must(appendCmd("app", "s-1", newMsg("T", `{}`), newMsg("T", `{}`)))
	info, ok := s.Namespace("app")
	if !ok || info.ID != 1 || info.Description != "ns app" || info.CreatedAt != testTime || len(info.TokenHash) != 32 {
		t.Fatalf("namespace info %+v %v", info, ok)
	}
	oldDir := s.fs.PathJoin(s.opts.Dir, "ns", dirName(info.ID))

	// Delete, then re-create the name and append, all in one batch: the new
	// namespace starts empty, in a new directory.
	res := f.apply(deleteNS("app"), appendCmd("app", "s-1", newMsg("T", `{}`)), createNS("app"), appendCmd("app", "s-1", newMsg("T", `{}`)))
	if d, ok := memberOK[*fsmv1.DeleteNamespaceResult](res[0]); !ok || d.MessagesDeleted != 2 {
		t.Fatalf("delete: %v", res[0])
	}
	if res[1] != ErrNamespaceNotFound {
		t.Fatalf("append after delete: %v", res[1])
	}
	if a, ok := memberOK[*fsmv1.AppendResult](res[3]); !ok || a.FirstPosition != 0 || a.FirstGlobalPosition != 1 {
		t.Fatalf("append after re-create: %v", res[3])
	}
	if _, err := s.fs.Stat(oldDir); err == nil {
		t.Fatalf("directory %s of the deleted namespace still exists", oldDir)
	}
	if got := streamOf(t, s, "app", "s-1"); len(got) != 1 {
		t.Fatalf("re-created namespace holds %d messages", len(got))
	}
	if r := f.apply(deleteNS("app"), deleteNS("app"))[1]; r != ErrNamespaceNotFound {
		t.Fatalf("second delete: %v", r)
	}
	if _, err := s.View("app"); err != ErrNamespaceNotFound {
		t.Fatalf("view of deleted namespace: %v", err)
	}
	if n := len(s.Namespaces()); n != 0 {
		t.Fatalf("%d namespaces left", n)
	}
}

func TestDeleteWhileViewOpen(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "s-1", newMsg("T", `{}`)))
	v, err := s.View("app")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Namespace("app")
	f.must(deleteNS("app"))
	// The open view still reads its snapshot; the directory goes when it closes.
	if msgs, err := v.ReadStream(StreamQuery{Stream: "s-1"}); err != nil || len(msgs) != 1 {
		t.Fatalf("read through open view: %v %v", msgs, err)
	}
	dir := s.fs.PathJoin(s.opts.Dir, "ns", dirName(info.ID))
	if _, err := s.fs.Stat(dir); err != nil {
		t.Fatalf("directory removed under an open view: %v", err)
	}
	v.Close()
	if _, err := s.fs.Stat(dir); err == nil {
		t.Fatal("directory kept after the last view closed")
	}
}

func TestNodeInfo(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(nodeInfo("n1", "127.0.0.1:8080"))
	f.must(nodeInfo("n2", "127.0.0.1:8090"))
	f.must(nodeInfo("n1", "127.0.0.1:9999"))
	f.must(nodeInfo("n2", ""))
	if addr, ok := s.NodeAddr("n1"); !ok || addr != "127.0.0.1:9999" {
		t.Fatalf("n1 = %q %v", addr, ok)
	}
	if _, ok := s.NodeAddr("n2"); ok {
		t.Fatal("n2 still registered")
	}
	if got := s.Nodes(); len(got) != 1 {
		t.Fatalf("nodes %v", got)
	}
}

// A member's recorded version is what it last reported, lower or higher;
// an entry without one (an address update, an older proposer) keeps it;
// removing the member removes it; and it survives a restart.
func TestNodeVersion(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	withVersion := func(id, addr string, v uint32) *fsmv1.Command {
		c := nodeInfo(id, addr)
		c.GetSetNodeInfo().StateMachineVersion = v
		return c
	}
	f.must(nodeInfo("n0", "127.0.0.1:8070"))
	f.must(withVersion("n1", "127.0.0.1:8080", 2))
	f.must(withVersion("n2", "127.0.0.1:8090", 2))
	f.must(withVersion("n3", "127.0.0.1:8100", 3))
	f.must(withVersion("n3", "127.0.0.1:8100", 1))
	f.must(nodeInfo("n1", "127.0.0.1:9999"))
	f.must(nodeInfo("n2", ""))
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			id   string
			want uint32
			ok   bool
		}{{"n0", 0, false}, {"n1", 2, true}, {"n2", 0, false}, {"n3", 1, true}} {
			if v, ok := s.NodeVersion(c.id); v != c.want || ok != c.ok {
				t.Fatalf("%s: version of %s = %d, %v; want %d, %v", when, c.id, v, ok, c.want, c.ok)
			}
		}
		if addr, ok := s.NodeAddr("n1"); !ok || addr != "127.0.0.1:9999" {
			t.Fatalf("%s: n1 = %q %v", when, addr, ok)
		}
	}
	check("applied")
	s.Close()
	s = openTestStore(t, fs)
	check("after a restart")
}

func importCmd(ns string, clear bool, recs ...*fsmv1.ImportedMessage) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_Import{Import: &fsmv1.Import{Namespace: ns, Messages: recs, Clear: clear}}}
}

func rec(stream string, pos, gp int64, typ string) *fsmv1.ImportedMessage {
	return &fsmv1.ImportedMessage{
		Id: fmt.Sprintf("id-%05d", idSeq.Add(1)), Stream: stream, Type: typ,
		Position: pos, GlobalPosition: gp, Data: []byte(`{"i":1}`), TimeUnixNano: testTime + gp,
	}
}

func TestImport(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "order-1", newMsg("Created", `{}`))) // gp 1
	res := f.must(importCmd("app", false, rec("order-2", 0, 47, "Created"), rec("order-2", 1, 50, "Paid"), rec("order-1", 5, 60, "Late")))
	if r := member[*fsmv1.ImportResult](res); r.Imported != 3 || r.LastGlobalPosition != 60 {
		t.Fatalf("import result %+v", r)
	}
	v := view(t, s, "app")
	msgs, err := v.ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	_, gps := positions(msgs)
	if !reflect.DeepEqual(gps, []int64{1, 47, 50, 60}) {
		t.Fatalf("global positions %v", gps)
	}
	if msgs[1].Time != testTime+47 || msgs[1].Position != 0 {
		t.Fatalf("imported message %+v", msgs[1])
	}
	if ver, _ := v.StreamVersion("order-1"); ver != 5 {
		t.Fatalf("order-1 version %d after import at 5", ver)
	}
	// The next append continues after the highest imported global position.
	if a := member[*fsmv1.AppendResult](f.must(appendCmd("app", "order-2", newMsg("Shipped", `{}`)))); a.FirstGlobalPosition != 61 || a.FirstPosition != 2 {
		t.Fatalf("append after import %+v", a)
	}

	// Clashes reject the whole chunk and change nothing.
	before := contentHash(t, s)
	for _, c := range []struct {
		name string
		cmd  *fsmv1.Command
	}{
		{"stored global position", importCmd("app", false, rec("x-1", 0, 100, "T"), rec("x-1", 1, 47, "T"))},
		{"stored stream position", importCmd("app", false, rec("order-2", 1, 200, "T"))},
		{"duplicate in chunk", importCmd("app", false, rec("x-1", 0, 300, "T"), rec("x-2", 0, 300, "T"))},
		{"clash with clear is all or nothing", importCmd("app", true, rec("x-1", 0, 5, "T"), rec("x-1", 0, 6, "T"))},
	} {
		res := f.apply(c.cmd)[0]
		var pe *PositionExistsError
		if err, _ := res.(error); !errors.Is(err, ErrPositionExists) || !errors.As(err, &pe) {
			t.Fatalf("%s: result %v", c.name, res)
		}
	}
	if after := contentHash(t, s); after != before {
		t.Fatal("rejected import chunks changed the stored state")
	}

	// Clear (force) empties the namespace first.
	f.must(importCmd("app", true, rec("y-1", 0, 3, "T")))
	v2 := view(t, s, "app")
	all, _ := v2.ReadAll(1, -1)
	stats, _ := v2.Stats()
	cats, _, _ := v2.ListCategories(CategoriesQuery{})
	if len(all) != 1 || all[0].GlobalPosition != 3 || stats.MessageCount != 1 || stats.StreamCount != 1 || len(cats) != 1 || cats[0].Category != "y" {
		t.Fatalf("after clear: %d messages %+v %+v", len(all), stats, cats)
	}
	if a := member[*fsmv1.AppendResult](f.must(appendCmd("app", "y-1", newMsg("T", `{}`)))); a.FirstGlobalPosition != 4 || a.FirstPosition != 1 {
		t.Fatalf("append after clear %+v", a)
	}
}
