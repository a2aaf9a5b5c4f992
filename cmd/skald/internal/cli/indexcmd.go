package cli

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const indexUsage = `Usage: skald index <create|list|info|rebuild|pause|resume|delete|query> ...

  skald index create NAME [--category C] [--type T]... [--tag TAG]... --field SPEC [--field SPEC]...
                         [--kind event|stream] [--storage pebble|memory]
      declare an event index: one entry per event of category C (the text before a stream
      name's first '-'), of one of the types, and carrying every tag (give at least one of
      them), ordered by its fields. SPEC is data:POINTER:TYPE or metadata:POINTER:TYPE (a JSON
      pointer such as /customer/id; TYPE string, int, float, time or bool), or type, stream
      or time (the event's own). An event without a field of its type is skipped and counted.
      --kind stream keeps one entry per stream instead, from its latest such event.
      --storage memory keeps the entries in memory on each node (built again when it starts,
      bounded by the server's --index-memory-limit; every index of an --in-memory server is).
  skald index list
      list the namespace's indexes with this node's progress (entries, skipped, lag)
  skald index info NAME
      one index's definition and progress
  skald index rebuild NAME [--version N --field SPEC... [--category C] [--type T]... [--tag TAG]... [--kind K]]
      build the index again from the log: as it is, or with the definition the flags give (a
      new version; the name stays). Every node answers queries from the current definition
      until it has built the new one, which then replaces it; list and info show the progress.
  skald index pause NAME
      stop the index on every node: it keeps its checkpoint and answers --local queries (with
      its lag); a query that waits for it is refused while it lacks what the query must see
  skald index resume NAME
      let a paused index advance again from its checkpoint
  skald index delete NAME
      drop an index; every node drops its entries
  skald index query NAME [--eq VALUE]... [--from V|--after V] [--to V|--before V] [--prefix P]
                         [--desc] [--limit N] [--cursor C] [--positions] [--local]
      read entries: --eq gives the first fields' values in order, then --from/--after
      (inclusive/exclusive) and --to/--before bound the next field, or --prefix matches the
      start of a string field. Values are text: decimal ints, numbers, RFC 3339 times, true or
      false. A page holds at most --limit entries (default 100, at most 1000); its last line
      names the --cursor of the next. The read waits until this node's index holds every
      acknowledged write; --local answers at once and reports the lag.

Each takes --namespace NS (default: the token's own namespace; the admin token may name any).
Bad input: exit 2 (nothing changed); an unknown namespace or index: exit 4; a name taken, a
query that must wait for a paused index (resume it, or query with --local) and any query of an
index that failed on the node (list and info say why; rebuild it): exit 5 (the state refuses it).
`

func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "index", indexUsage, map[string]runFunc{
		"create": indexCreate().Run, "list": indexList().Run, "info": indexInfo().Run, "delete": indexDelete().Run,
		"rebuild": indexRebuild().Run, "query": runIndexQuery,
		"pause": indexSetState("pause").Run, "resume": indexSetState("resume").Run,
	}, args, stdout, stderr)
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

var fieldTypes = map[string]skaldv1.IndexFieldType{
	"string": skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING, "int": skaldv1.IndexFieldType_INDEX_FIELD_TYPE_INT,
	"float": skaldv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT, "time": skaldv1.IndexFieldType_INDEX_FIELD_TYPE_TIME,
	"bool": skaldv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL,
}

// parseFieldSpec reads data:POINTER:TYPE, metadata:POINTER:TYPE, type,
// stream or time.
func parseFieldSpec(spec string) (*skaldv1.IndexField, error) {
	switch spec {
	case "type":
		return &skaldv1.IndexField{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_TYPE, Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING}, nil
	case "stream":
		return &skaldv1.IndexField{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_STREAM, Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING}, nil
	case "time":
		return &skaldv1.IndexField{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_TIME, Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_TIME}, nil
	}
	src, rest, ok := strings.Cut(spec, ":")
	i := strings.LastIndexByte(rest, ':')
	sources := map[string]skaldv1.IndexFieldSource{"data": skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, "metadata": skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_METADATA}
	source, known := sources[src]
	if !ok || !known || i < 0 {
		return nil, fmt.Errorf("--field %q: want data:POINTER:TYPE, metadata:POINTER:TYPE, type, stream or time", spec)
	}
	typ, known := fieldTypes[rest[i+1:]]
	if !known {
		return nil, fmt.Errorf("--field %q: type %q: want string, int, float, time or bool", spec, rest[i+1:])
	}
	return &skaldv1.IndexField{Source: source, Pointer: rest[:i], Type: typ}, nil
}

