package rpc

import (
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

func gpsOfWire(msgs []*skaldv1.Message) []int64 {
	out := []int64{}
	for _, m := range msgs {
		out = append(out, m.GlobalPosition)
	}
	return out
}

// Backward reads over Connect: newest first from the position given, -1
// from the end (limit N: the last N), at every consistency; a position
// below -1 is InvalidArgument on the field, and a forward read still
// refuses -1.
func TestReadBackwardConnect(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	ctx := ctxT(t)
	// gp 1..3 account-1 (positions 0..2), 4 account-2, 5 other-1.
	for _, a := range []struct {
		stream string
		n      int
	}{{"account-1", 3}, {"account-2", 1}, {"other-1", 1}} {
		msgs := make([]*skaldv1.NewMessage, a.n)
		for i := range msgs {
			msgs[i] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}
		}
		if _, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: a.stream, Messages: msgs})); err != nil {
			t.Fatal(err)
		}
	}
	lin := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LINEARIZABLE}
	local := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}
	stream := func(r *skaldv1.ReadStreamRequest) ([]int64, error) {
		resp, err := c.events.ReadStream(ctx, connect.NewRequest(r))
		if err != nil {
			return nil, err
		}
		return gpsOfWire(resp.Msg.Messages), nil
	}
	category := func(r *skaldv1.ReadCategoryRequest) ([]int64, error) {
		resp, err := c.events.ReadCategory(ctx, connect.NewRequest(r))
		if err != nil {
			return nil, err
		}
		return gpsOfWire(resp.Msg.Messages), nil
	}
	all := func(r *skaldv1.ReadAllRequest) ([]int64, error) {
		resp, err := c.events.ReadAll(ctx, connect.NewRequest(r))
		if err != nil {
			return nil, err
		}
		return gpsOfWire(resp.Msg.Messages), nil
	}
	cases := []struct {
		name  string
		read  func() ([]int64, error)
		want  []int64
		field string // InvalidArgument on this field
	}{
		{"stream from the end", func() ([]int64, error) {
			return stream(&skaldv1.ReadStreamRequest{Stream: "account-1", Position: -1, Backward: true})
		}, []int64{3, 2, 1}, ""},
		{"stream last 2, linearizable", func() ([]int64, error) {
			return stream(&skaldv1.ReadStreamRequest{Stream: "account-1", Position: -1, Limit: 2, Backward: true, Read: lin})
		}, []int64{3, 2}, ""},
		{"stream from position 1", func() ([]int64, error) {
			return stream(&skaldv1.ReadStreamRequest{Stream: "account-1", Position: 1, Backward: true, Read: local})
		}, []int64{2, 1}, ""},
		{"category last 2", func() ([]int64, error) {
			return category(&skaldv1.ReadCategoryRequest{Category: "account", GlobalPosition: -1, Limit: 2, Backward: true})
		}, []int64{4, 3}, ""},
		{"category from 2", func() ([]int64, error) {
			return category(&skaldv1.ReadCategoryRequest{Category: "account", GlobalPosition: 2, Backward: true, Read: lin})
		}, []int64{2, 1}, ""},
		{"all last 2", func() ([]int64, error) {
			return all(&skaldv1.ReadAllRequest{GlobalPosition: -1, Limit: 2, Backward: true})
		}, []int64{5, 4}, ""},
		{"all from the end", func() ([]int64, error) {
			return all(&skaldv1.ReadAllRequest{GlobalPosition: -1, Backward: true, Read: lin})
		}, []int64{5, 4, 3, 2, 1}, ""},
		{"stream position -2", func() ([]int64, error) {
			return stream(&skaldv1.ReadStreamRequest{Stream: "account-1", Position: -2, Backward: true})
		}, nil, "position"},
		{"category position -2", func() ([]int64, error) {
			return category(&skaldv1.ReadCategoryRequest{Category: "account", GlobalPosition: -2, Backward: true})
		}, nil, "global_position"},
		{"all position -5", func() ([]int64, error) {
			return all(&skaldv1.ReadAllRequest{GlobalPosition: -5, Backward: true})
		}, nil, "global_position"},
		{"forward -1 is still refused", func() ([]int64, error) {
			return all(&skaldv1.ReadAllRequest{GlobalPosition: -1})
		}, nil, "global_position"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if tc.field != "" {
				wantField(t, tc.name, err, tc.field)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("global positions %v, want %v", got, tc.want)
			}
		})
	}
}

