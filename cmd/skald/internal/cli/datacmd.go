package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

func runAppend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		expected                  optionalInt64
		metadata, id              *string
		after                     *int64
		tags, failTypes, failTags stringList
		opts                      []client.AppendOption
		data, meta                []byte
	)
	return command.Command[client.AppendResult]{
		Name: "append", Usage: "skald append STREAM TYPE DATA-JSON|@FILE|- [--expected-version N] [--metadata JSON|@FILE] [--id UUID] [--tag T]... [--fail-if-type T]... [--fail-if-tag T]... [--after GP]",
		MinArgs: 3, MaxArgs: 3,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			fs.Var(&expected, "expected-version", "append only if the stream is at version `N` (-1: the stream has no message; default: any version)")
			metadata = fs.String("metadata", "", "metadata JSON object, or @FILE")
			id = fs.String("id", "", "message id (UUID); generated when empty. Appending an id again (same stream, type, data and tags,\nwithin the namespace's dedupe window) writes nothing and prints the original position")
			fs.Var(&tags, "tag", "a tag of the message (repeat for several; at most 32), e.g. course:c1")
			fs.Var(&failTypes, "fail-if-type", "condition: fail if a message of this `type` (repeat: any of them) and every --fail-if-tag exists after --after")
			fs.Var(&failTags, "fail-if-tag", "condition: fail if a message with this `tag` (repeat: all of them) exists after --after")
			after = fs.Int64("after", 0, "the condition's global position: only later messages count (0: any)")
			return func(args []string) error {
				if len(failTypes) > 0 || len(failTags) > 0 {
					opts = append(opts, client.FailIfMatch(client.Query{{Types: failTypes, Tags: failTags}}, *after))
				} else if *after != 0 {
					return command.Exit(command.ExitUsage, errors.New("--after is the position of a condition: give --fail-if-type or --fail-if-tag"))
				}
				var err error
				if data, err = jsonArg("data", args[2], os.Stdin); err != nil {
					return err
				}
				if *metadata != "" {
					if meta, err = jsonArg("--metadata", *metadata, os.Stdin); err != nil {
						return err
					}
				}
				if expected.set {
					opts = append(opts, client.ExpectVersion(expected.v))
				}
				return nil
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (client.AppendResult, error) {
			return c.Append(ctx, args[0], []client.NewMessage{{ID: *id, Type: args[1], Data: data, Metadata: meta, Tags: tags}}, opts...)
		},
		Text: func(w io.Writer, args []string, res client.AppendResult) error {
			if res.Duplicate {
				fmt.Fprintf(w, "Already appended to %s at position %d (global position %d): the id was written before; nothing written.\n", args[0], res.FirstPosition, res.FirstGlobalPosition)
				return nil
			}
			fmt.Fprintf(w, "Appended to %s at position %d (global position %d, index %d).\n", args[0], res.FirstPosition, res.FirstGlobalPosition, res.Index)
			return nil
		},
		JSON: func(res client.AppendResult) any { return appendReply(res) }, // without the message ids
	}.Run(ctx, args, stdout, stderr)
}

// jsonArg reads a JSON argument: the text itself, @FILE for a file's
// content, or - for standard input (payloads beyond the argument size
// limit). What a file or stdin holds is taken without the whitespace
// around it (the newline that ends a file, or echo's), which JSON ignores
// but the message would keep. Text that does not parse is a usage error
// naming the parser's complaint; the server still checks what the value
// must be.
func jsonArg(what, arg string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case arg == "-":
		b, err = io.ReadAll(stdin)
		b = bytes.TrimSpace(b)
	case strings.HasPrefix(arg, "@"):
		b, err = os.ReadFile(arg[1:])
		b = bytes.TrimSpace(b)
	default:
		b = []byte(arg)
	}
	if err != nil {
		return nil, command.Exit(command.ExitUsage, fmt.Errorf("%s: %w", what, err))
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, command.Exit(command.ExitUsage, fmt.Errorf("%s: invalid JSON: %v", what, err))
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
	cmd := readCommand("read", "skald read STREAM [--position N] [--limit N] [--backward] [--last N]", 1, 1, stderr)
	var position, limit *int64
	var dir *directionFlags
	cmd.Flags = func(fs *flag.FlagSet) func([]string) error {
		position = fs.Int64("position", 0, "first stream position (with --backward or --last: the highest; default the end)")
		limit = fs.Int64("limit", 0, "most messages (0: 1000, -1: all)")
		dir = addDirectionFlags(fs)
		return func([]string) error { return dir.resolve(fs, position, limit) }
	}
	cmd.Call = func(ctx context.Context, c *client.Client, args []string) (page, error) {
		msgs, err := c.ReadStream(ctx, client.StreamQuery{Stream: args[0], Position: *position, Limit: *limit, Backward: dir.reads()})
		if err != nil || dir.reads() {
			return page{msgs: dir.order(msgs)}, err
		}
		return readPage(ctx, msgs, *limit, func(ctx context.Context, last client.Message) (bool, error) {
			more, err := c.ReadStream(ctx, client.StreamQuery{Stream: args[0], Position: last.Position + 1, Limit: 1})
			return len(more) > 0, err
		}, func(last client.Message) readOn {
			return readOn{last.Position + 1, command.ShellArgs("skald", "read", args[0], "--position", strconv.FormatInt(last.Position+1, 10))}
		})
	}
	return cmd.Run(ctx, args, stdout, stderr)
}

