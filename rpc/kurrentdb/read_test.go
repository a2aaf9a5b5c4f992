package kurrentdb

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
)

// numbers are the event numbers of evs.
func numbers(evs []*kurrentdb.ResolvedEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Event.EventNumber
	}
	return out
}

// globals are the commit positions of evs, failing when a prepare
// position differs.
func globals(t *testing.T, evs []*kurrentdb.ResolvedEvent) []uint64 {
	t.Helper()
	out := make([]uint64, len(evs))
	for i, e := range evs {
		if e.Event.Position.Commit != e.Event.Position.Prepare {
			t.Errorf("event %d: commit %d, prepare %d: want them equal", i, e.Event.Position.Commit, e.Event.Position.Prepare)
		}
		out[i] = e.Event.Position.Commit
	}
	return out
}

// appendN appends n events to stream, one append each.
func appendN(t *testing.T, cl *kurrentdb.Client, stream string, n int) {
	t.Helper()
	for i := range n {
		if _, err := cl.AppendToStream(ctxT(t), stream, kurrentdb.AppendToStreamOptions{},
			jsonEvent("Tick", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadStream(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "clock-1", 5)
	fwd, back := kurrentdb.Forwards, kurrentdb.Backwards
	atStart, atEnd := kurrentdb.Start{}, kurrentdb.End{}
	type opts = kurrentdb.ReadStreamOptions
	for _, c := range []struct {
		name  string
		opts  kurrentdb.ReadStreamOptions
		count uint64
		want  []uint64
	}{
		{"forwards from the start", opts{Direction: fwd, From: atStart}, 100, []uint64{0, 1, 2, 3, 4}},
		{"forwards with a count", opts{Direction: fwd, From: atStart}, 2, []uint64{0, 1}},
		{"forwards from a revision", opts{Direction: fwd, From: kurrentdb.Revision(3)}, 100, []uint64{3, 4}},
		{"forwards from the end", opts{Direction: fwd, From: atEnd}, 100, nil},
		{"backwards from the end", opts{Direction: back, From: atEnd}, 100, []uint64{4, 3, 2, 1, 0}},
		{"backwards with a count", opts{Direction: back, From: atEnd}, 1, []uint64{4}},
		{"backwards from a revision", opts{Direction: back, From: kurrentdb.Revision(2)}, 100, []uint64{2, 1, 0}},
		{"backwards from the start", opts{Direction: back, From: atStart}, 100, []uint64{0}},
	} {
		evs, err := readStream(t, cl, "clock-1", c.opts, c.count)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := numbers(evs); !slices.Equal(got, c.want) {
			t.Errorf("%s: event numbers %v, want %v", c.name, got, c.want)
		}
	}
}

func TestReadMissingStream(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "other-1", 1) // the namespace has events, the stream none
	_, err := readStream(t, cl, "missing-1", kurrentdb.ReadStreamOptions{}, 10)
	if err == nil {
		t.Fatal("read a stream that has no event")
	}
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("error code %d (%v), want ErrorCodeResourceNotFound", code, err)
	}
	if want := "stream 'missing-1' is not found"; !strings.Contains(err.Error(), want) {
		t.Errorf("%v does not say %q", err, want)
	}
}

// readAll reads $all with opts.
func readAll(t *testing.T, cl *kurrentdb.Client, opts kurrentdb.ReadAllOptions,
	count uint64) []*kurrentdb.ResolvedEvent {
	t.Helper()
	rs, err := cl.ReadAll(ctxT(t), opts, count)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []*kurrentdb.ResolvedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

func TestReadAll(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "a-1", 2) // global positions 1, 2
	appendN(t, cl, "b-1", 2) // 3, 4
	appendN(t, cl, "a-1", 1) // 5
	fwd, back := kurrentdb.Forwards, kurrentdb.Backwards
	atStart, atEnd := kurrentdb.Start{}, kurrentdb.End{}
	at := func(p uint64) kurrentdb.Position { return kurrentdb.Position{Commit: p, Prepare: p} }
	type opts = kurrentdb.ReadAllOptions
	for _, c := range []struct {
		name  string
		opts  kurrentdb.ReadAllOptions
		count uint64
		want  []uint64
	}{
		{"forwards from the start", opts{Direction: fwd, From: atStart}, 100, []uint64{1, 2, 3, 4, 5}},
		{"forwards with a count", opts{Direction: fwd, From: atStart}, 3, []uint64{1, 2, 3}},
		{"forwards from a position, inclusive", opts{Direction: fwd, From: at(3)}, 100, []uint64{3, 4, 5}},
		{"forwards from the end", opts{Direction: fwd, From: atEnd}, 100, nil},
		{"backwards from the end", opts{Direction: back, From: atEnd}, 100, []uint64{5, 4, 3, 2, 1}},
		{"backwards with a count", opts{Direction: back, From: atEnd}, 2, []uint64{5, 4}},
		{"backwards from a position, exclusive", opts{Direction: back, From: at(3)}, 100, []uint64{2, 1}},
		{"backwards from the start", opts{Direction: back, From: atStart}, 100, nil},
	} {
		evs := readAll(t, cl, c.opts, c.count)
		if got := globals(t, evs); !slices.Equal(got, c.want) {
			t.Errorf("%s: positions %v, want %v", c.name, got, c.want)
		}
	}
	evs := readAll(t, cl, kurrentdb.ReadAllOptions{From: atStart}, 100)
	var streams []string
	for _, e := range evs {
		streams = append(streams, fmt.Sprintf("%s@%d", e.Event.StreamID, e.Event.EventNumber))
	}
	if want := []string{"a-1@0", "a-1@1", "b-1@0", "b-1@1", "a-1@2"}; !slices.Equal(streams, want) {
		t.Errorf("$all holds %v, want %v", streams, want)
	}
}

// TestReadPages reads more events than one Skald page holds.
func TestReadPages(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	const n = readPage + 7
	events := make([]kurrentdb.EventData, n)
	for i := range events {
		events[i] = jsonEvent("Tick", fmt.Sprintf(`{"n":%d}`, i))
	}
	if _, err := cl.AppendToStream(ctxT(t), "many-1", kurrentdb.AppendToStreamOptions{}, events[:n/2]...); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AppendToStream(ctxT(t), "many-1", kurrentdb.AppendToStreamOptions{}, events[n/2:]...); err != nil {
		t.Fatal(err)
	}
	evs, err := readStream(t, cl, "many-1", kurrentdb.ReadStreamOptions{}, n+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n || evs[n-1].Event.EventNumber != n-1 || evs[n-1].Event.EventID != events[n-1].EventID {
		t.Fatalf("read %d events, want %d ending with number %d", len(evs), n, n-1)
	}
	back := readAll(t, cl, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, n+10)
	if len(back) != n || back[0].Event.Position.Commit != n || back[n-1].Event.Position.Commit != 1 {
		t.Fatalf("read %d events of $all backwards, want %d from %d to 1", len(back), n, n)
	}
}