// Filters over Connect: ReadAll and ReadCategory keep the messages of
// some types and stream-name prefix (untagged ones too: the type index
// holds every message), forward and backward; bad filters are
// InvalidArgument on the field.
func TestReadFilteredConnect(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	ctx := ctxT(t)
	// gp 1 acct-1 A, 2 acct-1 B, 3 acct-22 A, 4 order-1 A (tagged), 5 order-1 C.
	for _, a := range []struct{ stream, typ, tag string }{
		{"acct-1", "A", ""}, {"acct-1", "B", ""}, {"acct-22", "A", ""}, {"order-1", "A", "o:1"}, {"order-1", "C", ""},
	} {
		m := &skaldv1.NewMessage{Type: a.typ, Data: []byte(`{}`)}
		if a.tag != "" {
			m.Tags = []string{a.tag}
		}
		if _, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: a.stream, Messages: []*skaldv1.NewMessage{m}})); err != nil {
			t.Fatal(err)
		}
	}
	lin := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LINEARIZABLE}
	all := func(r *skaldv1.ReadAllRequest) ([]int64, error) {
		resp, err := c.events.ReadAll(ctx, connect.NewRequest(r))
		if err != nil {
			return nil, err
		}
		return gpsOfWire(resp.Msg.Messages), nil
	}
	category := func(r *skaldv1.ReadCategoryRequest) ([]int64, error) {
		resp, err := c.events.ReadCategory(ctx, connect.NewRequest(r))
		if err != nil {
			return nil, err
		}
		return gpsOfWire(resp.Msg.Messages), nil
	}
	cases := []struct {
		name  string
		read  func() ([]int64, error)
		want  []int64
		field string
	}{
		{"all of type A", func() ([]int64, error) { return all(&skaldv1.ReadAllRequest{Types: []string{"A"}}) }, []int64{1, 3, 4}, ""},
		{"all of types A or C from 2", func() ([]int64, error) {
			return all(&skaldv1.ReadAllRequest{GlobalPosition: 2, Types: []string{"C", "A"}, Read: lin})
		}, []int64{3, 4, 5}, ""},
		{"all of prefix acct-1", func() ([]int64, error) { return all(&skaldv1.ReadAllRequest{StreamPrefix: "acct-1"}) }, []int64{1, 2}, ""},
		{"all of type A and prefix acct-, last 1", func() ([]int64, error) {
			return all(&skaldv1.ReadAllRequest{Types: []string{"A"}, StreamPrefix: "acct-", GlobalPosition: -1, Limit: 1, Backward: true})
		}, []int64{3}, ""},
		{"all of type A, limit 2", func() ([]int64, error) { return all(&skaldv1.ReadAllRequest{Types: []string{"A"}, Limit: 2}) }, []int64{1, 3}, ""},
		{"category of type A", func() ([]int64, error) {
			return category(&skaldv1.ReadCategoryRequest{Category: "acct", Types: []string{"A"}})
		}, []int64{1, 3}, ""},
		{"category of prefix acct-2, backward", func() ([]int64, error) {
			return category(&skaldv1.ReadCategoryRequest{Category: "acct", StreamPrefix: "acct-2", GlobalPosition: -1, Backward: true})
		}, []int64{3}, ""},
		{"empty type", func() ([]int64, error) { return all(&skaldv1.ReadAllRequest{Types: []string{"A", ""}}) }, nil, "types[1]"},
		{"prefix with NUL", func() ([]int64, error) {
			return category(&skaldv1.ReadCategoryRequest{Category: "acct", StreamPrefix: "a\x00"})
		}, nil, "stream_prefix"},
		{"33 types", func() ([]int64, error) {
			types := make([]string, 33)
			for i := range types {
				types[i] = "T"
			}
			return all(&skaldv1.ReadAllRequest{Types: types})
		}, nil, "types"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if tc.field != "" {
				wantField(t, tc.name, err, tc.field)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("global positions %v, want %v", got, tc.want)
			}
		})
	}
}

