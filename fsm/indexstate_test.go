package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func setIndexStateCmd(ns, name string, paused bool) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_SetIndexState{SetIndexState: &fsmv1.SetIndexState{Namespace: ns, Name: name, Paused: paused}}}
}

// nsDB runs fn on namespace ns's live database (a test's way to damage
// an index's own keys).
func nsDB(t *testing.T, s *Store, ns string, fn func(db *pebble.DB)) {
	t.Helper()
	h, err := s.acquire(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(h)
	fn(h.db)
}

// A paused index stops advancing (checkpoint and coverage stay), still
// drops the entries of removed messages, answers queries, refuses a wait
// it cannot satisfy at once, and resumes from its checkpoint reading
// only the messages it had not read; its sibling never stops.
func TestIndexPauseResume(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	f.must(createIndexCmd("ns", lastIndex()))
	for i := range 20 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%4), accountMsg(i, "o")))
	}
	catchUp(t, s, "ns")
	res := member[*fsmv1.IndexResult](f.must(setIndexStateCmd("ns", "bal", true)))
	if !res.Definition.Paused {
		t.Fatalf("pause result %+v", res.Definition)
	}
	f.must(setIndexStateCmd("ns", "bal", true)) // again: no error, no change
	heldAtPause, _ := modelEntries(t, s, "ns")
	for i := range 10 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%4), accountMsg(100+i, "p")))
	}
	f.must(truncateCmd("ns", "account-0", 3)) // gps 1 and 5 (positions 0..2 of account-0: 1, 5, 9)
	catchUp(t, s, "ns")

	info, err := view(t, s, "ns").Index("bal")
	if err != nil || !info.Paused || info.Checkpoint != 20 || info.LagEvents != 10 || info.Failure != "" {
		t.Fatalf("paused index after 10 appends: %+v, %v", info, err)
	}
	// The truncated messages left it; nothing above the checkpoint came in.
	for _, gp := range []int64{1, 5, 9} {
		delete(heldAtPause, gp)
	}
	if got := indexEntries(t, s, "ns", "bal"); !equalMaps(got, heldAtPause) {
		t.Fatalf("paused index holds %d entries, want the %d it held at the pause less the truncated ones", len(got), len(heldAtPause))
	}
	if got, want := mustStreamEntries(t, s), mustModelStream(t, s); !equalMaps(got, want) {
		t.Fatalf("the sibling stopped with it: %d entries, want %d", len(got), len(want))
	}
	if info, _ := view(t, s, "ns").Index("last"); info.Paused || info.LagEvents != 0 {
		t.Fatalf("sibling %+v", info)
	}
	// LOCAL reads answer from what it holds.
	if gps, _ := queryHits(t, s, IndexQuery{Index: "bal", Equal: []string{"19"}, PositionsOnly: true}); len(gps) != 1 || gps[0] != 20 {
		t.Fatalf("query of a paused index: %v, want [20]", gps)
	}
	// A wait it cannot satisfy fails at once, naming the state.
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.WaitIndexed(ctx, "ns", "bal", s.AppliedIndex()); !errors.Is(err, ErrIndexPaused) || !strings.Contains(err.Error(), `"bal"`) {
		t.Fatalf("wait for a paused index: %v, want ErrIndexPaused naming it", err)
	}
	if err := s.WaitIndexed(ctx, "ns", "last", s.AppliedIndex()); err != nil {
		t.Fatalf("wait for the sibling: %v", err)
	}

	before := s.IndexCounters().Read
	f.must(setIndexStateCmd("ns", "bal", false))
	catchUp(t, s, "ns")
	if read := s.IndexCounters().Read - before; read != 10 {
		t.Fatalf("resume read %d messages, want the 10 above its checkpoint", read)
	}
	want, _ := modelEntries(t, s, "ns")
	if got := indexEntries(t, s, "ns", "bal"); !equalMaps(got, want) {
		t.Fatalf("resumed index holds %d entries, want %d", len(got), len(want))
	}
	if info, _ := view(t, s, "ns").Index("bal"); info.Paused || info.Checkpoint != 30 || info.LagEvents != 0 {
		t.Fatalf("resumed %+v", info)
	}
	if err := s.WaitIndexed(ctx, "ns", "bal", s.AppliedIndex()); err != nil {
		t.Fatalf("wait after resume: %v", err)
	}

	// Refusals change nothing.
	for _, tc := range []struct {
		name string
		cmd  *fsmv1.Command
		want error
	}{
		{"unknown index", setIndexStateCmd("ns", "nope", true), ErrIndexNotFound},
		{"unknown namespace", setIndexStateCmd("other", "bal", true), ErrNamespaceNotFound},
	} {
		if r := f.apply(tc.cmd)[0]; !errors.Is(asErr(r), tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, r, tc.want)
		}
	}
	var ve *ValidationError
	if r := f.apply(setIndexStateCmd("ns", "", true))[0]; !errors.As(asErr(r), &ve) || ve.Field != "name" {
		t.Fatalf("empty name: %v, want a validation error of name", r)
	}
	if info, _ := view(t, s, "ns").Index("bal"); info.Paused {
		t.Fatal("a refused command paused the index")
	}
}

