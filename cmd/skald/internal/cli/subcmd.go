package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const subUsage = `Usage: skald sub <create|list|info|update|delete|consume|parked|replay> ...

Persistent subscriptions: server-side consumer groups of the token's namespace. The leader hands
each message of the group's source to one consumer, redelivers what is not acknowledged within
the ack timeout, and parks what fails more than --max-retries times. At least once: a message
can be delivered again (docs/api.md).

  skald sub create GROUP (--stream S | --category C | --all | QUERY) [--start GP | --from-end] [settings]
      QUERY: --type T... --tag A... (one item), or --query JSON|@FILE, as in skald query
  skald sub update GROUP [settings]          change only the settings given
  skald sub list
  skald sub info GROUP                       settings, checkpoint, parked count, live state
  skald sub delete GROUP [--yes]
  skald sub consume GROUP [--consumer NAME] [--count N] [--no-ack]
      print deliveries (stream, position, global position, type, attempt, data) and ack each
      (with --no-ack, leave them: they are delivered again after the ack timeout)
  skald sub parked GROUP [--after GP] [--limit N]
  skald sub replay GROUP [GP...]             deliver parked messages again (all when none given)
  skald sub replay GROUP --delete [GP...] [--yes]   forget parked messages instead

Settings: --max-in-flight-per-consumer N, --max-in-flight N, --ack-timeout D, --max-retries N,
--max-consumers N, --strategy round-robin|pinned, --checkpoint-after N, --checkpoint-interval D.
Unknown group: exit 4; a taken name: exit 5; a setting out of range: exit 2. delete and replay
--delete ask first on a terminal; without one (a script, a pipe) they need --yes.
`

func runSub(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "sub", subUsage, map[string]runFunc{
		"create": subCreate().Run, "update": subUpdate().Run, "list": subList.Run, "info": subInfo().Run, "delete": subDelete(stderr).Run,
		"consume": runSubConsume, "parked": runSubParked, "replay": subReplay(stderr).Run,
	}, args, stdout, stderr)
}

// settingsFlags are the group settings a command line may give.
type settingsFlags struct {
	perConsumer, inFlight, maxConsumers, checkpointAfter optionalInt64
	maxRetries                                           optionalInt64
	ackTimeout, checkpointInterval                       time.Duration
	strategy                                             string
}

func addSettingsFlags(fs *flag.FlagSet) *settingsFlags {
	s := &settingsFlags{}
	fs.Var(&s.perConsumer, "max-in-flight-per-consumer", "unacknowledged messages one consumer may hold (`N`, 1..10000, default 100)")
	fs.Var(&s.inFlight, "max-in-flight", "unacknowledged messages the group may have out (`N`, 1..100000, default 1000)")
	fs.DurationVar(&s.ackTimeout, "ack-timeout", 0, "redeliver a message not acknowledged within this (100ms..1h, default 30s)")
	fs.Var(&s.maxRetries, "max-retries", "deliveries after the first before a message is parked (`N`, 0..1000, default 10)")
	fs.Var(&s.maxConsumers, "max-consumers", "consumers the group accepts (`N`, 1..1000, default 100)")
	fs.StringVar(&s.strategy, "strategy", "", "round-robin (default) or pinned (one consumer per stream, in order)")
	fs.Var(&s.checkpointAfter, "checkpoint-after", "save progress after this many settled messages (`N`, default 100)")
	fs.DurationVar(&s.checkpointInterval, "checkpoint-interval", 0, "or this long after the first unsaved one (default 200ms)")
	return s
}