func runAll(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := readCommand("all", "skald all [--position GP] [--type T]... [--prefix P] [--limit N] [--backward] [--last N]", 0, 0, stderr)
	var position, limit *int64
	var dir *directionFlags
	var flt *filterFlags
	cmd.Flags = func(fs *flag.FlagSet) func([]string) error {
		position = fs.Int64("position", 1, "first global position (with --backward or --last: the highest; default the end)")
		limit = fs.Int64("limit", 0, "most messages (0: 1000, -1: all)")
		dir = addDirectionFlags(fs)
		flt = addFilterFlags(fs)
		return func([]string) error { return dir.resolve(fs, position, limit) }
	}
	cmd.Call = func(ctx context.Context, c *client.Client, _ []string) (page, error) {
		msgs, err := c.ReadAllQuery(ctx, client.AllQuery{GlobalPosition: *position, Limit: *limit, Backward: dir.reads(),
			Types: flt.types, StreamPrefix: *flt.prefix})
		if err != nil || dir.reads() {
			return page{msgs: dir.order(msgs)}, err
		}
		return readPage(ctx, msgs, *limit, func(ctx context.Context, last client.Message) (bool, error) {
			more, err := c.ReadAllQuery(ctx, client.AllQuery{GlobalPosition: last.GlobalPosition + 1, Limit: 1, Types: flt.types, StreamPrefix: *flt.prefix})
			return len(more) > 0, err
		}, func(last client.Message) readOn {
			args := []string{"skald", "all", "--position", strconv.FormatInt(last.GlobalPosition+1, 10)}
			args = append(args, flt.args()...)
			return readOn{last.GlobalPosition + 1, command.ShellArgs(args...)}
		})
	}
	return cmd.Run(ctx, args, stdout, stderr)
}

// filterFlags are skald all's and category's --type and --prefix.
type filterFlags struct {
	types  stringList
	prefix *string
}

// args are the flags that repeat f, for a command line that reads on.
func (f *filterFlags) args() []string {
	var out []string
	for _, t := range f.types {
		out = append(out, "--type", t)
	}
	if *f.prefix != "" {
		out = append(out, "--prefix", *f.prefix)
	}
	return out
}

func addFilterFlags(fs *flag.FlagSet) *filterFlags {
	f := &filterFlags{}
	fs.Var(&f.types, "type", "messages of this `type` (repeat: any of them)")
	f.prefix = fs.String("prefix", "", "messages of streams whose name starts with this")
	return f
}

// directionFlags are the read commands' --backward and --last N.
type directionFlags struct {
	backward *bool
	last     *int64
}

func addDirectionFlags(fs *flag.FlagSet) *directionFlags {
	return &directionFlags{
		backward: fs.Bool("backward", false, "newest first, from --position down (default: from the end)"),
		last:     fs.Int64("last", 0, "the last N messages (at or below --position), oldest first unless --backward"),
	}
}

// reads reports whether the server reads backward.
func (d *directionFlags) reads() bool { return *d.backward || *d.last > 0 }

// resolve sets the read's start and limit: a backward read without
// --position starts at the end (-1), and --last N is a backward read of
// N. fs is parsed.
func (d *directionFlags) resolve(fs *flag.FlagSet, position, limit *int64) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["last"] {
		if *d.last < 1 {
			return command.Mistake("--last %d: want 1 or more", *d.last)
		}
		if given["limit"] {
			return command.Mistake("--last and --limit: give one")
		}
		*limit = *d.last
	}
	if d.reads() && !given["position"] {
		*position = -1
	}
	return nil
}