func asErr(r any) error {
	err, _ := r.(error)
	return err
}

func equalMaps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func mustStreamEntries(t *testing.T, s *Store) map[int64]string {
	got, _ := streamIndexEntries(t, s, "ns", "last")
	return got
}

func mustModelStream(t *testing.T, s *Store) map[int64]string {
	want, _ := modelStreamEntries(t, s, "ns")
	return want
}

// An error confined to one index fails that index alone on this node,
// with the reason in its info, a count, and refused queries and waits;
// its sibling goes on; a rebuild clears it. Each trigger is real: the
// index's own node-local keys damaged on disk, or a definition this
// binary cannot evaluate (as a newer binary's, after a downgrade).
func TestIndexFailedConfined(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failing string // the index that fails; the other is its sibling
		damage  func(t *testing.T, s *Store, id uint64)
		reason  string
		rebuild *fsmv1.IndexDefinition // nil: the current definition
	}{
		{"checkpoint does not decode", "bal", func(t *testing.T, s *Store, id uint64) {
			nsDB(t, s, "ns", func(db *pebble.DB) {
				if err := db.Set(indexCkptKey(id), []byte{1, 2, 3}, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			})
		}, "checkpoint (XC) does not decode", nil},
		{"stream entry does not decode", "last", func(t *testing.T, s *Store, id uint64) {
			nsDB(t, s, "ns", func(db *pebble.DB) {
				if err := db.Set(indexStreamKey(id, "account-1"), []byte{1}, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			})
		}, `entry of stream "account-1" (XS) does not decode`, nil},
		{"definition cannot be evaluated", "bal", func(t *testing.T, s *Store, id uint64) {
			nsDB(t, s, "ns", func(db *pebble.DB) {
				d := balanceIndex()
				d.Id, d.Fields[0].Type = id, fsmv1.IndexFieldType(99) // a type of a later version
				v, err := proto.Marshal(d)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Set(indexDefKey("bal"), v, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			})
		}, "definition can no longer be evaluated", balanceIndex()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			ids := map[string]uint64{
				"bal":  member[*fsmv1.IndexResult](f.must(createIndexCmd("ns", balanceIndex()))).Definition.Id,
				"last": member[*fsmv1.IndexResult](f.must(createIndexCmd("ns", lastIndex()))).Definition.Id,
			}
			sibling := map[string]string{"bal": "last", "last": "bal"}[tc.failing]
			for i := range 20 {
				f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%4), accountMsg(i, "o")))
			}
			catchUp(t, s, "ns")
			tc.damage(t, s, ids[tc.failing])
			for i := range 8 {
				f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%4), accountMsg(100+i, "p")))
			}
			res := catchUp(t, s, "ns") // never an error: the round goes on without it
			if len(res.Failed) != 1 || res.Failed[0].Namespace != "ns" || res.Failed[0].Index != tc.failing ||
				res.Failed[0].ID != ids[tc.failing] || !strings.Contains(res.Failed[0].Reason, tc.reason) {
				t.Fatalf("the rounds report failures %+v; want %q failed for %q", res.Failed, tc.failing, tc.reason)
			}
			if all, err := s.FailedIndexes(); err != nil || len(all) != 1 || all[0] != res.Failed[0] {
				t.Fatalf("FailedIndexes = %+v, %v; want %+v", all, err, res.Failed)
			}

			info, err := view(t, s, "ns").Index(tc.failing)
			if err != nil || !strings.Contains(info.Failure, tc.reason) {
				t.Fatalf("failed index info %+v, %v; want a failure naming %q", info, err, tc.reason)
			}
			if n := s.IndexCounters().Failures; n != 1 {
				t.Fatalf("failures counted %d, want 1", n)
			}
			checkSibling := func(step string) {
				t.Helper()
				var got, want map[int64]string
				if sibling == "bal" {
					got = indexEntries(t, s, "ns", "bal")
					want, _ = modelEntries(t, s, "ns")
				} else {
					got, want = mustStreamEntries(t, s), mustModelStream(t, s)
				}
				if !equalMaps(got, want) {
					t.Fatalf("%s: sibling %q holds %d entries, want %d", step, sibling, len(got), len(want))
				}
			}
			checkSibling("after the failure")
			if _, err := view(t, s, "ns").QueryIndex(IndexQuery{Index: tc.failing, PositionsOnly: true}); !errors.Is(err, ErrIndexFailed) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("query of a failed index: %v, want ErrIndexFailed with the reason", err)
			}
			ctx, cancel := contextWithTimeout(10 * time.Second)
			defer cancel()
			if err := s.WaitIndexed(ctx, "ns", tc.failing, s.AppliedIndex()); !errors.Is(err, ErrIndexFailed) {
				t.Fatalf("wait for a failed index: %v, want ErrIndexFailed", err)
			}

			f.must(rebuildIndexCmd("ns", tc.failing, tc.rebuild))
			catchUp(t, s, "ns")
			info, err = view(t, s, "ns").Index(tc.failing)
			if err != nil || info.Failure != "" || !info.Built || info.Rebuilding != nil {
				t.Fatalf("after rebuild: %+v, %v", info, err)
			}
			if _, err := view(t, s, "ns").QueryIndex(IndexQuery{Index: tc.failing, PositionsOnly: true}); err != nil {
				t.Fatalf("query after rebuild: %v", err)
			}
			if r, _ := get(view(t, s, "ns").snap, indexFailedKey(ids[tc.failing])); r != nil {
				t.Fatalf("the failure record outlived the rebuild: %q", r)
			}
			if tc.failing == "bal" {
				got, want := indexEntries(t, s, "ns", "bal"), map[int64]string{}
				want, _ = modelEntries(t, s, "ns")
				if !equalMaps(got, want) {
					t.Fatalf("rebuilt index holds %d entries, want %d", len(got), len(want))
				}
			} else if got, want := mustStreamEntries(t, s), mustModelStream(t, s); !equalMaps(got, want) {
				t.Fatalf("rebuilt stream index holds %d entries, want %d", len(got), len(want))
			}
			checkSibling("after the rebuild")
			if all, err := s.FailedIndexes(); err != nil || len(all) != 0 {
				t.Fatalf("FailedIndexes after the rebuild = %+v, %v; want none", all, err)
			}
		})
	}
}

