package fsm

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// withRules stamps cmd with input rules, as Node.Apply does.
func withRules(rules uint32, cmd *fsmv1.Command) *fsmv1.Command {
	cmd.InputRules = rules
	return cmd
}

// refusedOn reports whether res is a validation error on field whose
// reason holds want.
func refusedOn(res any, field, want string) bool {
	var ve *ValidationError
	err, _ := res.(error)
	return errors.As(err, &ve) && ve.Field == field && strings.Contains(ve.Reason, want)
}

// TestInputRules applies each entry under the legacy rules (what entries
// written before the strict rules are held to, on replay and on older
// replicas) and under the strict rules: the legacy rules apply it as they
// always did, the strict ones refuse it naming the field, and change
// nothing.
func TestInputRules(t *testing.T) {
	t.Parallel()
	over := int64(MaxImportedPosition + 1)
	cases := []struct {
		name  string
		cmd   func() *fsmv1.Command
		field string // of the strict refusal
		want  string // in its reason
	}{
		{"invalid UTF-8 in data", func() *fsmv1.Command { return appendCmd("app", "s-1", newMsg("T", "{\"k\":\"a\xffb\"}")) },
			"messages[0].data", "byte 0xff is not UTF-8 in a string at k (byte 7)"},
		{"unpaired surrogate in data", func() *fsmv1.Command { return appendCmd("app", "s-2", newMsg("T", `{"k":["\ud800"]}`)) },
			"messages[0].data", `\ud800 is an unpaired UTF-16 surrogate escape in a string at k[0]`},
		{"invalid UTF-8 in a data member name", func() *fsmv1.Command { return appendCmd("app", "s-3", newMsg("T", "{\"k\xc3\":1}")) },
			"messages[0].data", "in a member name"},
		{"invalid UTF-8 in metadata", func() *fsmv1.Command {
			return appendCmd("app", "s-4", withMeta(newMsg("T", `{}`), "{\"correlationStreamName\":\"x\xe2\x82\"}"))
		}, "messages[0].metadata", "is not UTF-8"},
		{"invalid UTF-8 in an AppendMulti", func() *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: &fsmv1.AppendMulti{Namespace: "app", TimeUnixNano: testTime,
				Streams: []*fsmv1.StreamAppend{{Stream: "m-1", Messages: []*fsmv1.NewMessage{newMsg("T", `{}`)}},
					{Stream: "m-2", Messages: []*fsmv1.NewMessage{newMsg("T", `{}`), newMsg("T", "{\"k\":\"\xff\"}")}}}}}}
		}, "streams[1].messages[1].data", "byte 0xff"},
		{"invalid UTF-8 in imported data", func() *fsmv1.Command {
			r := rec("i-1", 0, 1000, "T")
			r.Data = []byte("{\"k\":\"\xff\"}")
			return importCmd("app", false, r)
		}, "messages[0].data", "byte 0xff"},
		{"imported position 2^62", func() *fsmv1.Command { return importCmd("app", false, rec("i-2", over, 1001, "T")) },
			"messages[0].position", "must be 0..4611686018427387903"},
		{"imported global position 2^62", func() *fsmv1.Command { return importCmd("app", false, rec("i-3", 0, over, "T")) },
			"messages[0].global_position", "must be 1..4611686018427387903"},
		{"namespace named CON", func() *fsmv1.Command { return createNS("CON") }, "name", "Windows device name"},
		{"namespace named nul.txt", func() *fsmv1.Command { return createNS("nul.txt") }, "name", "Windows device name"},
		{"namespace named .", func() *fsmv1.Command { return createNS(".") }, "name", "must start with a letter or a digit"},
		{"namespace named ..", func() *fsmv1.Command { return createNS("..") }, "name", "must start with a letter or a digit"},
		{"namespace named _metadata", func() *fsmv1.Command { return createNS("_metadata") }, "name", "reserved"},
		{"namespace named a.", func() *fsmv1.Command { return createNS("a.") }, "name", "must not end with '.'"},
	}
	legacy := openTestStore(t, nil)
	lf := newFeeder(t, legacy)
	lf.must(createNS("app"))
	strict := openTestStore(t, nil)
	sf := newFeeder(t, strict)
	sf.must(withRules(InputRulesStrict, createNS("app")))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if res := lf.apply(withRules(InputRulesLegacy, tc.cmd()))[0]; res == nil {
				t.Fatal("legacy rules: skipped")
			} else if err, ok := res.(error); ok {
				t.Fatalf("legacy rules refused what entries before the strict rules applied: %v", err)
			}
			before := contentHash(t, strict)
			if res := sf.apply(withRules(InputRulesStrict, tc.cmd()))[0]; !refusedOn(res, tc.field, tc.want) {
				t.Fatalf("strict rules: result %v, want a validation error on %s holding %q", res, tc.field, tc.want)
			}
			if contentHash(t, strict) != before {
				t.Fatal("the refused entry changed the stored state")
			}
		})
	}
}

