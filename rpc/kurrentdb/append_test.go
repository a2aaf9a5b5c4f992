package kurrentdb

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
)

// jsonEvent is an application/json event of type typ with data.
func jsonEvent(typ, data string) kurrentdb.EventData {
	return kurrentdb.EventData{EventID: uuid.New(), EventType: typ, ContentType: kurrentdb.ContentTypeJson,
		Data: []byte(data)}
}

// readStream reads every event of stream with opts, or the client's error.
func readStream(t *testing.T, cl *kurrentdb.Client, stream string, opts kurrentdb.ReadStreamOptions,
	count uint64) ([]*kurrentdb.ResolvedEvent, error) {
	t.Helper()
	rs, err := cl.ReadStream(ctxT(t), stream, opts, count)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []*kurrentdb.ResolvedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// errorCode is the client's error code of err, failing the test when
// err is not the client's error.
func errorCode(t *testing.T, err error) kurrentdb.ErrorCode {
	t.Helper()
	var e *kurrentdb.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *kurrentdb.Error", err, err)
	}
	return e.Code()
}

func TestAppendAndReadBack(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	first, second := jsonEvent("OrderPlaced", `{"order":1}`), jsonEvent("OrderPaid", `{"order":1,"paid":true}`)
	first.Metadata = []byte(`{"correlation":"c-1"}`)
	before := time.Now()
	res, err := cl.AppendToStream(ctxT(t), "order-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}},
		first, second)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextExpectedVersion != 1 {
		t.Errorf("next expected version %d, want 1", res.NextExpectedVersion)
	}
	if res.CommitPosition != 2 || res.PreparePosition != 2 {
		t.Errorf("position %d/%d, want 2/2 (the second event of the namespace)", res.CommitPosition, res.PreparePosition)
	}
	evs, err := readStream(t, cl, "order-1", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("read %d events, want 2", len(evs))
	}
	for i, want := range []kurrentdb.EventData{first, second} {
		got := evs[i].Event
		if got.EventID != want.EventID || got.EventType != want.EventType || !bytes.Equal(got.Data, want.Data) ||
			got.EventNumber != uint64(i) || got.StreamID != "order-1" || got.ContentType != "application/json" {
			t.Errorf("event %d: id %s type %q data %s number %d stream %q content type %q; want id %s type %q data %s number %d",
				i, got.EventID, got.EventType, got.Data, got.EventNumber, got.StreamID, got.ContentType,
				want.EventID, want.EventType, want.Data, i)
		}
		if got.Position.Commit != uint64(i+1) || got.Position.Prepare != uint64(i+1) {
			t.Errorf("event %d: position %v, want %d/%d", i, got.Position, i+1, i+1)
		}
		if d := got.CreatedDate.Sub(before); d < -time.Minute || d > time.Minute {
			t.Errorf("event %d: created %s, not within a minute of %s", i, got.CreatedDate, before)
		}
	}
	if got := string(evs[0].Event.UserMetadata); got != `{"correlation":"c-1"}` {
		t.Errorf("custom metadata %q, want the one appended", got)
	}
	if got := string(evs[1].Event.UserMetadata); got != "" {
		t.Errorf("custom metadata of an event appended without %q, want none", got)
	}
}

func TestExpectedRevision(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	const stream = "cart-7"
	for _, c := range []struct {
		name  string
		state kurrentdb.StreamState
		want  uint64 // next expected version on success
		wrong string // the client's message on a wrong expected version ("": success)
	}{
		{"stream exists before it does", kurrentdb.StreamExists{}, 0, "expecting 'stream_exists' but got 'no_stream'"},
		{"revision before the stream", kurrentdb.Revision(0), 0, "expecting '0' but got 'no_stream'"},
		{"no stream", kurrentdb.NoStream{}, 0, ""},
		{"no stream again", kurrentdb.NoStream{}, 0, "expecting 'no_stream' but got '0'"},
		{"exact", kurrentdb.Revision(0), 1, ""},
		{"stale revision", kurrentdb.Revision(0), 0, "expecting '0' but got '1'"},
		{"revision ahead", kurrentdb.Revision(5), 0, "expecting '5' but got '1'"},
		{"stream exists", kurrentdb.StreamExists{}, 2, ""},
		{"any", kurrentdb.Any{}, 3, ""},
	} {
		res, err := cl.AppendToStream(ctxT(t), stream, kurrentdb.AppendToStreamOptions{StreamState: c.state},
			jsonEvent("Added", `{"item":"x"}`))
		if c.wrong == "" {
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if res.NextExpectedVersion != c.want {
				t.Errorf("%s: next expected version %d, want %d", c.name, res.NextExpectedVersion, c.want)
			}
			continue
		}
		if err == nil {
			t.Fatalf("%s: appended (next expected version %d), want a wrong expected version", c.name, res.NextExpectedVersion)
		}
		if code := errorCode(t, err); code != kurrentdb.ErrorCodeWrongExpectedVersion {
			t.Errorf("%s: error code %d (%v), want ErrorCodeWrongExpectedVersion", c.name, code, err)
		}
		if !strings.Contains(err.Error(), c.wrong) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.wrong)
		}
	}
	evs, err := readStream(t, cl, stream, kurrentdb.ReadStreamOptions{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Errorf("the stream holds %d events, want the 4 appended (refused appends write nothing)", len(evs))
	}
}

