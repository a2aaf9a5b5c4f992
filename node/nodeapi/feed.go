package nodeapi

import (
	"sync"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Feed wakes local subscribers when a namespace changes. It carries no
// data: a subscriber reads what it has not seen from the store, so it can
// skip or repeat nothing, and waking it costs apply one channel close, so a
// slow subscriber never slows apply.
//
// The pattern for a subscriber:
//
//	w := feed.Watch(ns)
//	for {
//		changed, ended := w.Changed() // take the channel before reading
//		if ended { stop }
//		read everything after the last position; if anything, send it and continue
//		wait for changed (or the caller's context)
//	}
type Feed struct {
	mu     sync.Mutex
	topics map[string]*topic
}

type topic struct {
	ch    chan struct{} // closed at the next change
	ended bool          // namespace deleted, or state replaced by a restore
}

// NewFeed returns a feed nobody watches yet.
func NewFeed() *Feed { return &Feed{topics: make(map[string]*topic)} }

// Watch is one subscriber's view of a namespace's changes.
type Watch struct {
	f *Feed
	t *topic
}

// Watch starts watching namespace ns.
func (f *Feed) Watch(ns string) *Watch {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[ns]
	if !ok {
		t = &topic{ch: make(chan struct{})}
		f.topics[ns] = t
	}
	return &Watch{f: f, t: t}
}

// Changed returns a channel closed at the next change of the namespace,
// and whether the watch has ended: the namespace was deleted (or the whole
// state was restored from a snapshot) since Watch.
func (w *Watch) Changed() (<-chan struct{}, bool) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.t.ch, w.t.ended
}

// Publish wakes the watchers of every namespace a batch changed: results
// are what fsm.Store.ApplyBatch returned for it. The node calls it after
// every applied batch.
func (f *Feed) Publish(results []any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range results {
		r, ok := r.(*fsmv1.Result)
		if !ok {
			continue // a business error or a skipped entry: nothing changed
		}
		switch r := r.Result.(type) {
		case *fsmv1.Result_Append:
			f.wakeLocked(r.Append.Namespace)
		case *fsmv1.Result_AppendMulti:
			f.wakeLocked(r.AppendMulti.Namespace)
		case *fsmv1.Result_Import:
			f.wakeLocked(r.Import.Namespace)
		case *fsmv1.Result_Group:
			f.wakeLocked(r.Group.Namespace) // a group's owner rereads its record
		case *fsmv1.Result_ParkedChange:
			f.wakeLocked(r.ParkedChange.Namespace)
		case *fsmv1.Result_DeleteNamespace:
			f.endLocked(r.DeleteNamespace.Name)
		}
	}
}

func (f *Feed) wakeLocked(ns string) {
	t, ok := f.topics[ns]
	if !ok {
		return // nobody watches
	}
	close(t.ch)
	t.ch = make(chan struct{})
}

func (f *Feed) endLocked(ns string) {
	t, ok := f.topics[ns]
	if !ok {
		return
	}
	t.ended = true
	close(t.ch)
	delete(f.topics, ns)
}

// EndAll ends every watch: the state was replaced wholesale (the node
// restored a snapshot).
func (f *Feed) EndAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ns := range f.topics {
		f.endLocked(ns)
	}
}