// TestPositionsNeverWrap: whatever an entry's rules, no position or
// global position passes MaxPosition. Before, an import at 2^63-1 was
// stored and the next append landed at -2^63 (issue 28, finding 6).
func TestPositionsNeverWrap(t *testing.T) {
	t.Parallel()
	top := int64(MaxPosition)
	multi := func(stream string, n int) *fsmv1.Command {
		msgs := make([]*fsmv1.NewMessage, n)
		for i := range msgs {
			msgs[i] = newMsg("T", `{}`)
		}
		return &fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: &fsmv1.AppendMulti{Namespace: "app", TimeUnixNano: testTime,
			Streams: []*fsmv1.StreamAppend{{Stream: "other-1", Messages: []*fsmv1.NewMessage{newMsg("T", `{}`)}}, {Stream: stream, Messages: msgs}}}}}
	}
	n := func(k int) []*fsmv1.NewMessage {
		msgs := make([]*fsmv1.NewMessage, k)
		for i := range msgs {
			msgs[i] = newMsg("T", `{}`)
		}
		return msgs
	}
	cases := []struct {
		name   string
		setup  *fsmv1.Command // legacy rules: any position up to MaxPosition
		cmd    *fsmv1.Command
		field  string // "" when cmd applies
		want   string
		stream string // its version afterwards
		ver    int64
	}{
		{"import at 2^63-1", nil, importCmd("app", false, rec("a-1", math.MaxInt64, 1, "T")),
			"messages[0].position", "must be 0..9223372036854775806", "a-1", -1},
		{"import at global position 2^63-1", nil, importCmd("app", false, rec("b-1", 0, math.MaxInt64, "T")),
			"messages[0].global_position", "must be 1..9223372036854775806", "b-1", -1},
		{"append at the top", importCmd("app", false, rec("c-1", top, 100, "T")), appendCmd("app", "c-1", newMsg("T", `{}`)),
			"stream", "is at version 9223372036854775806: 1 more messages would pass", "c-1", top},
		{"append filling the top", importCmd("app", false, rec("d-1", top-2, 200, "T")), appendCmd("app", "d-1", n(2)...),
			"", "", "d-1", top},
		{"append of one too many", importCmd("app", false, rec("e-1", top-2, 300, "T")), appendCmd("app", "e-1", n(3)...),
			"stream", "3 more messages would pass", "e-1", top - 2},
		{"append multi at the top", importCmd("app", false, rec("f-1", top, 400, "T")), multi("f-1", 1),
			"streams[1].stream", "1 more messages would pass", "f-1", top},
		{"append at the top global position", importCmd("app", false, rec("g-1", 0, top, "T")), appendCmd("app", "g-2", newMsg("T", `{}`)),
			"messages", "next global position is 9223372036854775807: 1 more messages would pass", "g-2", -1},
		{"append multi at the top global position", nil, multi("h-1", 1),
			"messages", "2 more messages would pass", "h-1", -1},
	}
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				f.must(tc.setup)
			}
			before := contentHash(t, s)
			res := f.apply(tc.cmd)[0]
			if tc.field == "" {
				if err, ok := res.(error); ok {
					t.Fatalf("refused: %v", err)
				}
			} else {
				if !refusedOn(res, tc.field, tc.want) {
					t.Fatalf("result %v, want a validation error on %s holding %q", res, tc.field, tc.want)
				}
				if contentHash(t, s) != before {
					t.Fatal("the refused entry changed the stored state")
				}
			}
			v := view(t, s, "app")
			if ver, _ := v.StreamVersion(tc.stream); ver != tc.ver {
				t.Fatalf("stream %s at version %d, want %d", tc.stream, ver, tc.ver)
			}
			for _, m := range streamOf(t, s, "app", tc.stream) {
				if m.Position < 0 || m.GlobalPosition < 1 {
					t.Fatalf("stored at position %d, global position %d", m.Position, m.GlobalPosition)
				}
			}
		})
	}
}