func (s *settingsFlags) settings() (client.GroupSettings, error) {
	var out client.GroupSettings
	i32 := func(o optionalInt64, name string, dst *int32) error {
		if !o.set {
			return nil
		}
		if o.v < 1 || o.v > 1<<31-1 {
			return fmt.Errorf("--%s must be positive, got %d", name, o.v)
		}
		*dst = int32(o.v)
		return nil
	}
	for _, f := range []struct {
		o    optionalInt64
		name string
		dst  *int32
	}{
		{s.perConsumer, "max-in-flight-per-consumer", &out.MaxInFlightPerConsumer},
		{s.inFlight, "max-in-flight", &out.MaxInFlight},
		{s.maxConsumers, "max-consumers", &out.MaxConsumers},
		{s.checkpointAfter, "checkpoint-after", &out.CheckpointAfter},
	} {
		if err := i32(f.o, f.name, f.dst); err != nil {
			return out, err
		}
	}
	if s.maxRetries.set {
		if s.maxRetries.v < 0 || s.maxRetries.v > 1<<31-1 {
			return out, fmt.Errorf("--max-retries must be 0 or more, got %d", s.maxRetries.v)
		}
		r := int32(s.maxRetries.v)
		out.MaxRetries = &r
	}
	out.AckTimeout, out.CheckpointInterval = s.ackTimeout, s.checkpointInterval
	switch s.strategy {
	case "":
	case "round-robin":
		st := client.RoundRobin
		out.Strategy = &st
	case "pinned":
		st := client.Pinned
		out.Strategy = &st
	default:
		return out, fmt.Errorf("--strategy must be round-robin or pinned, got %q", s.strategy)
	}
	return out, nil
}

// groupCommand is a command whose result is a group: Text prints it
// after "<verb> group NAME." (none when verb is empty), -o json as the
// API's GroupInfo (its strategy an API enum name).
func groupCommand(name, usage string, verb string) command.Command[client.GroupInfo] {
	return command.Command[client.GroupInfo]{
		Name: name, Usage: usage, MinArgs: 1, MaxArgs: 1,
		Text: func(w io.Writer, _ []string, g client.GroupInfo) error { return printGroup(w, g, verb) },
		JSON: func(g client.GroupInfo) any { return groupReply(g) },
	}
}

func subCreate() command.Command[client.GroupInfo] {
	cmd := groupCommand("sub create", "skald sub create GROUP (--stream S | --category C | --all | --type T... --tag A... | --query JSON|@FILE) [--start GP | --from-end] [settings]", "Created")
	var spec client.GroupSpec
	cmd.Flags = func(fs *flag.FlagSet) func([]string) error {
		stream := fs.String("stream", "", "the group reads this stream")
		category := fs.String("category", "", "the group reads this category")
		all := fs.Bool("all", false, "the group reads the whole namespace")
		qf := addQueryFlags(fs) // the group reads the (tagged) messages matching the query
		var start optionalInt64
		fs.Var(&start, "start", "first global position to deliver (`GP`, default 1: every stored message)")
		fromEnd := fs.Bool("from-end", false, "deliver only messages written after the group is created")
		sf := addSettingsFlags(fs)
		return func(args []string) error {
			spec = client.GroupSpec{Name: args[0], Stream: *stream, Category: *category, StartAtEnd: *fromEnd, StartGlobalPosition: start.v}
			n := 0
			for _, set := range []bool{*stream != "", *category != "", *all, qf.set()} {
				if set {
					n++
				}
			}
			if n != 1 {
				return command.Mistake("give exactly one of --stream, --category, --all or a query (--type/--tag or --query)")
			}
			var err error
			if qf.set() {
				if spec.Query, err = qf.build(); err != nil {
					return err
				}
			}
			if start.set && *fromEnd {
				return command.Mistake("give --start or --from-end, not both")
			}
			if spec.Settings, err = sf.settings(); err != nil {
				return command.Mistake("%s", err)
			}
			return nil
		}
	}
	cmd.Call = func(ctx context.Context, c *client.Client, _ []string) (client.GroupInfo, error) {
		return c.CreateGroup(ctx, spec)
	}
	return cmd
}

func subUpdate() command.Command[client.GroupInfo] {
	cmd := groupCommand("sub update", "skald sub update GROUP [settings]", "Updated")
	var settings client.GroupSettings
	cmd.Flags = func(fs *flag.FlagSet) func([]string) error {
		sf := addSettingsFlags(fs)
		return func([]string) error {
			var err error
			if settings, err = sf.settings(); err != nil {
				return command.Mistake("%s", err)
			}
			return nil
		}
	}
	cmd.Call = func(ctx context.Context, c *client.Client, args []string) (client.GroupInfo, error) {
		return c.UpdateGroup(ctx, args[0], settings)
	}
	return cmd
}

func subInfo() command.Command[client.GroupInfo] {
	cmd := groupCommand("sub info", "skald sub info GROUP", "")
	cmd.Call = func(ctx context.Context, c *client.Client, args []string) (client.GroupInfo, error) {
		return c.GetGroup(ctx, args[0])
	}
	return cmd
}

