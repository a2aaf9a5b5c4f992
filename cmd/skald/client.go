package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
	"github.com/skalddb/skald/rpc/gen/skald/v1/skaldv1connect"
)

// Exit codes of the client commands, so scripts can branch on them.
const (
	exitOK          = 0
	exitFailure     = 1 // server or network error
	exitUsage       = 2 // bad command line
	exitAuth        = 3 // unauthenticated or permission denied
	exitNotFound    = 4
	exitConflict    = 5 // version conflict, already exists
	exitUnavailable = 6 // no leader, not caught up: retry
	exitUnreachable = 7 // the node at --addr did not answer (down, wrong address)
)

const clientHelp = `
Connection flags (every client command):
  --addr    node address, host:port or URL (env SKALD_ADDR; default 127.0.0.1:8080)
  --token   bearer token (env SKALD_TOKEN)
  --ca      CA for https:// addresses (env SKALD_CA)
  -o        output: table (default) or json

Exit codes: 0 ok, 1 error, 2 usage, 3 auth, 4 not found, 5 conflict, 6 unavailable (no leader
yet: retry), 7 unreachable (no answer from the node at --addr).
`

// clientFlags are the connection flags every client command takes.
type clientFlags struct {
	addr, token, output, ca string
	usage                   string // the command's one-line synopsis
}

// defaultAddr is the node a client command calls without --addr.
const defaultAddr = "127.0.0.1:8080"

func newClientFlagSet(name, usage string, stderr io.Writer) (*flag.FlagSet, *clientFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := &clientFlags{usage: usage}
	addr := defaultAddr
	if v, ok := os.LookupEnv("SKALD_ADDR"); ok && v != "" {
		addr = v // so --help shows the default in effect
	}
	fs.StringVar(&cf.addr, "addr", addr, "node address, host:port or URL (env SKALD_ADDR)")
	fs.StringVar(&cf.token, "token", "", "bearer token")
	fs.StringVar(&cf.output, "o", "table", "output: table or json")
	fs.StringVar(&cf.ca, "ca", "", "PEM CA to trust for https:// addresses (default: the system's)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, clientHelp)
	}
	return fs, cf
}

// parse parses args, applies the SKALD_ADDR / SKALD_TOKEN fallbacks and
// checks the positional argument count.
//
// A usage error is one line with a hint (the full usage only for --help):
// the flag package's own report and usage dump are silenced.
func (cf *clientFlags) parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	out, full := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	rest, err := parseInterspersed(fs, args)
	fs.SetOutput(out)
	fs.Usage = full
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return nil, err
		}
		return nil, cf.usageError(fs, err.Error())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if v, ok := os.LookupEnv("SKALD_ADDR"); ok && !given["addr"] {
		cf.addr = v
	}
	if v, ok := os.LookupEnv("SKALD_TOKEN"); ok && !given["token"] {
		cf.token = v
	}
	if v, ok := os.LookupEnv("SKALD_CA"); ok && !given["ca"] {
		cf.ca = v
	}
	if cf.output != "table" && cf.output != "json" {
		return nil, &exitError{exitUsage, fmt.Errorf("-o %q: want table or json", cf.output)}
	}
	if len(rest) < minArgs || len(rest) > maxArgs {
		return nil, cf.usageError(fs, "wrong number of arguments")
	}
	return rest, nil
}

// usageError is a usage mistake in one line: what, the synopsis and where
// the full help is.
func (cf *clientFlags) usageError(fs *flag.FlagSet, what string) error {
	return &exitError{exitUsage, fmt.Errorf("%s: %s (usage: %s; see 'skald %s --help')", fs.Name(), what, cf.usage, fs.Name())}
}

// parseInterspersed parses flags placed before, between or after the
// positional arguments ("skald append s-1 T '{}' --expected-version 0"),
// and returns the positional ones. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		i := 0
		for i < len(args) && args[i] != "--" && (len(args[i]) < 2 || args[i][0] != '-') {
			i++
		}
		pos = append(pos, args[:i]...)
		args = args[i:]
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) == 0 {
			return pos, nil
		}
	}
}

func (cf *clientFlags) baseURL() string {
	if strings.HasPrefix(cf.addr, "http://") || strings.HasPrefix(cf.addr, "https://") {
		return strings.TrimSuffix(cf.addr, "/")
	}
	return "http://" + cf.addr
}