// order puts a --last read back in position order, unless --backward.
func (d *directionFlags) order(msgs []client.Message) []client.Message {
	if *d.last > 0 && !*d.backward {
		slices.Reverse(msgs)
	}
	return msgs
}

// queryFlags are the flags that give a query: --type and --tag (one
// item), or --query (a whole query, JSON). skald query and skald sub
// create share them.
type queryFlags struct {
	types, tags stringList
	query       *string
}

func addQueryFlags(fs *flag.FlagSet) *queryFlags {
	f := &queryFlags{}
	fs.Var(&f.types, "type", "messages of this `type` (repeat: any of them)")
	fs.Var(&f.tags, "tag", "messages carrying this `tag` (repeat: all of them)")
	f.query = fs.String("query", "", `a whole query instead, JSON or @FILE: {"items":[{"types":["T"],"tags":["a","b"]}, ...]} (items OR'd)`)
	return f
}

// set reports whether any of the flags was given.
func (f *queryFlags) set() bool { return *f.query != "" || len(f.types) > 0 || len(f.tags) > 0 }

// build returns the query the flags give (a usage error for none, or for
// --query with --type/--tag). The server checks the query itself.
func (f *queryFlags) build() (client.Query, error) {
	var q client.Query
	switch {
	case *f.query != "" && (len(f.types) > 0 || len(f.tags) > 0):
		return nil, command.Exit(command.ExitUsage, errors.New("give --query or --type/--tag, not both"))
	case *f.query != "":
		raw, err := jsonArg("--query", *f.query, os.Stdin)
		if err != nil {
			return nil, err
		}
		var j struct {
			Items []struct {
				Types []string `json:"types"`
				Tags  []string `json:"tags"`
			} `json:"items"`
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			return nil, command.Exit(command.ExitUsage, fmt.Errorf("--query: %v", err))
		}
		for _, it := range j.Items {
			q = append(q, client.QueryItem{Types: it.Types, Tags: it.Tags})
		}
	case len(f.types) > 0 || len(f.tags) > 0:
		q = client.Query{{Types: f.types, Tags: f.tags}}
	default:
		return nil, command.Exit(command.ExitUsage, errors.New("give --type, --tag or --query"))
	}
	return q, nil
}

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := readCommand("query", "skald query [--type T]... [--tag T]... [--query JSON|@FILE] [--after GP] [--limit N]", 0, 0, stderr)
	var qf *queryFlags
	var after, limit *int64
	var q client.Query
	cmd.Flags = func(fs *flag.FlagSet) func([]string) error {
		qf = addQueryFlags(fs)
		after = fs.Int64("after", 0, "only messages whose global position is above this")
		limit = fs.Int64("limit", 0, "most messages (0: 1000, -1: all)")
		return func([]string) (err error) {
			q, err = qf.build()
			return err
		}
	}
	cmd.Call = func(ctx context.Context, c *client.Client, _ []string) (page, error) {
		msgs, err := c.Query(ctx, q, *after, *limit)
		if err != nil {
			return page{}, err
		}
		return readPage(ctx, msgs, *limit, func(ctx context.Context, last client.Message) (bool, error) {
			more, err := c.Query(ctx, q, last.GlobalPosition, 1)
			return len(more) > 0, err
		}, func(last client.Message) readOn {
			args := []string{"skald", "query"}
			for _, t := range qf.types {
				args = append(args, "--type", t)
			}
			for _, t := range qf.tags {
				args = append(args, "--tag", t)
			}
			if *qf.query != "" {
				args = append(args, "--query", *qf.query)
			}
			return readOn{last.GlobalPosition, command.ShellArgs(append(args, "--after", strconv.FormatInt(last.GlobalPosition, 10))...)}
		})
	}
	return cmd.Run(ctx, args, stdout, stderr)
}