var subList = command.Command[[]client.GroupInfo]{
	Name: "sub list", Usage: "skald sub list",
	Call: func(ctx context.Context, c *client.Client, _ []string) ([]client.GroupInfo, error) {
		return c.ListGroups(ctx)
	},
	Text: func(w io.Writer, _ []string, groups []client.GroupInfo) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tSOURCE\tCHECKPOINT\tPARKED\tSTRATEGY")
		for _, g := range groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", g.Name, sourceOf(g), g.Checkpoint, g.Parked, strategyName(g.Settings.Strategy))
		}
		return tw.Flush()
	},
	JSON: func(groups []client.GroupInfo) any { // the strategies as the API names them
		out := &skaldv1.ListGroupsResponse{}
		for _, g := range groups {
			out.Groups = append(out.Groups, groupReply(g))
		}
		return out
	},
}

// subDelete is sub delete: it asks on stderr's terminal first. Its result
// is the deletion's index.
func subDelete(stderr io.Writer) command.Command[uint64] {
	var yes *bool
	return command.Command[uint64]{
		Name: "sub delete", Usage: "skald sub delete GROUP [--yes]", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			yes = command.AddYes(fs)
			return func(args []string) error {
				return command.Confirm("sub delete", "deletes group "+args[0]+", its checkpoint and its parked messages",
					"Delete group "+args[0]+", its checkpoint and its parked messages?", *yes, os.Stdin, stderr)
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (uint64, error) {
			if err := c.DeleteGroup(ctx, args[0]); err != nil {
				return 0, err
			}
			return c.SessionIndex(), nil
		},
		Text: func(w io.Writer, args []string, _ uint64) error {
			_, err := fmt.Fprintf(w, "Deleted group %s.\n", args[0])
			return err
		},
		JSON: func(index uint64) any { return struct{ Index uint64 }{index} },
	}
}

func runSubConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("sub consume", "skald sub consume GROUP [--consumer NAME] [--count N] [--no-ack]", stderr)
	consumer := fs.String("consumer", "cli", "consumer name shown in the group's state")
	count := fs.Int("count", 0, "stop after N deliveries (default: until Ctrl-C)")
	noAck := fs.Bool("no-ack", false, "do not acknowledge (the messages are delivered again after the ack timeout)")
	rest, err := cf.Parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	enc := json.NewEncoder(stdout)
	n := 0
	for d, err := range c.Consume(ctx, rest[0], *consumer) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C
			}
			return command.APIError(err)
		}
		if cf.Output == "json" {
			out := struct {
				command.JSONMessage
				Attempt int32 `json:"attempt"`
			}{command.ToJSONMessage(d.Message), d.Attempt}
			if err := enc.Encode(out); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(stdout, "%s\t%d\t%d\t%s\t%d\t%s\n", d.Stream, d.Position, d.GlobalPosition, d.Type, d.Attempt, d.Data)
		}
		if !*noAck {
			if err := c.Ack(ctx, rest[0], d.ID); err != nil {
				fmt.Fprintf(stderr, "skald: ack %s: %v (it will be delivered again)\n", d.ID, err)
			}
		}
		if n++; *count > 0 && n >= *count {
			return nil
		}
	}
	return nil
}

// parkedPage is a page of a group's parked messages, the group's count of
// them, and more: whether any follow the page, asked only when a table
// is printed.
type parkedPage struct {
	msgs  []client.ParkedMessage
	total int64
	more  func(last int64) (bool, error)
}