type apiClients struct {
	events     skaldv1connect.EventStoreClient
	namespaces skaldv1connect.NamespacesClient
	cluster    skaldv1connect.ClusterClient
}

// httpClient trusts --ca when given.
func (cf *clientFlags) httpClient() *http.Client {
	if cf.ca == "" {
		return &http.Client{}
	}
	pem, err := os.ReadFile(cf.ca)
	pool := x509.NewCertPool()
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintf(os.Stderr, "skald: --ca %s: no PEM certificate (%v); using the system's roots\n", cf.ca, err)
		return &http.Client{}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
}

func (cf *clientFlags) clients() apiClients {
	hc := cf.httpClient()
	opts := connect.WithInterceptors(tokenInterceptor(cf.token))
	url := cf.baseURL()
	return apiClients{
		events:     skaldv1connect.NewEventStoreClient(hc, url, opts),
		namespaces: skaldv1connect.NewNamespacesClient(hc, url, opts),
		cluster:    skaldv1connect.NewClusterClient(hc, url, opts),
	}
}

type tokenInterceptor string

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if t != "" {
			req.Header().Set("Authorization", "Bearer "+string(t))
		}
		return next(ctx, req)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if t != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+string(t))
		}
		return conn
	}
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// apiError turns an RPC failure into a message and an exit code.
//
// A call that could not connect is exitUnreachable, naming the address
// tried: a node that does not answer is not a cluster without a leader.
func apiError(err error) error {
	if ue := unreachable(err); ue != nil {
		return ue
	}
	code := exitFailure
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		code = exitUsage
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		code = exitAuth
	case connect.CodeNotFound:
		code = exitNotFound
	case connect.CodeAborted, connect.CodeAlreadyExists:
		code = exitConflict
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		code = exitUnavailable
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
		for _, d := range ce.Details() {
			v, derr := d.Value()
			if derr != nil {
				continue
			}
			switch v := v.(type) {
			case *errdetails.BadRequest:
				for _, fv := range v.FieldViolations {
					if line := fmt.Sprintf("%s: %s", fv.Field, fv.Description); line != ce.Message() {
						msg += "\n  " + line
					}
				}
			}
		}
	}
	return &exitError{code, errors.New(msg)}
}

// unreachable returns the exitUnreachable error for a call that could not
// connect (refused, no route, unknown host), naming the address tried; nil
// for any other error.
func unreachable(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return nil
	}
	addr := "the node"
	if op.Addr != nil {
		addr = op.Addr.String()
	}
	return &exitError{exitUnreachable, fmt.Errorf("unreachable: no answer from %s (--addr or SKALD_ADDR): %w", addr, op.Err)}
}

// printJSON writes one protobuf message as a JSON object.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// jsonMessage is a message for scripts: data and metadata as JSON, not
// base64.
type jsonMessage struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Type           string          `json:"type"`
	Position       int64           `json:"position"`
	GlobalPosition int64           `json:"globalPosition"`
	Data           json.RawMessage `json:"data"`
	Metadata       json.RawMessage `json:"metadata"`
	Time           string          `json:"time"`
}

func toJSONMessage(m *skaldv1.Message) jsonMessage {
	meta := json.RawMessage("null")
	if len(m.Metadata) > 0 {
		meta = m.Metadata
	}
	return jsonMessage{
		ID: m.Id, Stream: m.Stream, Type: m.Type, Position: m.Position, GlobalPosition: m.GlobalPosition,
		Data: m.Data, Metadata: meta, Time: m.Time.AsTime().Format(time.RFC3339Nano),
	}
}

// printMessages writes messages as a table or as {"messages": [...]}.
func printMessages(w io.Writer, output string, msgs []*skaldv1.Message) error {
	if output == "json" {
		out := struct {
			Messages []jsonMessage `json:"messages"`
		}{Messages: []jsonMessage{}}
		for _, m := range msgs {
			out.Messages = append(out.Messages, toJSONMessage(m))
		}
		return json.NewEncoder(w).Encode(out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tPOS\tGPOS\tTYPE\tTIME\tDATA")
	for _, m := range msgs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", m.Stream, m.Position, m.GlobalPosition, m.Type, m.Time.AsTime().Format(time.RFC3339), m.Data)
	}
	return tw.Flush()
}

func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
