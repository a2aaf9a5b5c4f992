package node

import (
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// appended is an Append's answer in fsm's form, for tests that compare
// positions and the index.
func appended(res *fsmv1.Result, err error) (*fsm.AppendResult, error) {
	if err != nil {
		return nil, err
	}
	a := res.GetAppend()
	return &fsm.AppendResult{Namespace: a.Namespace, Stream: a.Stream, FirstPosition: a.FirstPosition, LastPosition: a.LastPosition,
		FirstGlobalPosition: a.FirstGlobalPosition, LastGlobalPosition: a.LastGlobalPosition, Index: res.Index, Duplicate: a.Duplicate}, nil
}