func runSubParked(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var after *int64
	var limit *int
	return command.Command[parkedPage]{
		Name: "sub parked", Usage: "skald sub parked GROUP [--after GP] [--limit N]", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			after = fs.Int64("after", 0, "list parked messages above this global position")
			limit = fs.Int("limit", 100, "at most N (1..1000)")
			return nil
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (parkedPage, error) {
			msgs, total, err := c.ListParked(ctx, args[0], *after, int32(*limit))
			return parkedPage{msgs: msgs, total: total, more: func(last int64) (bool, error) {
				more, _, err := c.ListParked(ctx, args[0], last, 1)
				return len(more) > 0, err
			}}, err
		},
		Text: func(w io.Writer, args []string, p parkedPage) error {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "GLOBAL\tSTREAM\tPOSITION\tDELIVERIES\tPARKED\tREASON")
			for _, m := range p.msgs {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\n", m.GlobalPosition, m.Stream, m.Position, m.Deliveries, m.Parked.UTC().Format(time.RFC3339), m.Reason)
			}
			tw.Flush()
			fmt.Fprintf(w, "%d parked in all.\n", p.total)
			// A full page may have stopped before the end: say how to read
			// on, as read does.
			if n := len(p.msgs); n > 0 && n >= *limit {
				last := p.msgs[n-1].GlobalPosition
				more, err := p.more(last)
				if err != nil {
					return command.APIError(err)
				}
				if more {
					fmt.Fprintf(stderr, "-- %s shown; more follow: %s\n", plural(int64(n), "message"),
						command.ShellArgs("skald", "sub", "parked", args[0], "--after", strconv.FormatInt(last, 10), "--limit", strconv.Itoa(*limit)))
				}
			}
			return nil
		},
		JSON: func(p parkedPage) any { // as the API names it: parkedAt
			out := &skaldv1.ListParkedResponse{Total: p.total}
			for _, m := range p.msgs {
				out.Messages = append(out.Messages, &skaldv1.ParkedMessage{GlobalPosition: m.GlobalPosition, Id: m.ID, Stream: m.Stream, Position: m.Position,
					Reason: m.Reason, Deliveries: m.Deliveries, ParkedAt: command.TimestampOf(m.Parked)})
			}
			return out
		},
	}.Run(ctx, args, stdout, stderr)
}

// parkedOutcome is what sub replay did: replayed (or, with --delete,
// deleted) messages, those still parked, and the write's index.
type parkedOutcome struct {
	n, parked int64
	index     uint64
}

