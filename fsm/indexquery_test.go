package fsm

import (
	"reflect"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// An index query spends the view's scan budget on the entries it reads and
// does not return (those of removed messages the loop has not dropped
// yet): once spent, it returns what it has (perhaps nothing) with a
// cursor after the last entry read, and the pages that follow the cursors
// return exactly what one unbounded query does, in either direction.
func TestIndexQueryScanBudget(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	var removed, kept []*fsmv1.NewMessage
	for i := range 30 {
		removed = append(removed, accountMsg(i, "o")) // balances 0..29: sort first
	}
	for i := range 5 {
		kept = append(kept, accountMsg(100+i, "o"))
	}
	f.must(appendCmd("ns", "account-1", removed...))
	f.must(appendCmd("ns", "account-2", kept...))
	catchUp(t, s, "ns")
	f.must(truncateCmd("ns", "account-1", 30)) // the loop does not run again
	wantForward := []int64{31, 32, 33, 34, 35}
	wantBackward := []int64{35, 34, 33, 32, 31}

	t.Run("no budget", func(t *testing.T) {
		got, page := queryHits(t, s, IndexQuery{Index: "bal"})
		if !reflect.DeepEqual(got, wantForward) || page.Capped || page.NextCursor != nil || page.Examined != 35 {
			t.Fatalf("hits %v, page %+v", got, page)
		}
	})
	for _, tc := range []struct {
		name      string
		backward  bool
		positions bool
		pages     []int // hits per page
		want      []int64
	}{
		// 30 removed entries first: three pages stop at the budget of 10
		// with nothing, the fourth returns the 5 live ones and ends.
		{"forward", false, false, []int{0, 0, 0, 5}, wantForward},
		{"forward, positions only", false, true, []int{0, 0, 0, 5}, wantForward},
		// Backward the live ones come first; the removed ones after them
		// spend the budget three times before the walk ends.
		{"backward", true, false, []int{5, 0, 0, 0}, wantBackward},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				got    []int64
				pages  []int
				cursor []byte
			)
			for i := 0; ; i++ {
				v := view(t, s, "ns")
				v.SetScanBudget(10)
				q := IndexQuery{Index: "bal", Backward: tc.backward, PositionsOnly: tc.positions, Cursor: cursor, Limit: 100}
				page, err := v.QueryIndex(q)
				if err != nil {
					t.Fatalf("page %d: %v", i, err)
				}
				_, stopped := v.ScanStopped()
				if page.Capped != stopped || v.PageCapped() != stopped || (stopped && page.NextCursor == nil) {
					t.Fatalf("page %d: capped %v, cursor %x; the view says stopped %v, capped %v", i, page.Capped, page.NextCursor, stopped, v.PageCapped())
				}
				if stopped && page.Examined != len(page.Hits)+10 {
					t.Fatalf("page %d stopped after examining %d entries for %d hits; want the budget of 10 more", i, page.Examined, len(page.Hits))
				}
				pages = append(pages, len(page.Hits))
				for _, h := range page.Hits {
					got = append(got, h.GlobalPosition)
				}
				if cursor = page.NextCursor; cursor == nil {
					break
				}
				if i > 100 {
					t.Fatal("pages never end")
				}
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(pages, tc.pages) {
				t.Fatalf("pages of %v hits, %v; want %v, %v", pages, got, tc.pages, tc.want)
			}
		})
	}
}
