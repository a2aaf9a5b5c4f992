package node

import (
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// stamp fills the times the leader decides, and keeps one already given
// (an import's, a forwarded command's).
func TestStampTimes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name string
		cmd  func(given int64) *fsmv1.Command
		time func(*fsmv1.Command) int64
	}{
		{"append", func(g int64) *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{TimeUnixNano: g}}}
		}, func(c *fsmv1.Command) int64 { return c.GetAppend().TimeUnixNano }},
		{"append multi", func(g int64) *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: &fsmv1.AppendMulti{TimeUnixNano: g}}}
		}, func(c *fsmv1.Command) int64 { return c.GetAppendMulti().TimeUnixNano }},
		{"create namespace", func(g int64) *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespace{CreatedUnixNano: g}}}
		}, func(c *fsmv1.Command) int64 { return c.GetCreateNamespace().CreatedUnixNano }},
		{"create group", func(g int64) *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_CreateGroup{CreateGroup: &fsmv1.CreateGroup{CreatedUnixNano: g}}}
		}, func(c *fsmv1.Command) int64 { return c.GetCreateGroup().CreatedUnixNano }},
		{"create credential", func(g int64) *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_CreateCredential{CreateCredential: &fsmv1.CreateCredential{CreatedUnixNano: g}}}
		}, func(c *fsmv1.Command) int64 { return c.GetCreateCredential().CreatedUnixNano }},
		{"revoke credential", func(g int64) *fsmv1.Command {
			return &fsmv1.Command{Kind: &fsmv1.Command_RevokeCredential{RevokeCredential: &fsmv1.RevokeCredential{RevokedUnixNano: g}}}
		}, func(c *fsmv1.Command) int64 { return c.GetRevokeCredential().RevokedUnixNano }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cmd(0)
			stamp(kindOf(t, c), c, now)
			if got := tc.time(c); got != now.UnixNano() {
				t.Errorf("unset: stamped %d, want the leader's %d", got, now.UnixNano())
			}
			c = tc.cmd(42)
			stamp(kindOf(t, c), c, now)
			if got := tc.time(c); got != 42 {
				t.Errorf("given 42: stamped %d", got)
			}
		})
	}
}

// kindOf is cmd's row of the kinds table; the test fails without one.
func kindOf(t *testing.T, cmd *fsmv1.Command) fsm.Kind {
	t.Helper()
	k, ok := fsm.KindOf(cmd)
	if !ok {
		t.Fatalf("%T has no kind", cmd.GetKind())
	}
	return k
}