// subReplay is sub replay: with --delete it asks on stderr's terminal
// first.
func subReplay(stderr io.Writer) command.Command[parkedOutcome] {
	var del, yes *bool
	var gps []int64
	return command.Command[parkedOutcome]{
		Name: "sub replay", Usage: "skald sub replay GROUP [--delete [--yes]] [GP...]", MinArgs: 1, MaxArgs: 1001,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			del = fs.Bool("delete", false, "forget the parked messages instead of delivering them again")
			yes = command.AddYes(fs)
			return func(args []string) error {
				if *del {
					which := "every parked message"
					if len(args) > 1 {
						which = "the parked messages named"
					}
					if err := command.Confirm("sub replay --delete", "forgets "+which+" of group "+args[0],
						"Forget "+which+" of group "+args[0]+"? They will not be delivered again.", *yes, os.Stdin, stderr); err != nil {
						return err
					}
				}
				for _, a := range args[1:] {
					gp, err := strconv.ParseInt(a, 10, 64)
					if err != nil || gp < 1 {
						return command.Mistake("%q is not a global position", a)
					}
					gps = append(gps, gp)
				}
				return nil
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (parkedOutcome, error) {
			var o parkedOutcome
			var err error
			if *del {
				o.n, o.parked, err = c.DeleteParked(ctx, args[0], gps...)
			} else {
				o.n, o.parked, err = c.ReplayParked(ctx, args[0], gps...)
			}
			o.index = c.SessionIndex()
			return o, err
		},
		Text: func(w io.Writer, _ []string, o parkedOutcome) error {
			format := "Replaying %d parked messages; %d stay parked.\n"
			if *del {
				format = "Deleted %d parked messages; %d stay parked.\n"
			}
			_, err := fmt.Fprintf(w, format, o.n, o.parked)
			return err
		},
		JSON: func(o parkedOutcome) any {
			if *del {
				return &skaldv1.DeleteParkedResponse{Deleted: o.n, Parked: o.parked, Index: o.index}
			}
			return &skaldv1.ReplayParkedResponse{Replayed: o.n, Parked: o.parked, Index: o.index}
		},
	}
}

func sourceOf(g client.GroupInfo) string {
	switch {
	case g.Stream != "":
		return "stream " + g.Stream
	case g.Category != "":
		return "category " + g.Category
	case g.Query != nil:
		return "query " + queryText(g.Query)
	}
	return "all"
}

// queryText is q as --query JSON ({"items":[{"types":[...],"tags":[...]}]}).
func queryText(q client.Query) string {
	type item struct {
		Types []string `json:"types,omitempty"`
		Tags  []string `json:"tags,omitempty"`
	}
	var j struct {
		Items []item `json:"items"`
	}
	for _, it := range q {
		j.Items = append(j.Items, item{it.Types, it.Tags})
	}
	b, err := json.Marshal(j)
	if err != nil { // strings only: cannot fail
		return fmt.Sprint(q)
	}
	return string(b)
}

// queryReply is q as the API's Query.
func queryReply(q client.Query) *skaldv1.Query {
	out := &skaldv1.Query{}
	for _, it := range q {
		out.Items = append(out.Items, &skaldv1.QueryItem{Types: it.Types, Tags: it.Tags})
	}
	return out
}

func strategyName(s *client.GroupStrategy) string {
	if s != nil && *s == client.Pinned {
		return "pinned"
	}
	return "round-robin"
}

// groupReply is g as the API's GroupInfo, for -o json.
func groupReply(g client.GroupInfo) *skaldv1.GroupInfo {
	s := g.Settings
	out := &skaldv1.GroupInfo{Name: g.Name, Start: g.Start, CreatedAt: command.TimestampOf(g.Created), Checkpoint: g.Checkpoint, Parked: g.Parked,
		Replaying: g.Replaying,
		Settings: &skaldv1.GroupSettings{MaxInFlightPerConsumer: &s.MaxInFlightPerConsumer, MaxInFlight: &s.MaxInFlight,
			AckTimeout: durationpb.New(s.AckTimeout), MaxRetries: s.MaxRetries, MaxConsumers: &s.MaxConsumers,
			CheckpointAfter: &s.CheckpointAfter, CheckpointInterval: durationpb.New(s.CheckpointInterval)},
		State: &skaldv1.GroupState{Active: g.State.Active, Consumers: g.State.Consumers, InFlight: g.State.InFlight, Lag: g.State.Lag,
			Redeliveries: g.State.Redeliveries, Acked: g.State.Acked, ParkedSinceStart: g.State.Parked}}
	if strategyName(s.Strategy) == "pinned" {
		out.Settings.Strategy = skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED
	} else {
		out.Settings.Strategy = skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_ROUND_ROBIN
	}
	switch {
	case g.Stream != "":
		out.Source = &skaldv1.GroupInfo_Stream{Stream: g.Stream}
	case g.Category != "":
		out.Source = &skaldv1.GroupInfo_Category{Category: g.Category}
	case g.Query != nil:
		out.Source = &skaldv1.GroupInfo_Query{Query: queryReply(g.Query)}
	default:
		out.Source = &skaldv1.GroupInfo_All{All: true}
	}
	return out
}

// printGroup writes a group as "key: value" lines, after "<verb> group
// NAME." when verb is not empty.
func printGroup(w io.Writer, g client.GroupInfo, verb string) error {
	if verb != "" {
		fmt.Fprintf(w, "%s group %s.\n", verb, g.Name)
	}
	s := g.Settings
	retries := "default"
	if s.MaxRetries != nil {
		retries = strconv.Itoa(int(*s.MaxRetries))
	}
	lines := [][2]string{
		{"group", g.Name}, {"source", sourceOf(g)}, {"start", strconv.FormatInt(g.Start, 10)},
		{"checkpoint", strconv.FormatInt(g.Checkpoint, 10)}, {"parked", strconv.FormatInt(g.Parked, 10)},
		{"replaying", strconv.FormatInt(g.Replaying, 10)},
		{"strategy", strategyName(s.Strategy)},
		{"max in flight", fmt.Sprintf("%d (per consumer %d)", s.MaxInFlight, s.MaxInFlightPerConsumer)},
		{"ack timeout", s.AckTimeout.String()}, {"max retries", retries}, {"max consumers", strconv.Itoa(int(s.MaxConsumers))},
		{"checkpoint every", fmt.Sprintf("%d settled or %v", s.CheckpointAfter, s.CheckpointInterval)},
	}
	if st := g.State; st.Active {
		lines = append(lines, [2]string{"live", fmt.Sprintf("%d consumers, %d in flight, %d queued or in flight, %d acked, %d redelivered, %d parked since start",
			st.Consumers, st.InFlight, st.Lag, st.Acked, st.Redeliveries, st.Parked)})
	} else {
		lines = append(lines, [2]string{"live", "no consumer attached (or not answered by the leader)"})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintf(tw, "%s:\t%s\n", l[0], strings.TrimSpace(l[1]))
	}
	return tw.Flush()
}