func TestAppendRefusesBadInput(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	for _, c := range []struct {
		name string
		ev   kurrentdb.EventData
		says string
	}{
		{"binary data", kurrentdb.EventData{EventType: "Blob", ContentType: kurrentdb.ContentTypeBinary,
			Data: []byte{0x0b, 0x0e, 0x0e, 0x0f}},
			`content type "application/octet-stream" is not stored`},
		{"not JSON", kurrentdb.EventData{EventType: "Bad", ContentType: kurrentdb.ContentTypeJson, Data: []byte("not json")},
			"data must be a JSON object"},
		{"JSON array", kurrentdb.EventData{EventType: "Bad", ContentType: kurrentdb.ContentTypeJson, Data: []byte("[1,2]")},
			"data must be a JSON object"},
		{"custom metadata not JSON", kurrentdb.EventData{EventType: "Bad", ContentType: kurrentdb.ContentTypeJson,
			Data: []byte(`{}`), Metadata: []byte{0x01}}, "custom metadata must be empty or a JSON object"},
		{"no type", kurrentdb.EventData{ContentType: kurrentdb.ContentTypeJson, Data: []byte(`{}`)}, "must give its type"},
	} {
		_, err := cl.AppendToStream(ctxT(t), "bad-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.Any{}},
			jsonEvent("Fine", `{}`), c.ev, jsonEvent("Fine", `{}`)) // refused in the middle of the stream
		if err == nil {
			t.Fatalf("%s: appended", c.name)
		}
		if !strings.Contains(err.Error(), "InvalidArgument") || !strings.Contains(err.Error(), "event 1") ||
			!strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want InvalidArgument saying event 1 %q", c.name, err, c.says)
		}
	}
	_, err := readStream(t, cl, "bad-1", kurrentdb.ReadStreamOptions{}, 10)
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("read after refused appends: %v, want the stream not found (nothing written)", err)
	}
}

// TestAppendNothing: an append of no event writes nothing and answers
// with the stream's revision, or a wrong expected revision.
func TestAppendNothing(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "empty-1", 2)
	res, err := cl.AppendToStream(ctxT(t), "empty-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.Revision(1)})
	if err != nil {
		t.Fatal(err)
	}
	if res.NextExpectedVersion != 1 || res.CommitPosition != 0 {
		t.Errorf("next expected version %d at %d, want 1 and no position", res.NextExpectedVersion, res.CommitPosition)
	}
	_, err = cl.AppendToStream(ctxT(t), "empty-1", kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}})
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeWrongExpectedVersion {
		t.Errorf("an empty append expecting no stream: %v, want a wrong expected version", err)
	}
	evs, err := readStream(t, cl, "empty-1", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil || len(evs) != 2 {
		t.Errorf("the stream holds %d events (%v), want 2", len(evs), err)
	}
}

// TestAppendSameIDs: events appended again with the same ids are
// answered as the first append was and written once.
func TestAppendSameIDs(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	evs := []kurrentdb.EventData{jsonEvent("A", `{"n":1}`), jsonEvent("B", `{"n":2}`)}
	anyState := kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.Any{}}
	first, err := cl.AppendToStream(ctxT(t), "again-1", anyState, evs...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cl.AppendToStream(ctxT(t), "again-1", anyState, evs...)
	if err != nil {
		t.Fatal(err)
	}
	if *again != *first {
		t.Errorf("the repeated append answered %+v, want the first's %+v", *again, *first)
	}
	read, err := readStream(t, cl, "again-1", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil || len(read) != 2 {
		t.Errorf("the stream holds %d events (%v), want 2", len(read), err)
	}
}
