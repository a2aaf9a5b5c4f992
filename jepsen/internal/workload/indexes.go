package workload

import (
	"fmt"
	"strconv"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// The indexes workload: appends whose type, data and tags the workload
// chooses (recorded in the history), truncates and soft deletes of the
// same streams, and queries of two user-defined event indexes the runner
// creates before traffic (IndexDefs): one on a category and event types,
// one on a tag. Some messages lack the indexed field or carry it with
// another JSON type, so the index must skip them.

// IndexDefs are the indexes the runner creates before traffic.
var IndexDefs = []history.IndexDef{
	// Amounts of the deposits and withdrawals of the acct category.
	{Name: "amount", Category: "acct", Types: []string{"Deposit", "Withdraw"}, Field: "/amount", FieldType: "int"},
	// Owners of the messages tagged vip, in any stream.
	{Name: "owner", Tags: []string{"vip"}, Field: "/owner", FieldType: "string"},
}

// Value spaces: few values, so equality and range queries return many
// hits.
const (
	indexAmounts = 20
	indexOwners  = 20
	indexPage    = 1000 // hits per query (the server's most)
)

// body is a message of the indexes workload: a Deposit, Withdraw or Note
// with an amount and an owner (each missing or of another JSON type now
// and then), tagged vip about a third of the time.
func (w *worker) body() history.Body {
	types := []string{"Deposit", "Deposit", "Withdraw", "Note"}
	b := history.Body{Type: types[w.rng.IntN(len(types))]}
	data := fmt.Sprintf(`{"p":%d`, w.pid)
	switch r := w.rng.IntN(20); {
	case r == 0: // missing
	case r == 1:
		data += `,"amount":"12"` // a string: skipped by the int field
	case r == 2:
		data += `,"amount":1.5` // not an integer
	default:
		data += fmt.Sprintf(`,"amount":%d`, w.rng.IntN(indexAmounts))
	}
	switch r := w.rng.IntN(20); {
	case r == 0:
	case r == 1:
		data += `,"owner":7`
	default:
		data += fmt.Sprintf(`,"owner":"o%d"`, w.rng.IntN(indexOwners))
	}
	b.Data = data + "}"
	if w.rng.IntN(3) == 0 {
		b.Tags = []string{"vip"}
	}
	if w.rng.IntN(4) == 0 {
		b.Tags = append(b.Tags, fmt.Sprintf("t%d", w.rng.IntN(3)))
	}
	return b
}

// indexQuery picks a query: equality or a short range on the amount, or
// equality or a prefix on the owner.
func (w *worker) indexQuery() history.IndexQuery {
	str := func(s string) *string { return &s }
	switch w.rng.IntN(4) {
	case 0:
		return history.IndexQuery{Name: "amount", Equal: str(strconv.Itoa(w.rng.IntN(indexAmounts)))}
	case 1:
		a := w.rng.IntN(indexAmounts)
		q := history.IndexQuery{Name: "amount", From: str(strconv.Itoa(a)), To: str(strconv.Itoa(a + 3))}
		if w.rng.IntN(4) == 0 {
			q.To = nil // open-ended
		}
		return q
	case 2:
		return history.IndexQuery{Name: "owner", Equal: str(fmt.Sprintf("o%d", w.rng.IntN(indexOwners)))}
	}
	return history.IndexQuery{Name: "owner", Prefix: str(fmt.Sprintf("o%d", 1+w.rng.IntN(9)))}
}
