package runner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/skalddb/skald/jepsen/internal/client"
	"github.com/skalddb/skald/jepsen/internal/history"
	"github.com/skalddb/skald/jepsen/internal/report"
)

// createIndexes declares defs through the first node that takes them,
// retrying within a deadline (a fresh cluster may still be electing).
func createIndexes(ctx context.Context, cl *client.Client, names []string, defs []history.IndexDef) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, d := range defs {
		for attempt := 0; ; attempt++ {
			err := cl.CreateIndex(ctx, names[attempt%len(names)], d)
			if err == nil {
				break
			}
			if !time.Now().Before(deadline) || ctx.Err() != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return nil
}

// finalIndexWait bounds how long the final index reads wait for a node's
// index loop to cover its final log.
const finalIndexWait = 30 * time.Second

// finalIndexes reads every index of defs whole from every node of final,
// at LOCAL, once the node's index loop covers its final log: it notes the
// node's applied index A (after the final reads settled), reads the index
// until its covered index reaches A, then reads the log again; a log that
// changed meanwhile (a late indeterminate write) replaces final[node] and
// the reads start over. A node whose index never covers its log is left
// out (the checker reports it unknown).
func finalIndexes(ctx context.Context, cl *client.Client, final map[string][]history.Event, defs []history.IndexDef, run *report.Run) map[string]map[string]history.IndexRead {
	out := map[string]map[string]history.IndexRead{}
	nodes := make([]string, 0, len(final))
	for n := range final {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		deadline := time.Now().Add(finalIndexWait)
		var why string
		for ctx.Err() == nil {
			if !time.Now().Before(deadline) {
				run.Errors = append(run.Errors, fmt.Sprintf("no-recovery: the indexes of %s never covered its final log: %s", n, why))
				break
			}
			reads, err := readIndexes(ctx, cl, n, defs)
			if err != nil {
				why = err.Error()
				time.Sleep(300 * time.Millisecond)
				continue
			}
			evs, err := readAll(ctx, cl, n)
			if err != nil {
				why = err.Error()
				time.Sleep(300 * time.Millisecond)
				continue
			}
			if !sameLog(evs, final[n]) {
				why = "its log changed while the indexes were read"
				final[n] = evs
				continue
			}
			out[n] = reads
			break
		}
	}
	return out
}

// readIndexes reads every index of defs on node once each covers the
// applied index node reported before the first read.
func readIndexes(ctx context.Context, cl *client.Client, node string, defs []history.IndexDef) (map[string]history.IndexRead, error) {
	_, applied, err := cl.ReadAll(ctx, node, 1, 1, history.Local)
	if err != nil {
		return nil, err
	}
	reads := map[string]history.IndexRead{}
	for _, d := range defs {
		r, err := cl.ReadIndex(ctx, node, d.Name)
		if err != nil {
			return nil, err
		}
		if r.Covered < applied {
			return nil, fmt.Errorf("index %s covers index %d < applied %d", d.Name, r.Covered, applied)
		}
		reads[d.Name] = r
	}
	return reads, nil
}

func sameLog(a, b []history.Event) bool { return slices.Equal(a, b) }
