package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// docIndex is an index of the string /v of category doc's messages.
func docIndex(name string, kind fsmv1.IndexKind) *fsmv1.IndexDefinition {
	return &fsmv1.IndexDefinition{Name: name, Version: 1, Category: "doc", Kind: kind,
		Fields: []*fsmv1.IndexField{dataField("/v", tString)}}
}

// roundsToEnd runs index rounds of ns until one reaches the end, checking
// each with check, and returns their sum and how many ran.
func roundsToEnd(t *testing.T, s *Store, ns string, check func(IndexRoundResult)) (IndexRoundResult, int) {
	t.Helper()
	var total IndexRoundResult
	for n := 1; ; n++ {
		res, err := s.IndexRound(ns, 0)
		if err != nil {
			t.Fatalf("index round: %v", err)
		}
		if check != nil {
			check(res)
		}
		total.Read += res.Read
		total.Indexed += res.Indexed
		total.Skipped += res.Skipped
		total.TooLarge += res.TooLarge
		total.ReadBytes += res.ReadBytes
		if !res.More {
			return total, n
		}
		if n > 100_000 {
			t.Fatal("index rounds never end")
		}
	}
}

// A round ends at its byte bounds: it reads at most
// Options.IndexRoundReadBytes of messages and stages at most
// Options.IndexRoundBatchBytes, each passed by one message at most, and
// the rounds together still index every message.
func TestIndexRoundByteBounds(t *testing.T) {
	const readLimit, batchLimit = 64 << 10, 32 << 10
	for _, tc := range []struct {
		name       string
		valueBytes int // of /v: an entry's key and its reverse key's value
		padBytes   int // of the rest of the message: read, not written
		minRounds  int
	}{
		{name: "bound by reads", valueBytes: 10, padBytes: 4000,
			minRounds: 2000 * 4000 / (readLimit + 4200)},
		{name: "bound by writes", valueBytes: MaxIndexValueBytes, padBytes: 0,
			minRounds: 2000 * 2048 / (batchLimit + 4200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil, func(o *Options) {
				o.IndexRoundReadBytes, o.IndexRoundBatchBytes = readLimit, batchLimit
			})
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			f.must(createIndexCmd("ns", docIndex("v", fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED)))
			pad := strings.Repeat("p", tc.padBytes)
			var values []string
			for i := range 20 {
				var msgs []*fsmv1.NewMessage
				for j := range 100 {
					v := fmt.Sprintf("%06d", i*100+j)
					v += strings.Repeat("v", tc.valueBytes-len(v))
					msgs = append(msgs, newMsg("Doc", `{"v":"`+v+`","pad":"`+pad+`"}`))
					values = append(values, v)
				}
				f.must(appendCmd("ns", fmt.Sprintf("doc-%d", i), msgs...))
			}
			// Slack: one message read (its value and the record's
			// keys), and one message's entry, reverse key and checkpoint.
			readSlack := int64(tc.valueBytes + tc.padBytes + 512)
			batchSlack := int64(2*(tc.valueBytes+64) + 256)
			total, rounds := roundsToEnd(t, s, "ns", func(r IndexRoundResult) {
				if r.ReadBytes > readLimit+readSlack || r.BatchBytes > batchLimit+batchSlack {
					t.Fatalf("a round read %d bytes and committed %d; bounds %d+%d and %d+%d",
						r.ReadBytes, r.BatchBytes, readLimit, readSlack, batchLimit, batchSlack)
				}
			})
			if total.Read != 2000 || total.Indexed != 2000 || rounds < tc.minRounds {
				t.Fatalf("%d rounds read %d and indexed %d; want 2000 of each in at least %d rounds",
					rounds, total.Read, total.Indexed, tc.minRounds)
			}
			got := map[string]bool{}
			for _, fields := range indexEntries(t, s, "ns", "v") {
				got[fields] = true
			}
			for _, v := range values {
				if !got[string(appendOrderKey(nil, tString, v))] {
					t.Fatalf("the index holds %d values, not %.10q...", len(got), v)
				}
			}
		})
	}
}

