package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/client"
)

// Exit codes of the client commands, so scripts can branch on them.
const (
	exitOK          = 0
	exitFailure     = 1 // server or network error
	exitUsage       = 2 // bad command line
	exitAuth        = 3 // unauthenticated or permission denied
	exitNotFound    = 4
	exitConflict    = 5 // version conflict, already exists, stream hard-deleted
	exitUnavailable = 6 // no leader, not caught up: retry
	exitUnreachable = 7 // the node at --addr did not answer (down, wrong address)
)

const clientHelp = `
Connection flags (every client command):
  --addr    node address, host:port or URL (env SKALD_ADDR; default 127.0.0.1:8080)
  --token   bearer token (env SKALD_TOKEN); --token-file reads it from a file (env SKALD_TOKEN_FILE)
  --ca      CA for https:// addresses (env SKALD_CA)
  -o        output: table (default) or json

Exit codes: 0 ok, 1 error, 2 usage, 3 auth, 4 not found, 5 conflict (version, exists, stream
hard-deleted), 6 unavailable (no leader yet: retry), 7 unreachable (no answer from the node at
--addr).
`

// clientFlags are the connection flags every client command takes.
type clientFlags struct {
	addr, token, output, ca string
	tokenFile               string
	usage                   string // the command's one-line synopsis
}

// cliReadTimeout bounds one read of a client command, a node that hangs.
const cliReadTimeout = time.Minute

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
	fs.StringVar(&cf.tokenFile, "token-file", "", "read the bearer token from this file (surrounding whitespace trimmed): off the command line, which every local user can see")
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
	if v, ok := os.LookupEnv("SKALD_TOKEN_FILE"); ok && !given["token-file"] {
		cf.tokenFile = v
	}
	warnings, err := readSecretFiles([]*secretFile{{name: "token", value: &cf.token, path: cf.tokenFile}})
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	for _, w := range warnings {
		fmt.Fprintf(out, "skald: warning: %s\n", w)
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

// tlsConfig trusts --ca when given; nil means the system's roots.
func (cf *clientFlags) tlsConfig() *tls.Config {
	if cf.ca == "" {
		return nil
	}
	pem, err := os.ReadFile(cf.ca)
	pool := x509.NewCertPool()
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintf(os.Stderr, "skald: --ca %s: no PEM certificate (%v); using the system's roots\n", cf.ca, err)
		return nil
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// httpClient is for the endpoints outside the Connect API (backup,
// import, /metrics); it trusts --ca when given.
func (cf *clientFlags) httpClient() *http.Client {
	tc := cf.tlsConfig()
	if tc == nil {
		return &http.Client{}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
}

// connect returns a client of the node at --addr, and of it only
// (Pinned): that node serves every call or forwards it to its leader, as
// the user chose it, and "cluster status" is its view. FailFast: a node
// that does not answer or refuses is reported at once, not retried. Reads
// are linearizable, the API's default, and their attempt outlasts the
// server's own bound on waiting (5 s for a leader or an index), so the
// user sees the server's reason rather than a client-side deadline. Close
// it when done.
func (cf *clientFlags) connect(ctx context.Context) (*client.Client, error) {
	c, err := client.New(ctx, client.Config{
		Endpoints: []string{cf.baseURL()}, Token: cf.token, TLS: cf.tlsConfig(),
		Consistency: client.Linearizable, Pinned: true, FailFast: true, ReadAttemptTimeout: cliReadTimeout,
	})
	if err != nil {
		return nil, apiError(err)
	}
	return c, nil
}

// apiError turns a client error into a message and an exit code: the
// server's code and message, as "code: message", and the field violations
// the message does not already name.
//
// A call that could not connect is exitUnreachable, naming the address
// tried: a node that does not answer is not a cluster without a leader.
func apiError(err error) error {
	if ue := unreachable(err); ue != nil {
		return ue
	}
	code := exitFailure
	switch {
	case errors.Is(err, context.Canceled): // Ctrl-C during the call
	case errors.Is(err, client.ErrInvalidArgument):
		code = exitUsage
	case errors.Is(err, client.ErrUnauthenticated), errors.Is(err, client.ErrPermissionDenied):
		code = exitAuth
	case errors.Is(err, client.ErrNotFound):
		code = exitNotFound
	case errors.Is(err, client.ErrWrongExpectedVersion), errors.Is(err, client.ErrAlreadyExists),
		errors.Is(err, client.ErrStreamDeleted), errors.Is(err, client.ErrConditionFailed): // the state refuses it, not the input
		code = exitConflict
	case errors.Is(err, client.ErrUnavailable):
		code = exitUnavailable
	case errors.Is(err, client.ErrUnknownOutcome):
		// The write may have been applied: "unavailable" when the server
		// or the connection said so, a plain failure otherwise (an
		// internal error).
		if cc := connect.CodeOf(err); cc == connect.CodeUnavailable || cc == connect.CodeDeadlineExceeded {
			code = exitUnavailable
		}
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
		var e *client.Error
		if errors.As(err, &e) {
			for _, fv := range e.Fields {
				if line := fmt.Sprintf("%s: %s", fv.Field, fv.Description); line != ce.Message() {
					msg += "\n  " + line
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