func TestValidateNewNamespaceName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"default": "", "test-write-001_x.y": "", "a": "", "0": "", "Orders.v2": "", "com10": "", "lpt": "", "console": "", "a..b": "",
		"CONfig": "", "nul-x": "", "auxiliary.x": "",
		".": "start with a letter", "..": "start with a letter", ".hidden": "start with a letter", "_metadata": "start with a letter",
		"_x": "start with a letter", "-rf": "start with a letter", "a.": "end with '.'", "a..": "end with '.'",
		"CON": "device", "con": "device", "Nul": "device", "PRN.log": "device", "aux.tar.gz": "device", "COM1": "device",
		"lpt9": "device", "com0": "device", "a/b": "not a letter", "": "1..128", strings.Repeat("a", 129): "1..128",
	} {
		err := ValidateNewNamespaceName(name)
		var ve *ValidationError
		switch {
		case want == "" && err != nil:
			t.Errorf("ValidateNewNamespaceName(%q) = %v, want ok", name, err)
		case want != "" && (!errors.As(err, &ve) || ve.Field != "name" || !strings.Contains(ve.Reason, want)):
			t.Errorf("ValidateNewNamespaceName(%q) = %v, want a refusal holding %q", name, err, want)
		}
		// Existing namespaces keep working: the character rule alone.
		if want == "start with a letter" || want == "end with '.'" || want == "device" {
			if err := ValidateNamespaceName(name); err != nil {
				t.Errorf("ValidateNamespaceName(%q) = %v: an existing namespace of that name could not be named", name, err)
			}
		}
	}
}

func TestValidateTimeAndImportedPosition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t  string
		ok bool
	}{
		{"2026-01-02T03:04:05Z", true},
		{"1970-01-01T00:00:00Z", true},
		{"1677-09-21T00:12:43.145224192Z", true}, // int64 nanoseconds' first
		{"1677-09-21T00:12:43.145224191Z", false},
		{"2262-04-11T23:47:16.854775807Z", true}, // and last
		{"2262-04-11T23:47:16.854775808Z", false},
		{"9999-12-31T00:00:00Z", false}, // was stored as 1816-03-30
		{"0001-01-01T00:00:00Z", false},
	} {
		tm, err := time.Parse(time.RFC3339Nano, tc.t)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateTime("time", tm); (err == nil) != tc.ok {
			t.Errorf("ValidateTime(%s) = %v, want ok %v", tc.t, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		p, min int64
		ok     bool
	}{{0, 0, true}, {-1, 0, false}, {0, 1, false}, {1, 1, true}, {MaxImportedPosition, 0, true}, {MaxImportedPosition + 1, 0, false}, {math.MaxInt64, 1, false}} {
		if err := ValidateImportedPosition("pos", tc.p, tc.min); (err == nil) != tc.ok {
			t.Errorf("ValidateImportedPosition(%d, %d) = %v, want ok %v", tc.p, tc.min, err, tc.ok)
		}
	}
}

// TestReadRepairsLegacyText: data and metadata a legacy entry stored with
// invalid UTF-8 read back as UTF-8 (U+FFFD in place), still valid JSON.
func TestReadRepairsLegacyText(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "s-1", withMeta(newMsg("T", "{\"k\":\"a\xffb\",\"ok\":\"é\"}"), "{\"m\":\"\xc3\"}"), newMsg("T", `{"k":"plain"}`)))
	msgs := streamOf(t, s, "app", "s-1")
	for i, want := range []struct{ data, meta string }{
		{`{"k":"a` + "\uFFFD" + `b","ok":"é"}`, `{"m":"` + "\uFFFD" + `"}`},
		{`{"k":"plain"}`, ""},
	} {
		if string(msgs[i].Data) != want.data || string(msgs[i].Metadata) != want.meta {
			t.Fatalf("message %d read as data %q metadata %q, want %q %q", i, msgs[i].Data, msgs[i].Metadata, want.data, want.meta)
		}
		if !utf8.Valid(msgs[i].Data) || ValidateData("data", msgs[i].Data) != nil {
			t.Fatalf("message %d: data %q is not UTF-8 JSON", i, msgs[i].Data)
		}
	}
}

// TestNamespaceNameErrorsQuoteCharacters: a refused character is quoted
// whole, not as its first byte read as Latin-1 ("😀", not "ð").
func TestNamespaceNameErrorsQuoteCharacters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		validate   func(string) error
	}{
		{"shop😀", `'😀' at 4`, ValidateNamespaceName},
		{"caf\u00e9", `'é' at 3`, ValidateNamespaceName},
		{"a\xffb", `"\xff" at 1`, ValidateNamespaceName},
		{"a b", `' ' at 1`, ValidateNamespaceName},
		{"😀shop", `'😀' at 0`, ValidateNamespaceName},
		{"_shop", `('_': names starting`, ValidateNewNamespaceName},
	} {
		err := tc.validate(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate(%q) = %v, want it to name %s", tc.name, err, tc.want)
		}
	}
}