// defFlags are the flags that define an index (create, rebuild).
type defFlags struct {
	category, kind      *string
	storage             *string
	version             *uint
	types, tags, fields listFlag
}

func addDefFlags(fs *flag.FlagSet) *defFlags {
	f := &defFlags{
		category: fs.String("category", "", "index the events of this category"),
		version:  fs.Uint("version", 1, "the definition's version (yours to choose; reported back)"),
		kind:     fs.String("kind", "event", "event: an entry per event; stream: an entry per stream, from its latest event"),
		storage:  fs.String("storage", "pebble", "pebble: on disk, a restart resumes; memory: in memory on each node, built again at its start"),
	}
	fs.Var(&f.types, "type", "index events of this type (repeat for several)")
	fs.Var(&f.tags, "tag", "index events carrying this tag (repeat: every one)")
	fs.Var(&f.fields, "field", "a field: data:POINTER:TYPE, metadata:POINTER:TYPE, type, stream or time (repeat, in order)")
	return f
}

// definition is the definition the flags give; errors are usage errors.
func (f *defFlags) definition(name string) (*skaldv1.IndexDefinition, error) {
	d := &skaldv1.IndexDefinition{Name: name, Version: uint32(*f.version), Category: *f.category, Types: f.types}
	switch *f.kind {
	case "event":
		d.Kind = skaldv1.IndexKind_INDEX_KIND_EVENT
	case "stream":
		d.Kind = skaldv1.IndexKind_INDEX_KIND_STREAM
	default:
		return nil, fmt.Errorf("--kind %q: want event or stream", *f.kind)
	}
	switch *f.storage {
	case "pebble":
	case "memory":
		d.Storage = skaldv1.IndexStorage_INDEX_STORAGE_MEMORY
	default:
		return nil, fmt.Errorf("--storage %q: want pebble or memory", *f.storage)
	}
	if len(f.tags) > 0 {
		d.Query = &skaldv1.Query{Items: []*skaldv1.QueryItem{{Types: f.types, Tags: f.tags}}}
	}
	for _, spec := range f.fields {
		fd, err := parseFieldSpec(spec)
		if err != nil {
			return nil, err
		}
		d.Fields = append(d.Fields, fd)
	}
	if len(f.fields) == 0 {
		return nil, fmt.Errorf("give at least one --field")
	}
	return d, nil
}

// keepUnsaid fills what the flags of a rebuild did not say from the
// current definition: its source (--category, --type and --tag, kept as
// one unless one of them is given), its --kind and its --storage. A new
// version thus changes only what its flags name.
func keepUnsaid(d, current *skaldv1.IndexDefinition, given map[string]bool) {
	if current == nil {
		return
	}
	if !given["category"] && !given["type"] && !given["tag"] {
		d.Category, d.Types, d.Query = current.Category, current.Types, current.Query
	}
	if !given["kind"] {
		d.Kind = current.Kind
	}
	if !given["storage"] {
		d.Storage = current.Storage
	}
}

