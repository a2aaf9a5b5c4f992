package fsm

import (
	"fmt"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// BenchmarkReadAllTypes reads the 100 messages of a rare type among
// 100,000 untagged ones with ReadAllQuery's type filter: through the type
// index (a namespace whose index is complete) and by a scan (a legacy
// namespace, not backfilled yet).
func BenchmarkReadAllTypes(b *testing.B) {
	const total, perAppend = 100_000, 100
	for _, bc := range []struct {
		name   string
		create *fsmv1.Command
	}{{"index", createNSAllTypes("bench")}, {"scan", createNS("bench")}} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchStore(b)
			f := newFeeder(b, s)
			f.must(bc.create)
			var cmds []*fsmv1.Command
			for i := 0; i < total; i += perAppend {
				msgs := make([]*fsmv1.NewMessage, perAppend)
				for j := range msgs {
					typ := "Common"
					if (i+j)%1000 == 0 {
						typ = "Rare"
					}
					msgs[j] = newMsg(typ, string(payload200))
				}
				cmds = append(cmds, appendCmd("bench", fmt.Sprintf("s-%d", (i/perAppend)%100), msgs...))
				if len(cmds) == 16 {
					f.apply(cmds...)
					cmds = cmds[:0]
				}
			}
			f.apply(cmds...)
			benchViews(b, s, func(v *View) error {
				msgs, err := v.ReadAllQuery(AllQuery{Limit: -1, Filter: Filter{Types: []string{"Rare"}}})
				if err == nil && len(msgs) != total/1000 {
					err = fmt.Errorf("read %d messages, want %d", len(msgs), total/1000)
				}
				return err
			})
		})
	}
}