func runCategory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := readCommand("category", "skald category NAME [--position GP] [--member M --size S] [--correlation C] [--type T]... [--prefix P] [--held STREAM=POS]... [--limit N] [--backward] [--last N]", 1, 1, stderr)
	var position, member, size, limit *int64
	var held stringList
	var correlation *string
	var dir *directionFlags
	var flt *filterFlags
	var sv map[string]int64
	cmd.Flags = func(fs *flag.FlagSet) func([]string) error {
		position = fs.Int64("position", 1, "first global position (with --backward or --last: the highest; default the end)")
		fs.Var(&held, "held", "a state vector: you hold `STREAM=POS`, so only its later messages (repeat; streams not named: every message)")
		member = fs.Int64("member", 0, "consumer group member (with --size)")
		size = fs.Int64("size", 0, "consumer group size")
		correlation = fs.String("correlation", "", "only messages correlated to this category")
		limit = fs.Int64("limit", 0, "most messages (0: 1000, -1: all)")
		dir = addDirectionFlags(fs)
		flt = addFilterFlags(fs)
		return func([]string) error {
			if err := dir.resolve(fs, position, limit); err != nil {
				return err
			}
			if len(held) > 0 {
				var err error
				if sv, err = parseWatermarks(held); err != nil {
					return command.Mistake("--held %s", err)
				}
			}
			return nil
		}
	}
	cmd.Call = func(ctx context.Context, c *client.Client, args []string) (page, error) {
		msgs, err := c.ReadCategory(ctx, client.CategoryQuery{
			Category: args[0], GlobalPosition: *position, Limit: *limit, Correlation: *correlation,
			Group: client.ConsumerGroup{Member: *member, Size: *size}, Backward: dir.reads(),
			Types: flt.types, StreamPrefix: *flt.prefix, StateVector: sv,
		})
		if err != nil || dir.reads() {
			return page{msgs: dir.order(msgs)}, err
		}
		return readPage(ctx, msgs, *limit, func(ctx context.Context, last client.Message) (bool, error) {
			more, err := c.ReadCategory(ctx, client.CategoryQuery{
				Category: args[0], GlobalPosition: last.GlobalPosition + 1, Limit: 1, Correlation: *correlation,
				Group: client.ConsumerGroup{Member: *member, Size: *size},
				Types: flt.types, StreamPrefix: *flt.prefix, StateVector: sv,
			})
			return len(more) > 0, err
		}, func(last client.Message) readOn {
			args := []string{"skald", "category", args[0], "--position", strconv.FormatInt(last.GlobalPosition+1, 10)}
			if *size > 0 {
				args = append(args, "--member", strconv.FormatInt(*member, 10), "--size", strconv.FormatInt(*size, 10))
			}
			if *correlation != "" {
				args = append(args, "--correlation", *correlation)
			}
			args = append(args, flt.args()...)
			for _, h := range held {
				args = append(args, "--held", h)
			}
			return readOn{last.GlobalPosition + 1, command.ShellArgs(args...)}
		})
	}
	return cmd.Run(ctx, args, stdout, stderr)
}

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("tail", "skald tail [STREAM] [--category C [--member M --size S]] [--all] [--from-start | --position N]", stderr)
	category := fs.String("category", "", "follow a category")
	all := fs.Bool("all", false, "follow the whole namespace")
	fromStart := fs.Bool("from-start", false, "replay every stored message first, then follow")
	var position optionalInt64
	fs.Var(&position, "position", "replay from this stream position (STREAM) or global position (--category, --all), then follow (default: only new messages)")
	member := fs.Int64("member", 0, "consumer group member (with --size)")
	size := fs.Int64("size", 0, "consumer group size")
	rest, err := cf.Parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	switch {
	case *fromStart && position.set:
		return cf.UsageError(fs, "give --from-start or --position, not both")
	case position.set && position.v < 0:
		return cf.UsageError(fs, fmt.Sprintf("--position %d: positions start at 0; without --position tail follows from the end", position.v))
	}
	sub := client.Subscription{CaughtUp: func() {
		fmt.Fprintln(stderr, "-- caught up; waiting for new messages (Ctrl-C to stop)")
	}}
	switch {
	case len(rest) == 1 && *category == "" && !*all:
		sub.Stream = rest[0]
	case len(rest) == 0 && *category != "" && !*all:
		sub.Category = *category
		sub.Group = client.ConsumerGroup{Member: *member, Size: *size}
	case len(rest) == 0 && *category == "" && *all:
		sub.All = true
	default:
		return cf.UsageError(fs, "give exactly one of STREAM, --category or --all")
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := tailStart(ctx, c, &sub, *fromStart, position, stderr); err != nil {
		return command.APIError(err)
	}
	enc := json.NewEncoder(stdout)
	for m, err := range c.Subscribe(ctx, sub) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C
			}
			return command.APIError(err)
		}
		if cf.Output == "json" {
			if err := enc.Encode(command.ToJSONMessage(m)); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "%s\t%d\t%d\t%s\t%s\n", m.Stream, m.Position, m.GlobalPosition, m.Type, m.Data)
	}
	return nil
}
