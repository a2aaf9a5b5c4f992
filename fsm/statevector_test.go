package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// A category read after a state vector returns, per stream, what comes
// after the position the caller holds, and every message of the streams
// it does not name; with the other filters, limits, pages and direction.
func TestReadCategoryAfterStateVector(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	// account: account-1 gp 1..5 (positions 0..4), account-2+x gp 6, 7,
	// account gp 8, account-2 gp 12.
	cases := []struct {
		name string
		q    CategoryQuery
		want []int64
	}{
		{"one stream held in part", CategoryQuery{Category: "account", After: map[string]int64{"account-1": 2}}, []int64{4, 5, 6, 7, 8, 12}},
		{"every stream held but one message", CategoryQuery{Category: "account", After: map[string]int64{"account-1": 4, "account-2+x": 0, "account": 0, "account-2": 0}}, []int64{7}},
		{"held beyond the end", CategoryQuery{Category: "account", After: map[string]int64{"account-1": 99}}, []int64{6, 7, 8, 12}},
		{"empty vector is the whole category", CategoryQuery{Category: "account", After: map[string]int64{}}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 12}},
		{"a stream of no message", CategoryQuery{Category: "account", After: map[string]int64{"account-77": 3}}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 12}},
		{"limit and start", CategoryQuery{Category: "account", GlobalPosition: 5, Limit: 2, After: map[string]int64{"account-1": 3, "account-2+x": 0}}, []int64{5, 7}},
		{"backward last 2", CategoryQuery{Category: "account", GlobalPosition: -1, Backward: true, Limit: 2, After: map[string]int64{"account-2": 0, "account": 0}}, []int64{7, 6}},
		{"with a consumer group", CategoryQuery{Category: "account", Member: 0, Size: 1, After: map[string]int64{"account-1": 3}}, []int64{5, 6, 7, 12}},
		{"with a type filter", CategoryQuery{Category: "account", Filter: Filter{Types: []string{"Deposited"}}, After: map[string]int64{"account-1": 1}}, []int64{3, 4}},
		{"whole namespace", CategoryQuery{Category: "", Limit: 4, After: map[string]int64{"account-1": 3, "account-2+x": 1}}, []int64{5, 8, 9, 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, err := view(t, s, "app").ReadCategory(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := gpsOf(msgs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("global positions %v, want %v", got, c.want)
			}
		})
	}
	// Pages: reading on after each capped page's last message, with the
	// same vector, returns every message once.
	ps, size := pageFixture(t) // page-1: gp 1..10 and 12..21, positions 0..19
	v := view(t, ps, "big")
	v.SetPageBytes(3*size + size/2)
	var got []Message
	for from, pages := int64(1), 0; ; pages++ {
		if pages > 100 {
			t.Fatal("no end after 100 pages")
		}
		page, err := v.ReadCategory(CategoryQuery{Category: "page", GlobalPosition: from, Limit: -1, After: map[string]int64{"page-1": 12}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if !v.PageCapped() {
			break
		}
		from = page[len(page)-1].GlobalPosition + 1
	}
	if want := span(15, 21); !reflect.DeepEqual(gpsOf(got), want) {
		t.Fatalf("paged read after page-1:12 = %v, want %v", gpsOf(got), want)
	}
}

func TestValidateStateVector(t *testing.T) {
	t.Parallel()
	big := map[string]int64{}
	for i := range MaxStateVector + 1 {
		big[fmt.Sprintf("account-%d", i)] = 0
	}
	for _, tc := range []struct {
		name     string
		category string
		sv       map[string]int64
		field    string // "": valid
	}{
		{"valid", "account", map[string]int64{"account-1": 3, "account-2+x": 0}, ""},
		{"any category for the namespace", "", map[string]int64{"account-1": 3, "order-2": 0}, ""},
		{"another category", "account", map[string]int64{"account-1": 3, "order-2": 0}, `state_vector["order-2"]`},
		{"the category itself is a stream of it", "account", map[string]int64{"account": 0}, ""},
		{"negative", "account", map[string]int64{"account-1": -1}, `state_vector["account-1"]`},
		{"empty name", "", map[string]int64{"": 0}, `state_vector[""]`},
		{"too many", "account", big, "state_vector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateStateVector("state_vector", tc.category, tc.sv)
			var ve *ValidationError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("%v, want valid", err)
			case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field):
				t.Fatalf("%v, want a validation error on %s", err, tc.field)
			}
		})
	}
}