// indexDefine is index create or index rebuild: the flags that define an
// index, checked into the definition before anything is sent.
func indexDefine(name, usage string, check func(fs *flag.FlagSet, df *defFlags, args []string) (*skaldv1.IndexDefinition, error),
	call func(ctx context.Context, c *client.Client, ns, name string, d *skaldv1.IndexDefinition) (*skaldv1.IndexDefinition, error),
	text func(w io.Writer, out *skaldv1.IndexDefinition) error) command.Command[*skaldv1.IndexDefinition] {
	var ns *string
	var d *skaldv1.IndexDefinition
	return command.Command[*skaldv1.IndexDefinition]{
		Name: name, Usage: usage, MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			ns = fs.String("namespace", "", "the namespace (default: the token's own)")
			df := addDefFlags(fs)
			return func(args []string) (err error) {
				d, err = check(fs, df, args)
				return err
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (*skaldv1.IndexDefinition, error) {
			return call(ctx, c, *ns, args[0], d)
		},
		Text: func(w io.Writer, _ []string, out *skaldv1.IndexDefinition) error { return text(w, out) },
	}
}

func indexCreate() command.Command[*skaldv1.IndexDefinition] {
	return indexDefine("index create", "skald index create NAME [--category C] [--type T]... [--tag TAG]... --field SPEC... [--kind event|stream] [--namespace NS]",
		func(_ *flag.FlagSet, df *defFlags, args []string) (*skaldv1.IndexDefinition, error) {
			d, err := df.definition(args[0])
			if err != nil {
				return nil, command.Mistake("%s", err)
			}
			if *df.category == "" && len(df.types) == 0 && len(df.tags) == 0 {
				return nil, command.Mistake("give the events to index: --category, --type or --tag")
			}
			return d, nil
		},
		func(ctx context.Context, c *client.Client, ns, _ string, d *skaldv1.IndexDefinition) (*skaldv1.IndexDefinition, error) {
			return c.CreateIndex(ctx, ns, d)
		},
		func(w io.Writer, out *skaldv1.IndexDefinition) error {
			per := ""
			if out.Kind == skaldv1.IndexKind_INDEX_KIND_STREAM {
				per = " (per stream)"
			}
			_, err := fmt.Fprintf(w, "Created index %s%s: %s; every node builds it from its log now.\n", out.Name, per, describeFields(out.Fields))
			return err
		})
}

func indexRebuild() command.Command[*skaldv1.IndexDefinition] {
	var given map[string]bool // the definition flags given
	return indexDefine("index rebuild", "skald index rebuild NAME [--version N --field SPEC... [--category C] [--type T]... [--tag TAG]... [--kind K]] [--namespace NS]",
		func(fs *flag.FlagSet, df *defFlags, args []string) (*skaldv1.IndexDefinition, error) {
			given = map[string]bool{}
			fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
			if len(df.fields) > 0 {
				d, err := df.definition(args[0])
				if err != nil {
					return nil, command.Mistake("%s", err)
				}
				return d, nil
			}
			for _, name := range []string{"category", "version", "kind", "storage", "type", "tag"} {
				if given[name] {
					return nil, command.Mistake("--%s defines a new version: give its --field(s) too (without any, the current definition is rebuilt)", name)
				}
			}
			return nil, nil
		},
		func(ctx context.Context, c *client.Client, ns, name string, d *skaldv1.IndexDefinition) (*skaldv1.IndexDefinition, error) {
			if d != nil && !(given["category"] && given["type"] && given["tag"] && given["kind"] && given["storage"]) {
				info, err := c.IndexInfo(ctx, ns, name)
				if err != nil {
					return nil, err
				}
				keepUnsaid(d, info.GetDefinition(), given)
			}
			return c.RebuildIndex(ctx, ns, name, d)
		},
		func(w io.Writer, out *skaldv1.IndexDefinition) error {
			_, err := fmt.Fprintf(w, "Rebuilding index %s (version %d): %s; every node answers from the current definition until it has built this one.\n",
				out.Name, out.Version, describeFields(out.Fields))
			return err
		})
}

func describeFields(fields []*skaldv1.IndexField) string {
	var parts []string
	for _, f := range fields {
		src := strings.ToLower(strings.TrimPrefix(f.Source.String(), "INDEX_FIELD_SOURCE_"))
		typ := strings.ToLower(strings.TrimPrefix(f.Type.String(), "INDEX_FIELD_TYPE_"))
		if f.Pointer != "" {
			parts = append(parts, src+":"+f.Pointer+":"+typ)
		} else {
			parts = append(parts, src)
		}
	}
	return strings.Join(parts, ", ")
}

func describeSource(d *skaldv1.IndexDefinition) string {
	var parts []string
	if d.Kind == skaldv1.IndexKind_INDEX_KIND_STREAM {
		parts = append(parts, "latest per stream of")
	}
	if d.Category != "" {
		parts = append(parts, "category "+d.Category)
	}
	if len(d.Types) > 0 {
		parts = append(parts, "types "+strings.Join(d.Types, ","))
	}
	for _, it := range d.GetQuery().GetItems() {
		if len(it.Tags) > 0 {
			parts = append(parts, "tags "+strings.Join(it.Tags, ","))
		}
	}
	if d.Storage == skaldv1.IndexStorage_INDEX_STORAGE_MEMORY {
		parts = append(parts, "in memory")
	}
	return strings.Join(parts, "; ")
}

func indexRow(info *skaldv1.IndexInfo) []string {
	d, s := info.Definition, info.Status
	return []string{d.Name, strconv.FormatUint(uint64(d.Version), 10), describeSource(d), describeFields(d.Fields), indexRowState(info),
		strconv.FormatInt(s.GetEntries(), 10), strconv.FormatInt(s.GetSkipped(), 10), strconv.FormatInt(s.GetLagEvents(), 10)}
}

// indexRowState is the index's state, and a rebuild's progress.
func indexRowState(info *skaldv1.IndexInfo) string {
	out := indexState(info.Status)
	if info.Rebuilding != nil {
		out += fmt.Sprintf("; rebuilding v%d: %s", info.Rebuilding.Version, indexState(info.RebuildStatus))
	}
	return out
}

// indexState is "healthy", "paused", "failed: REASON", or "building
// 42%" with the ETA when known.
func indexState(s *skaldv1.IndexStatus) string {
	switch s.GetState() {
	case skaldv1.IndexState_INDEX_STATE_FAILED:
		return "failed: " + s.GetFailure()
	case skaldv1.IndexState_INDEX_STATE_PAUSED:
		return "paused"
	case skaldv1.IndexState_INDEX_STATE_BUILDING:
	default:
		return "healthy"
	}
	out := fmt.Sprintf("building %d%%", int(s.GetProgress()*100))
	if s.GetEta() != nil {
		out += ", eta " + s.GetEta().AsDuration().Round(time.Second).String()
	}
	return out
}

const indexHeader = "NAME\tVERSION\tSOURCE\tFIELDS\tSTATE\tENTRIES\tSKIPPED\tLAG"

// namespaceFlag declares --namespace, the namespace an index or a
// retention command acts on, into ns.
func namespaceFlag(ns *string) func(fs *flag.FlagSet) func([]string) error {
	return func(fs *flag.FlagSet) func([]string) error {
		fs.StringVar(ns, "namespace", "", "the namespace (default: the token's own)")
		return nil
	}
}

func indexList() command.Command[[]*skaldv1.IndexInfo] {
	var ns string
	return command.Command[[]*skaldv1.IndexInfo]{
		Name: "index list", Usage: "skald index list [--namespace NS]", Flags: namespaceFlag(&ns),
		Call: func(ctx context.Context, c *client.Client, _ []string) ([]*skaldv1.IndexInfo, error) {
			return c.Indexes(ctx, ns)
		},
		Text: func(w io.Writer, _ []string, infos []*skaldv1.IndexInfo) error {
			rows := make([][]string, 0, len(infos))
			for _, info := range infos {
				rows = append(rows, indexRow(info))
			}
			return command.Table(w, indexHeader, rows)
		},
		JSON: func(infos []*skaldv1.IndexInfo) any { return &skaldv1.IndexesListResponse{Indexes: infos} },
	}
}

func indexInfo() command.Command[*skaldv1.IndexInfo] {
	var ns string
	return command.Command[*skaldv1.IndexInfo]{
		Name: "index info", Usage: "skald index info NAME [--namespace NS]", MinArgs: 1, MaxArgs: 1, Flags: namespaceFlag(&ns),
		Call: func(ctx context.Context, c *client.Client, args []string) (*skaldv1.IndexInfo, error) {
			return c.IndexInfo(ctx, ns, args[0])
		},
		Text: func(w io.Writer, _ []string, info *skaldv1.IndexInfo) error {
			return command.Table(w, indexHeader, [][]string{indexRow(info)})
		},
	}
}

// indexSetState is index pause and index resume.
func indexSetState(verb string) command.Command[struct{}] {
	var ns string
	return command.Command[struct{}]{
		Name: "index " + verb, Usage: "skald index " + verb + " NAME [--namespace NS]", MinArgs: 1, MaxArgs: 1, Flags: namespaceFlag(&ns),
		Call: func(ctx context.Context, c *client.Client, args []string) (struct{}, error) {
			if verb == "pause" {
				return struct{}{}, c.PauseIndex(ctx, ns, args[0])
			}
			return struct{}{}, c.ResumeIndex(ctx, ns, args[0])
		},
		Text: func(w io.Writer, args []string, _ struct{}) error {
			var err error
			if verb == "pause" {
				_, err = fmt.Fprintf(w, "Paused index %s on every node; it keeps answering --local queries.\n", args[0])
			} else {
				_, err = fmt.Fprintf(w, "Resumed index %s; every node continues from its checkpoint.\n", args[0])
			}
			return err
		},
		JSON: func(struct{}) any { return &skaldv1.IndexesPauseResponse{} },
	}
}

func indexDelete() command.Command[struct{}] {
	var ns string
	return command.Command[struct{}]{
		Name: "index delete", Usage: "skald index delete NAME [--namespace NS]", MinArgs: 1, MaxArgs: 1, Flags: namespaceFlag(&ns),
		Call: func(ctx context.Context, c *client.Client, args []string) (struct{}, error) {
			return struct{}{}, c.DeleteIndex(ctx, ns, args[0])
		},
		Text: func(w io.Writer, args []string, _ struct{}) error {
			_, err := fmt.Fprintf(w, "Deleted index %s.\n", args[0])
			return err
		},
		JSON: func(struct{}) any { return &skaldv1.IndexesDeleteResponse{} }, // index 0, as it always printed
	}
}

func runIndexQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("index query", "skald index query NAME [--eq V]... [--from V|--after V] [--to V|--before V] [--prefix P] [--desc] [--limit N] [--cursor C] [--positions] [--local] [--namespace NS]", stderr)
	ns := fs.String("namespace", "", "the namespace (default: the token's own)")
	var eq listFlag
	fs.Var(&eq, "eq", "the value of the next field, in order (repeat)")
	from := fs.String("from", "", "the lowest value of the field after the --eq ones (inclusive)")
	after := fs.String("after", "", "... exclusive")
	to := fs.String("to", "", "the highest value of that field (inclusive)")
	before := fs.String("before", "", "... exclusive")
	prefix := fs.String("prefix", "", "the start of that (string) field")
	desc := fs.Bool("desc", false, "newest (highest) entries first")
	limit := fs.Int("limit", 0, "entries per page (default 100, at most 1000)")
	cursor := fs.String("cursor", "", "continue after the page whose last line named this cursor")
	positions := fs.Bool("positions", false, "print global positions and values only, not the events")
	local := fs.Bool("local", false, "answer from this node at once, however far its index lags")
	rest, err := cf.Parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	q := client.IndexQuery{Name: rest[0], Equal: eq, Descending: *desc, Limit: int32(*limit), PositionsOnly: *positions}
	visited := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { visited[f.Name] = true })
	switch {
	case visited["from"] && visited["after"]:
		return cf.UsageError(fs, "give --from or --after, not both")
	case visited["to"] && visited["before"]:
		return cf.UsageError(fs, "give --to or --before, not both")
	}
	if visited["from"] {
		q.From = &skaldv1.IndexBound{Value: *from}
	} else if visited["after"] {
		q.From = &skaldv1.IndexBound{Value: *after, Exclusive: true}
	}
	if visited["to"] {
		q.To = &skaldv1.IndexBound{Value: *to}
	} else if visited["before"] {
		q.To = &skaldv1.IndexBound{Value: *before, Exclusive: true}
	}
	if visited["prefix"] {
		q.Prefix = prefix
	}
	if *cursor != "" {
		if q.Cursor, err = base64.RawURLEncoding.DecodeString(*cursor); err != nil {
			return cf.UsageError(fs, fmt.Sprintf("--cursor %q: not a cursor this command printed", *cursor))
		}
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var opts []client.ReadOption
	if *local {
		opts = append(opts, client.WithLocal(0))
	}
	page, err := c.QueryIndex(ctx, *ns, q, opts...)
	if err != nil {
		return command.APIError(err)
	}
	if cf.Output == "json" {
		out := &skaldv1.IndexesQueryResponse{NextCursor: page.NextCursor, Truncated: page.Truncated, Status: page.Status}
		for _, h := range page.Hits {
			hit := &skaldv1.IndexHit{GlobalPosition: h.GlobalPosition, Values: h.Values, Stream: h.Stream}
			if m := h.Message; m != nil {
				hit.Message = &skaldv1.Message{Id: m.ID, Stream: m.Stream, Type: m.Type, Position: m.Position, GlobalPosition: m.GlobalPosition,
					Data: m.Data, Metadata: m.Metadata, Time: timestamppb.New(m.Time), Tags: m.Tags}
			}
			out.Hits = append(out.Hits, hit)
		}
		return command.PrintJSON(stdout, out)
	}
	// A stream index's positions name their streams (its documents).
	perStream := false
	for _, h := range page.Hits {
		perStream = perStream || h.Stream != ""
	}
	rows := make([][]string, 0, len(page.Hits))
	for _, h := range page.Hits {
		row := []string{strconv.FormatInt(h.GlobalPosition, 10), strings.Join(h.Values, " | ")}
		if h.Message != nil {
			row = append(row, h.Message.Stream, strconv.FormatInt(h.Message.Position, 10), h.Message.Type, string(h.Message.Data))
		} else if perStream {
			row = append(row, h.Stream)
		}
		rows = append(rows, row)
	}
	header := "GPOS\tVALUES"
	if !*positions {
		header += "\tSTREAM\tPOS\tTYPE\tDATA"
	} else if perStream {
		header += "\tSTREAM"
	}
	if err := command.Table(stdout, header, rows); err != nil {
		return err
	}
	if *local && page.Status != nil && page.Status.LagEvents > 0 {
		fmt.Fprintf(stdout, "(this node's index lags %d events)\n", page.Status.LagEvents)
	}
	if page.NextCursor != nil {
		fmt.Fprintf(stdout, "next page: --cursor %s\n", base64.RawURLEncoding.EncodeToString(page.NextCursor))
	}
	return nil
}
