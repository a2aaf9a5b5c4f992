package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/nstoken"
)

// exportRecord is one NDJSON line, in the EventoDB import format; time
// keeps every fractional digit so a round trip is exact. Tags is a Skald
// extension, left out when a message has none (EventoDB's import ignores
// it; Skald's indexes the tags again).
type exportRecord struct {
	ID     string          `json:"id"`
	Stream string          `json:"stream"`
	Type   string          `json:"type"`
	Pos    int64           `json:"pos"`
	GPos   int64           `json:"gpos"`
	Data   json.RawMessage `json:"data"`
	Meta   json.RawMessage `json:"meta"`
	Time   string          `json:"time"`
	Tags   []string        `json:"tags,omitempty"`
}

// tokenNamespace is the namespace data calls act on: --ns, which only an
// admin token may set to another namespace than its own, else the
// token's.
func tokenNamespace(token, ns string) (string, error) {
	name, err := nstoken.Parse(token)
	if err != nil {
		return "", command.Exit(command.ExitUsage, fmt.Errorf("--token: %v", err))
	}
	if ns != "" && ns != name {
		if name != nstoken.AdminNamespace {
			return "", command.Exit(command.ExitUsage, fmt.Errorf("--ns %s: the token is %s's; use %s's token or an admin token", ns, name, ns))
		}
		return ns, nil
	}
	return name, nil
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("export", "skald export [--ns NAME] [--category C] [--since TIME] [--gzip] > file.ndjson", stderr, command.NoOutput)
	category := fs.String("category", "", "export only this category")
	since := fs.String("since", "", "only messages written at or after this RFC 3339 time")
	gz := fs.Bool("gzip", false, "gzip the output")
	out := fs.String("out", "-", "output file (- for stdout)")
	if _, err := cf.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := cf.NeedToken(); err != nil {
		return err
	}
	name, err := tokenNamespace(cf.Token, cf.NS)
	if err != nil {
		return err
	}
	var sinceNS int64
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			return command.Exit(command.ExitUsage, fmt.Errorf("--since %q: want RFC 3339: %v", *since, err))
		}
		// UnixNano is undefined outside these: a time past 2262 wrapped
		// and exported everything.
		if lo, hi := time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64); t.Before(lo) || t.After(hi) {
			return command.Exit(command.ExitUsage, fmt.Errorf("--since %q: want a time from %s to %s (the times a message can carry)",
				*since, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339)))

		}
		sinceNS = t.UnixNano()
	}
	var w io.Writer = stdout
	if *out != "-" {
		// 0600: an export holds every event of the namespace. (An existing
		// file keeps its mode.)
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	var zw *gzip.Writer
	if *gz {
		zw = gzip.NewWriter(bw)
		w = zw
	} else {
		w = bw
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	enc := json.NewEncoder(w)
	count, next := 0, int64(1)
	lastReport := time.Now()
	for {
		var msgs []client.Message
		if *category != "" {
			msgs, err = c.ReadCategory(ctx, client.CategoryQuery{Category: *category, GlobalPosition: next, Limit: 1000})
		} else {
			msgs, err = c.ReadAll(ctx, next, 1000)
		}
		if err != nil {
			return command.APIError(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			next = m.GlobalPosition + 1
			if m.Time.UnixNano() < sinceNS {
				continue
			}
			meta := json.RawMessage("null")
			if len(m.Metadata) > 0 {
				meta = m.Metadata
			}
			if err := enc.Encode(exportRecord{ID: m.ID, Stream: m.Stream, Type: m.Type, Pos: m.Position, GPos: m.GlobalPosition,
				Data: m.Data, Meta: meta, Time: m.Time.UTC().Format(time.RFC3339Nano), Tags: m.Tags}); err != nil {
				return err
			}
			count++
		}
		if time.Since(lastReport) > time.Second {
			fmt.Fprintf(stderr, "exported %d messages (global position %d)\n", count, next-1)
			lastReport = time.Now()
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d messages of namespace %s\n", count, name)
	return nil
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("import", "skald import FILE.ndjson[.gz]|- [--force [--yes]]   (- reads standard input)", stderr, command.NoOutput)
	force := fs.Bool("force", false, "delete every message and every subscription group of the namespace first\n(indexes, retention policies and credentials stay)")
	yes := command.AddYes(fs)
	rest, err := cf.Parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := cf.NeedToken(); err != nil {
		return err
	}
	ns, err := tokenNamespace(cf.Token, cf.NS)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	if rest[0] != "-" {
		f, err := os.Open(rest[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if *force {
		ask := os.Stdin
		if rest[0] == "-" {
			ask = nil // standard input is the data: no one to ask
		}
		if err := command.Confirm("import --force",
			"deletes every message and every subscription group of namespace "+ns+" first",
			"Delete every message and every subscription group of namespace "+ns+" before importing?",
			*yes, ask, stderr); err != nil {
			return err
		}
	}
	br := bufio.NewReader(in)
	var body io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		body = zr
	}
	query := ""
	if *force {
		query = "?force=true"
	}
	// A node that cannot be dialled read nothing of body: the next may.
	resp, err := cf.Do(ctx, func(base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/import"+query, body)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+cf.Token)
			if cf.NS != "" {
				req.Header.Set(client.NamespaceHeader, cf.NS)
			}
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
		return req, err
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := command.StatusError("import", resp); err != nil {
		return err
	}
	// Progress lines only for a person watching: a script reads the
	// final line (stdout) or the error.
	f, isFile := stderr.(*os.File)
	progress := isFile && command.IsTerminal(f)
	var imported int64 // as of the last progress event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Imported int64  `json:"imported"`
			GPos     int64  `json:"gpos"`
			Done     bool   `json:"done"`
			Elapsed  string `json:"elapsed"`
			Error    string `json:"error"`
			Message  string `json:"message"`
			Line     int    `json:"line"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return fmt.Errorf("import: bad event %q", line)
		}
		switch {
		case ev.Error != "":
			code := command.ExitFailure
			if ev.Error == "POSITION_EXISTS" {
				code = command.ExitConflict
			} else if ev.Error == "INVALID_JSON" || ev.Error == "INVALID_RECORD" {
				code = command.ExitUsage
			}
			return command.Exit(code, fmt.Errorf("import stopped at line %d: %s: %s (%s before it imported)",
				ev.Line, ev.Error, ev.Message, plural(imported, "message")))
		case ev.Done:
			fmt.Fprintf(stdout, "Imported %s in %s.\n", plural(ev.Imported, "message"), ev.Elapsed)
			return nil
		default:
			imported = ev.Imported
			if progress {
				fmt.Fprintf(stderr, "imported %d messages (global position %d)\n", ev.Imported, ev.GPos)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("import: the server closed the stream without a result")
}
