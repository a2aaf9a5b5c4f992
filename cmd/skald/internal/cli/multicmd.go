package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const appendMultiHelp = `Appends to several streams at once, all or nothing (EventStore.AppendMulti):
one log entry, contiguous global positions in the order given. FILE (or -
for standard input) is JSON:

  {"streams": [
    {"stream": "account-1", "expected_version": 4,
     "messages": [{"type": "Withdrawn", "data": {"amount": 5}}]},
    {"stream": "account-2",
     "messages": [{"type": "Deposited", "data": {"amount": 5}, "metadata": {"by": "ann"},
                   "id": "0192f0c4-0000-7000-8000-000000000001", "tags": ["account:2"]}]}
  ]}

expected_version (optional; or expectedVersion, the API's JSON name): the
stream's version must be this (-1: no message yet); when any stream's is
not, nothing is written and every such stream is named. Limits: 1..100 streams, each once; 1..1000 messages and
8 MiB of data and metadata in all. Messages with an id are idempotent: the
same call sent again writes nothing and prints the original positions.
Tags (optional, per message) and a condition (optional, for the call):

  "condition": {"fail_if_events_match": {"items": [{"types": ["T"], "tags": ["account:2"]}]},
                "after": 17}

fails the call, writing nothing, when a message matching any item exists
after global position 17 (failIfEventsMatch is taken too).`

// multiFile is the JSON that append-multi reads. Its two-word names are
// taken as the proto spells them and as the API's JSON (protojson) does,
// one of the two per object.
type multiFile struct {
	Streams []struct {
		Stream          string `json:"stream"`
		ExpectedVersion *int64 `json:"expected_version"`
		ExpectedCamel   *int64 `json:"expectedVersion"`
		Messages        []struct {
			ID       string          `json:"id"`
			Type     string          `json:"type"`
			Data     json.RawMessage `json:"data"`
			Metadata json.RawMessage `json:"metadata"`
			Tags     []string        `json:"tags"`
		} `json:"messages"`
	} `json:"streams"`
	Condition *struct {
		FailIfEventsMatch *multiQuery `json:"fail_if_events_match"`
		FailCamel         *multiQuery `json:"failIfEventsMatch"`
		After             int64       `json:"after"`
	} `json:"condition"`
}

// multiQuery is a condition's query in the file.
type multiQuery struct {
	Items []struct {
		Types []string `json:"types"`
		Tags  []string `json:"tags"`
	} `json:"items"`
}

// oneOf is whichever of the two spellings of a field the file gave; both
// is an error naming them.
func oneOf[T any](where, proto, camel string, a, b *T) (*T, error) {
	if a != nil && b != nil {
		return nil, fmt.Errorf("%s: give %s or %s, not both", where, camel, proto)
	}
	if a != nil {
		return a, nil
	}
	return b, nil
}

func runAppendMulti(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var parts []client.StreamAppend
	var opts []client.AppendOption
	return command.Command[client.AppendMultiResult]{
		Name: "append-multi", Usage: "skald append-multi FILE|-", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			base := fs.Usage
			fs.Usage = func() {
				base()
				fmt.Fprintf(stderr, "\n%s\n", appendMultiHelp)
			}
			return func(args []string) error {
				var raw []byte
				var err error
				if args[0] == "-" {
					raw, err = io.ReadAll(os.Stdin)
				} else {
					raw, err = os.ReadFile(args[0])
				}
				if err != nil {
					return command.Exit(command.ExitUsage, fmt.Errorf("append-multi: %w", err))
				}
				var f multiFile
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&f); err != nil {
					return command.Exit(command.ExitUsage, fmt.Errorf("append-multi: %s: invalid JSON: %v", args[0], err))
				}
				for i, s := range f.Streams {
					expected, err := oneOf(fmt.Sprintf("streams[%d]", i), "expected_version", "expectedVersion", s.ExpectedVersion, s.ExpectedCamel)
					if err != nil {
						return command.Exit(command.ExitUsage, fmt.Errorf("append-multi: %s: %w", args[0], err))
					}
					p := client.StreamAppend{Stream: s.Stream, ExpectedVersion: expected}
					for _, m := range s.Messages {
						var meta []byte
						if len(m.Metadata) > 0 && string(m.Metadata) != "null" {
							meta = m.Metadata
						}
						p.Messages = append(p.Messages, client.NewMessage{ID: m.ID, Type: m.Type, Data: m.Data, Metadata: meta, Tags: m.Tags})
					}
					parts = append(parts, p)
				}
				if cond := f.Condition; cond != nil {
					match, err := oneOf("condition", "fail_if_events_match", "failIfEventsMatch", cond.FailIfEventsMatch, cond.FailCamel)
					if err != nil {
						return command.Exit(command.ExitUsage, fmt.Errorf("append-multi: %s: %w", args[0], err))
					}
					var q client.Query
					if match != nil {
						for _, it := range match.Items {
							q = append(q, client.QueryItem{Types: it.Types, Tags: it.Tags})
						}
					}
					opts = append(opts, client.FailIfMatch(q, cond.After))
				}
				return nil
			}
		},
		Call: func(ctx context.Context, c *client.Client, _ []string) (client.AppendMultiResult, error) {
			return c.AppendMulti(ctx, parts, opts...)
		},
		Text: func(w io.Writer, _ []string, res client.AppendMultiResult) error {
			if res.Duplicate {
				fmt.Fprintln(w, "Already appended (the ids were written before; nothing written):")
			}
			var rows [][]string
			for _, r := range res.Streams {
				rows = append(rows, []string{r.Stream, fmt.Sprintf("%d..%d", r.FirstPosition, r.LastPosition), fmt.Sprintf("%d..%d", r.FirstGlobalPosition, r.LastGlobalPosition)})
			}
			if err := command.Table(w, "STREAM\tPOSITIONS\tGLOBAL POSITIONS", rows); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "index %d\n", res.Index)
			return err
		},
		JSON: func(res client.AppendMultiResult) any { return appendMultiReply(res) }, // without the message ids
	}.Run(ctx, args, stdout, stderr)
}
