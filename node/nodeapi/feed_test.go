package nodeapi

import (
	"errors"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestPublishWakesOnNewMessages: every answer that adds messages (or
// changes a group) wakes the namespace's watchers, a deletion ends them,
// and the rest (errors, skipped entries, other namespaces) leave them
// waiting.
func TestPublishWakesOnNewMessages(t *testing.T) {
	cases := []struct {
		name   string
		result any
		woken  bool
		ended  bool
	}{
		{"append", &fsmv1.Result{Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "app"}}}, true, false},
		{"append multi", &fsmv1.Result{Result: &fsmv1.Result_AppendMulti{AppendMulti: &fsmv1.AppendMultiResult{Namespace: "app"}}}, true, false},
		{"import", &fsmv1.Result{Result: &fsmv1.Result_Import{Import: &fsmv1.ImportResult{Namespace: "app"}}}, true, false},
		{"group", &fsmv1.Result{Result: &fsmv1.Result_Group{Group: &fsmv1.GroupResult{Namespace: "app"}}}, true, false},
		{"parked change", &fsmv1.Result{Result: &fsmv1.Result_ParkedChange{ParkedChange: &fsmv1.ParkedChangeResult{Namespace: "app"}}}, true, false},
		{"namespace deleted", &fsmv1.Result{Result: &fsmv1.Result_DeleteNamespace{DeleteNamespace: &fsmv1.DeleteNamespaceResult{Name: "app"}}}, true, true},
		{"another namespace", &fsmv1.Result{Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "other"}}}, false, false},
		{"rejected", errors.New("version conflict"), false, false},
		{"skipped", nil, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFeed()
			w := f.Watch("app")
			ch, _ := w.Changed()
			f.Publish([]any{c.result})
			woken := false
			select {
			case <-ch:
				woken = true
			default:
			}
			_, ended := w.Changed()
			if woken != c.woken || ended != c.ended {
				t.Fatalf("woken %v, ended %v; want %v, %v", woken, ended, c.woken, c.ended)
			}
		})
	}
}
