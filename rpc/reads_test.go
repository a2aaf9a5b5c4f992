package rpc

import (
	"reflect"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
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