// A rebuild that fails leaves the current definition answering: the
// failure is the rebuild's alone.
func TestIndexRebuildFailsAlone(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	for i := range 50 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%5), accountMsg(i, "o")))
	}
	catchUp(t, s, "ns")
	byOwner := &fsmv1.IndexDefinition{Name: "bal", Version: 2, Category: "account", Fields: []*fsmv1.IndexField{dataField("/owner", tString)}}
	next := member[*fsmv1.IndexResult](f.must(rebuildIndexCmd("ns", "bal", byOwner))).Definition
	if r, err := s.IndexRound("ns", 10); err != nil || !r.More {
		t.Fatalf("partial round: %+v, %v", r, err)
	}
	nsDB(t, s, "ns", func(db *pebble.DB) {
		if err := db.Set(indexCkptKey(next.Id), []byte{9}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	f.must(appendCmd("ns", "account-1", accountMsg(7, "late")))
	catchUp(t, s, "ns")
	info, err := view(t, s, "ns").Index("bal")
	if err != nil || info.Definition.Version != 1 || info.Failure != "" || info.Rebuilding == nil || !strings.Contains(info.Rebuilding.Failure, "checkpoint (XC) does not decode") {
		t.Fatalf("info %+v, %v; want version 1 answering, its rebuild failed", info, err)
	}
	if gps, _ := queryHits(t, s, IndexQuery{Index: "bal", Equal: []string{"7"}, PositionsOnly: true}); len(gps) != 2 {
		t.Fatalf("version 1 answers %v, want the 2 messages of balance 7", gps)
	}
}