// A category read after a state vector, on Connect (state_vector) and as
// the EventoDB extension (category.get's stateVector): per stream, what
// comes after the position held, and every message of the streams not
// named; bad vectors are refused naming the stream.
func TestReadCategoryStateVector(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	ctx := ctxT(t)
	// gp 1..3 acct-1 (positions 0..2), 4..5 acct-2 (0..1), 6 acct-3 (0), 7 order-1.
	for _, a := range []struct {
		stream string
		n      int
	}{{"acct-1", 3}, {"acct-2", 2}, {"acct-3", 1}, {"order-1", 1}} {
		msgs := make([]*skaldv1.NewMessage, a.n)
		for i := range msgs {
			msgs[i] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}
		}
		if _, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: a.stream, Messages: msgs})); err != nil {
			t.Fatal(err)
		}
	}
	held := map[string]int64{"acct-1": 1, "acct-2": 1}
	want := []int64{3, 6} // acct-1 position 2; acct-3, not named
	lin := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LINEARIZABLE}
	for _, tc := range []struct {
		name string
		req  *skaldv1.ReadCategoryRequest
		want []int64
	}{
		{"after the vector", &skaldv1.ReadCategoryRequest{Category: "acct", StateVector: held, Read: lin}, want},
		{"limit 1", &skaldv1.ReadCategoryRequest{Category: "acct", StateVector: held, Limit: 1}, []int64{3}},
		{"backward", &skaldv1.ReadCategoryRequest{Category: "acct", StateVector: held, GlobalPosition: -1, Backward: true}, []int64{6, 3}},
		{"nothing held", &skaldv1.ReadCategoryRequest{Category: "acct", StateVector: map[string]int64{}}, []int64{1, 2, 3, 4, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.events.ReadCategory(ctx, connect.NewRequest(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			if got := gpsOfWire(r.Msg.Messages); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("global positions %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		sv    map[string]int64
		field string
	}{
		{"another category", map[string]int64{"acct-1": 0, "order-1": 0}, `state_vector["order-1"]`},
		{"negative", map[string]int64{"acct-1": -1}, `state_vector["acct-1"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.events.ReadCategory(ctx, connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "acct", StateVector: tc.sv}))
			wantField(t, tc.name, err, tc.field)
		})
	}

	// EventoDB: the same read as a category.get option; an SDK that does
	// not send it reads as before.
	ev := evClient{t, s.addr, adminToken}
	gpsOfEv := func(rows [][]any) []int64 {
		out := []int64{}
		for _, r := range rows {
			out = append(out, int64(r[4].(float64))) // category format: global position is the 5th
		}
		return out
	}
	var rows [][]any
	ev.ok(&rows, "category.get", "acct", map[string]any{"stateVector": held})
	if got := gpsOfEv(rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("category.get with stateVector: %v, want %v", got, want)
	}
	ev.ok(&rows, "category.get", "acct", map[string]any{"stateVector": held, "batchSize": -1})
	if got := gpsOfEv(rows); !reflect.DeepEqual(got, want) {
		t.Fatalf("category.get with stateVector, batchSize -1: %v, want %v", got, want)
	}
	ev.ok(&rows, "category.get", "acct", map[string]any{})
	if got := gpsOfEv(rows); !reflect.DeepEqual(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("category.get without stateVector: %v", got)
	}
	ev.fails(400, "INVALID_REQUEST", "category.get", "acct", map[string]any{"stateVector": []int{1}})
	ev.fails(400, "INVALID_REQUEST", "category.get", "acct", map[string]any{"stateVector": map[string]any{"acct-1": 1.5}})
	status, body := ev.call("category.get", "acct", map[string]any{"stateVector": map[string]any{"order-1": 0}})
	checkEvError(t, "stateVector of another category", status, body, 400, "INVALID_REQUEST")
	if !strings.Contains(string(body), `stateVector[\"order-1\"]`) {
		t.Fatalf("stateVector of another category: %s, want the stream named", body)
	}
}