// A string value longer than MaxIndexValueBytes (in bytes, after JSON
// unescaping) is not indexed, in event and stream indexes alike: the
// message is skipped and counted as too large.
func TestIndexValueTooLarge(t *testing.T) {
	const n = MaxIndexValueBytes
	for _, tc := range []struct {
		name    string
		v       string // /v as written in the JSON document
		indexed bool
	}{
		{name: "at the cap", v: strings.Repeat("a", n), indexed: true},
		{name: "one byte over", v: strings.Repeat("a", n+1), indexed: false},
		{name: "two-byte runes at the cap", v: strings.Repeat("é", n/2), indexed: true},
		{name: "two-byte runes over", v: strings.Repeat("é", n/2+1), indexed: false},
		{name: "escapes counted unescaped", v: strings.Repeat(`\u0041`, n), indexed: true},
		{name: "NULs at the cap (their keys are longer)", v: strings.Repeat(`\u0000`, n), indexed: true},
		{name: "1 MiB", v: strings.Repeat("x", 1<<20), indexed: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			f.must(createIndexCmd("ns", docIndex("ev", fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED)))
			f.must(createIndexCmd("ns", docIndex("st", fsmv1.IndexKind_INDEX_KIND_STREAM)))
			f.must(appendCmd("ns", "doc-1", newMsg("Doc", `{"v":"`+tc.v+`"}`)))
			total, _ := roundsToEnd(t, s, "ns", nil)
			wantIndexed, wantTooLarge := int64(2), int64(0)
			if !tc.indexed {
				wantIndexed, wantTooLarge = 0, 2
			}
			if total.Indexed != wantIndexed || total.TooLarge != wantTooLarge || total.Skipped != wantTooLarge {
				t.Fatalf("indexed %d, too large %d, skipped %d; want %d, %d, %d",
					total.Indexed, total.TooLarge, total.Skipped, wantIndexed, wantTooLarge, wantTooLarge)
			}
			if c := s.IndexCounters(); c.TooLarge != wantTooLarge {
				t.Fatalf("the store counts %d too large, want %d", c.TooLarge, wantTooLarge)
			}
			for _, name := range []string{"ev", "st"} {
				info, err := view(t, s, "ns").Index(name)
				if err != nil {
					t.Fatal(err)
				}
				if info.Entries != wantIndexed/2 || info.Skipped != wantTooLarge/2 {
					t.Fatalf("index %s: %d entries, %d skipped; want %d, %d",
						name, info.Entries, info.Skipped, wantIndexed/2, wantTooLarge/2)
				}
			}
		})
	}
}

// A query for a string no entry can hold (longer than
// MaxIndexValueBytes) is refused naming the value; a range's end may be
// longer.
func TestIndexQueryValueTooLarge(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", docIndex("ev", fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED)))
	f.must(appendCmd("ns", "doc-1", newMsg("Doc", `{"v":"b"}`)))
	roundsToEnd(t, s, "ns", nil)
	over := strings.Repeat("a", MaxIndexValueBytes+1)
	for _, tc := range []struct {
		name    string
		q       IndexQuery
		wantErr string // "" for a query that answers
		hits    int
	}{
		{name: "equal over", q: IndexQuery{Index: "ev", Equal: []string{over}}, wantErr: "equal[0]"},
		{name: "prefix over", q: IndexQuery{Index: "ev", Prefix: &over}, wantErr: "prefix"},
		{name: "equal at the cap", q: IndexQuery{Index: "ev", Equal: []string{over[1:]}}},
		{name: "range from a long value", q: IndexQuery{Index: "ev", From: &IndexBound{Value: over}}, hits: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := view(t, s, "ns").QueryIndex(tc.q)
			var ve *ValidationError
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("query: %v", err)
			case tc.wantErr != "" && (!errors.As(err, &ve) || ve.Field != tc.wantErr ||
				!strings.Contains(err.Error(), fmt.Sprint(MaxIndexValueBytes))):
				t.Fatalf("query: %v; want a refusal of %s naming the cap", err, tc.wantErr)
			case tc.wantErr == "" && len(page.Hits) != tc.hits:
				t.Fatalf("%d hits, want %d", len(page.Hits), tc.hits)
			}
		})
	}
}
