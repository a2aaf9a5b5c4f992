package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

func runAppend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("append", "skald append STREAM TYPE DATA-JSON|@FILE|- [--expected-version N] [--metadata JSON|@FILE] [--id UUID]", stderr)
	var expected optionalInt64
	fs.Var(&expected, "expected-version", "append only if the stream is at version `N` (-1: the stream has no message; default: any version)")
	metadata := fs.String("metadata", "", "metadata JSON object, or @FILE")
	id := fs.String("id", "", "message id (UUID); generated when empty. Appending an id again (same stream, type and data,\nwithin the namespace's dedupe window) writes nothing and prints the original position")
	rest, err := cf.parse(fs, args, 3, 3)
	if err != nil {
		return err
	}
	data, err := jsonArg("data", rest[2], os.Stdin)
	if err != nil {
		return err
	}
	var meta []byte
	if *metadata != "" {
		if meta, err = jsonArg("--metadata", *metadata, os.Stdin); err != nil {
			return err
		}
	}
	req := &skaldv1.AppendRequest{Stream: rest[0], Messages: []*skaldv1.NewMessage{{Id: *id, Type: rest[1], Data: data, Metadata: meta}}}
	if expected.set {
		req.ExpectedVersion = &expected.v
	}
	resp, err := cf.clients().events.Append(ctx, connect.NewRequest(req))
	if err != nil {
		return apiError(err)
	}
	if cf.output == "json" {
		return printJSON(stdout, resp.Msg)
	}
	if resp.Msg.Duplicate {
		fmt.Fprintf(stdout, "Already appended to %s at position %d (global position %d): the id was written before; nothing written.\n", rest[0], resp.Msg.FirstPosition, resp.Msg.FirstGlobalPosition)
		return nil
	}
	fmt.Fprintf(stdout, "Appended to %s at position %d (global position %d, index %d).\n", rest[0], resp.Msg.FirstPosition, resp.Msg.FirstGlobalPosition, resp.Msg.Index)
	return nil
}

// jsonArg reads a JSON argument: the text itself, @FILE for a file's
// content, or - for standard input (payloads beyond the argument size
// limit). Text that does not parse is a usage error naming the parser's
// complaint; the server still checks what the value must be.
func jsonArg(what, arg string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case arg == "-":
		b, err = io.ReadAll(stdin)
	case strings.HasPrefix(arg, "@"):
		b, err = os.ReadFile(arg[1:])
	default:
		b = []byte(arg)
	}
	if err != nil {
		return nil, &exitError{exitUsage, fmt.Errorf("%s: %w", what, err)}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, &exitError{exitUsage, fmt.Errorf("%s: invalid JSON: %v", what, err)}
	}
	return b, nil
}

// optionalInt64 is an int64 flag that knows whether it was given (its
// help shows no made-up default).
type optionalInt64 struct {
	v   int64
	set bool
}

func (o *optionalInt64) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optionalInt64) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	o.v, o.set = v, true
	return nil
}

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("read", "skald read STREAM [--position N] [--limit N]", stderr)
	position := fs.Int64("position", 0, "first stream position")
	limit := fs.Int64("limit", 0, "most messages (0: 1000, -1: all)")
	rest, err := cf.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	resp, err := cf.clients().events.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: rest[0], Position: *position, Limit: *limit}))
	if err != nil {
		return apiError(err)
	}
	return printMessages(stdout, cf.output, resp.Msg.Messages)
}

func runCategory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("category", "skald category NAME [--position GP] [--member M --size S] [--correlation C] [--limit N]", stderr)
	position := fs.Int64("position", 1, "first global position")
	member := fs.Int64("member", 0, "consumer group member (with --size)")
	size := fs.Int64("size", 0, "consumer group size")
	correlation := fs.String("correlation", "", "only messages correlated to this category")
	limit := fs.Int64("limit", 0, "most messages (0: 1000, -1: all)")
	rest, err := cf.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	req := &skaldv1.ReadCategoryRequest{Category: rest[0], GlobalPosition: *position, Limit: *limit, Correlation: *correlation}
	if *size != 0 || *member != 0 {
		req.ConsumerGroup = &skaldv1.ConsumerGroup{Member: *member, Size: *size}
	}
	resp, err := cf.clients().events.ReadCategory(ctx, connect.NewRequest(req))
	if err != nil {
		return apiError(err)
	}
	return printMessages(stdout, cf.output, resp.Msg.Messages)
}

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("tail", "skald tail [STREAM] [--category C [--member M --size S]] [--all] [--position N]", stderr)
	category := fs.String("category", "", "follow a category")
	all := fs.Bool("all", false, "follow the whole namespace")
	position := fs.Int64("position", 0, "start at this stream position (stream) or global position")
	member := fs.Int64("member", 0, "consumer group member (with --size)")
	size := fs.Int64("size", 0, "consumer group size")
	rest, err := cf.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	req := &skaldv1.SubscribeRequest{}
	switch {
	case len(rest) == 1 && *category == "" && !*all:
		req.Target, req.Position = &skaldv1.SubscribeRequest_Stream{Stream: rest[0]}, *position
	case len(rest) == 0 && *category != "" && !*all:
		req.Target, req.GlobalPosition = &skaldv1.SubscribeRequest_Category{Category: *category}, *position
		if *size != 0 || *member != 0 {
			req.ConsumerGroup = &skaldv1.ConsumerGroup{Member: *member, Size: *size}
		}
	case len(rest) == 0 && *category == "" && *all:
		req.Target, req.GlobalPosition = &skaldv1.SubscribeRequest_All{All: true}, *position
	default:
		return cf.usageError(fs, "give exactly one of STREAM, --category or --all")
	}
	st, err := cf.clients().events.Subscribe(ctx, connect.NewRequest(req))
	if err != nil {
		return apiError(err)
	}
	defer st.Close()
	enc := json.NewEncoder(stdout)
	for st.Receive() {
		switch ev := st.Msg().Event.(type) {
		case *skaldv1.SubscribeResponse_Message:
			if cf.output == "json" {
				if err := enc.Encode(toJSONMessage(ev.Message)); err != nil {
					return err
				}
				continue
			}
			m := ev.Message
			fmt.Fprintf(stdout, "%s\t%d\t%d\t%s\t%s\n", m.Stream, m.Position, m.GlobalPosition, m.Type, m.Data)
		case *skaldv1.SubscribeResponse_CaughtUp:
			fmt.Fprintln(stderr, "-- caught up; waiting for new messages (Ctrl-C to stop)")
		}
	}
	if ctx.Err() != nil {
		return nil // Ctrl-C
	}
	if err := st.Err(); err != nil {
		return apiError(err)
	}
	return nil
}
