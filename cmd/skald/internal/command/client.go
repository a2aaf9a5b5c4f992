package command

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
	"net/url"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/client"
)

// Exit codes of the client commands, so scripts can branch on them.
const (
	ExitOK          = 0
	ExitFailure     = 1 // server or network error
	ExitUsage       = 2 // bad command line
	ExitAuth        = 3 // unauthenticated or permission denied
	ExitNotFound    = 4
	ExitConflict    = 5 // version conflict, already exists, stream hard-deleted, failed precondition
	ExitUnavailable = 6 // no leader, not caught up: retry
	ExitUnreachable = 7 // the node at --addr did not answer (down, wrong address)
)

const ClientHelp = `
Connection flags (every client command):
  --addr    node address: host[:port] or URL; a comma-separated list tries each in turn
            (env SKALD_ADDR; default 127.0.0.1:8080; a host without a port means :8080)
  --token   bearer token (env SKALD_TOKEN); --token-file reads it from a file (env SKALD_TOKEN_FILE)
  --ns      the namespace to act on (env SKALD_NS; default: the token's own; another needs an admin token)
  --ca      CA for https:// addresses (env SKALD_CA)
  -o        output: table (default) or json (errors too, on stderr)

Exit codes: 0 ok, 1 error, 2 usage, 3 auth, 4 not found, 5 conflict (version, exists, stream
hard-deleted), 6 unavailable (no leader yet: retry), 7 unreachable (no answer from the node at
--addr).
`

// clientHelpNoOutput is ClientHelp for the commands without -o.
var clientHelpNoOutput = strings.Replace(ClientHelp, "  -o        output: table (default) or json (errors too, on stderr)\n", "", 1)

// Flags are the connection flags every client command takes.
type Flags struct {
	Addr, Token, Output, CA string
	NS                      string // the namespace an admin token acts on
	TokenFile               string
	usage                   string // the command's one-line synopsis
	noOutput                bool   // the command has no -o
}

// cliReadTimeout bounds one read of a client command, a node that hangs.
const cliReadTimeout = time.Minute

// defaultAddr is the node a client command calls without --addr, and
// defaultPort the port of an --addr host given without one.
const (
	defaultAddr = "127.0.0.1:8080"
	defaultPort = "8080"
)

// FlagSetOption changes what NewFlagSet defines.
type FlagSetOption int

// NoOutput leaves out -o, for commands whose output has one form
// (backup, export).
const NoOutput FlagSetOption = 1

func NewFlagSet(name, usage string, stderr io.Writer, opts ...FlagSetOption) (*flag.FlagSet, *Flags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := &Flags{usage: usage, Output: "table"}
	for _, o := range opts {
		cf.noOutput = cf.noOutput || o == NoOutput
	}
	addr := defaultAddr
	if v, ok := os.LookupEnv("SKALD_ADDR"); ok && v != "" {
		addr = v // so --help shows the default in effect
	}
	fs.StringVar(&cf.Addr, "addr", addr, "node address, host[:port] or URL; a comma-separated list tries each in turn (env SKALD_ADDR)")
	fs.StringVar(&cf.Token, "token", "", "bearer token")
	fs.StringVar(&cf.NS, "ns", "", "the namespace to act on (env SKALD_NS; default: the token's own; another needs an admin token)")
	fs.StringVar(&cf.TokenFile, "token-file", "", "read the bearer token from this file (surrounding whitespace trimmed): off the command line, which every local user can see")
	if !cf.noOutput {
		fs.StringVar(&cf.Output, "o", "table", "output: table or json")
	}
	fs.StringVar(&cf.CA, "ca", "", "PEM CA to trust for https:// addresses (default: the system's)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
		if cf.noOutput {
			fmt.Fprint(stderr, clientHelpNoOutput)
		} else {
			fmt.Fprint(stderr, ClientHelp)
		}
	}
	return fs, cf
}

// Parse parses args, applies the SKALD_ADDR / SKALD_TOKEN fallbacks and
// checks the positional argument count.
//
// A usage error is one line with a hint (the full usage only for --help):
// the flag package's own report and usage dump are silenced.
func (cf *Flags) Parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	out, full := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	rest, err := ParseInterspersed(fs, args)
	fs.SetOutput(out)
	fs.Usage = full
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return nil, err
		}
		return nil, cf.UsageError(fs, err.Error())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if v, ok := os.LookupEnv("SKALD_ADDR"); ok && !given["addr"] {
		cf.Addr = v
	}
	if v, ok := os.LookupEnv("SKALD_TOKEN"); ok && !given["token"] {
		cf.Token = v
	}
	if v, ok := os.LookupEnv("SKALD_NS"); ok && !given["ns"] {
		cf.NS = v
	}
	if v, ok := os.LookupEnv("SKALD_TOKEN_FILE"); ok && !given["token-file"] {
		cf.TokenFile = v
	}
	warnings, err := ReadSecretFiles([]*SecretFile{{Name: "token", Value: &cf.Token, Path: cf.TokenFile}})
	if err != nil {
		return nil, Exit(ExitUsage, err)
	}
	for _, w := range warnings {
		fmt.Fprintf(out, "skald: warning: %s\n", w)
	}
	if v, ok := os.LookupEnv("SKALD_CA"); ok && !given["ca"] {
		cf.CA = v
	}
	if cf.Output != "table" && cf.Output != "json" {
		return nil, Exit(ExitUsage, fmt.Errorf("-o %q: want table or json", cf.Output))
	}
	if _, err := cf.Endpoints(); err != nil {
		return nil, err
	}
	if len(rest) < minArgs || len(rest) > maxArgs {
		return nil, cf.UsageError(fs, "wrong number of arguments")
	}
	return rest, nil
}

// UsageError is a usage mistake in one line: what, the synopsis and where
// the full help is.
func (cf *Flags) UsageError(fs *flag.FlagSet, what string) error {
	return Exit(ExitUsage, fmt.Errorf("%s: %s (usage: %s; see 'skald %s --help')", fs.Name(), what, cf.usage, fs.Name()))
}

// ParseInterspersed parses flags placed before, between or after the
// positional arguments ("skald append s-1 T '{}' --expected-version 0"),
// and returns the positional ones. Everything after "--" is positional.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
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

// Endpoints are --addr's nodes as base URLs, in the order given: a
// comma-separated list, as etcdctl's --endpoints and nats -s take. A host
// without a scheme is http:// and, without a port, Skald's port 8080; a
// URL keeps its scheme's port.
func (cf *Flags) Endpoints() ([]string, error) {
	var out []string
	for _, a := range strings.Split(cf.Addr, ",") {
		u, err := endpointURL(strings.TrimSpace(a))
		if err != nil {
			return nil, Exit(ExitUsage, fmt.Errorf("--addr %q: %w", cf.Addr, err))
		}
		out = append(out, u)
	}
	return out, nil
}

// endpointURL is one --addr entry as a base URL.
func endpointURL(a string) (string, error) {
	if a == "" {
		return "", errors.New("empty address")
	}
	if !strings.Contains(a, "://") {
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(strings.Trim(a, "[]"), defaultPort) // a host, or an IPv6 address, alone
		}
		a = "http://" + a
	}
	u, err := url.Parse(a)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("no host")
	}
	return strings.TrimSuffix(a, "/"), nil
}

// Do sends the request build makes for each of --addr's endpoints in
// turn until one answers: a node that cannot be dialled (nothing was
// sent, so a request body is untouched) moves on to the next. It is how
// the commands that speak plain HTTP (backup, import) take a list. The
// error is Unreachable's, TLSError's, or ExitUnavailable.
func (cf *Flags) Do(ctx context.Context, build func(base string) (*http.Request, error)) (*http.Response, error) {
	eps, err := cf.Endpoints()
	if err != nil {
		return nil, err
	}
	hc := cf.HTTPClient()
	for i, base := range eps {
		req, err := build(base)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req.WithContext(ctx))
		switch ue := Unreachable(err); {
		case err == nil:
			return resp, nil
		case ue != nil && i < len(eps)-1:
			continue
		case ue != nil:
			return nil, ue
		}
		if te := TLSError(err); te != nil {
			return nil, te
		}
		return nil, Exit(ExitUnavailable, err)
	}
	return nil, errors.New("no --addr endpoint") // endpoints refuses an empty list
}

// StatusError is nil for a 200 answer; otherwise the error a command
// that speaks plain HTTP exits with: op, the status and the start of the
// body the server sent (at most 4 KiB of it), under ExitAuth for 401 and
// 403 and ExitFailure for the rest.
func StatusError(op string, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	code := ExitFailure
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		code = ExitAuth
	}
	return Exit(code, fmt.Errorf("%s: %s: %s", op, resp.Status, strings.TrimSpace(string(b))))
}

// BaseURL is the first of --addr's endpoints: the node a command that
// calls one node (leave) calls.
func (cf *Flags) BaseURL() string {
	eps, err := cf.Endpoints()
	if err != nil || len(eps) == 0 {
		return "http://" + defaultAddr // parse refused it already
	}
	return eps[0]
}

// TLSConfig trusts --ca when given; nil means the system's roots.
func (cf *Flags) TLSConfig() *tls.Config {
	if cf.CA == "" {
		return nil
	}
	pem, err := os.ReadFile(cf.CA)
	pool := x509.NewCertPool()
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintf(os.Stderr, "skald: --ca %s: no PEM certificate (%v); using the system's roots\n", cf.CA, err)
		return nil
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// HTTPClient is for the endpoints outside the Connect API (backup,
// import, /metrics); it trusts --ca when given.
func (cf *Flags) HTTPClient() *http.Client {
	tc := cf.TLSConfig()
	if tc == nil {
		return &http.Client{}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
}

// Connect returns a client of the node at --addr, and of it only
// (Pinned): that node serves every call or forwards it to its leader, as
// the user chose it, and "cluster status" is its view. FailFast: a node
// that does not answer or refuses is reported at once, not retried. Reads
// are linearizable, the API's default, and their attempt outlasts the
// server's own bound on waiting (5 s for a leader or an index), so the
// user sees the server's reason rather than a client-side deadline. Close
// it when done.
//
// With several --addr endpoints, each call goes to one of them and moves
// on to the next when a node does not answer.
func (cf *Flags) Connect(ctx context.Context) (*client.Client, error) {
	eps, err := cf.Endpoints()
	if err != nil {
		return nil, err
	}
	if err := cf.NeedToken(); err != nil {
		return nil, err
	}
	c, err := client.New(ctx, client.Config{
		Endpoints: eps, Token: cf.Token, Namespace: cf.NS, TLS: cf.TLSConfig(),
		Consistency: client.Linearizable, Pinned: true, FailFast: true, ReadAttemptTimeout: cliReadTimeout,
		AppendStreams: -1, // a command's appends are one at a time: a stream would only add its opening
	})
	if err != nil {
		return nil, APIError(err)
	}
	return c, nil
}

// NeedToken refuses a call without a token before it is made: the
// server's answer would not say where a token comes from.
func (cf *Flags) NeedToken() error {
	if cf.Token != "" {
		return nil
	}
	return Exit(ExitAuth, errors.New("unauthenticated: no token: set SKALD_TOKEN or pass --token (or --token-file)"))
}

// APIError turns a client error into a message and an exit code: the
// server's code and message, as "code: message", and the field violations
// the message does not already name. The *connect.Error stays wrapped, so
// -o json can print its code.
//
// A call that could not connect is ExitUnreachable, naming the address
// tried: a node that does not answer is not a cluster without a leader.
// A certificate the client does not trust is ExitFailure, naming --ca:
// trying again changes nothing.
func APIError(err error) error {
	if ue := Unreachable(err); ue != nil {
		return ue
	}
	if te := TLSError(err); te != nil {
		return te
	}
	code := ExitFailure
	switch {
	case errors.Is(err, context.Canceled): // Ctrl-C during the call
	case connect.CodeOf(err) == connect.CodeFailedPrecondition: // a paused or failed index, a version gate: the state refuses it
		code = ExitConflict
	case errors.Is(err, client.ErrInvalidArgument):
		code = ExitUsage
	case errors.Is(err, client.ErrUnauthenticated), errors.Is(err, client.ErrPermissionDenied):
		code = ExitAuth
	case errors.Is(err, client.ErrNotFound):
		code = ExitNotFound
	case errors.Is(err, client.ErrWrongExpectedVersion), errors.Is(err, client.ErrAlreadyExists),
		errors.Is(err, client.ErrStreamDeleted), errors.Is(err, client.ErrConditionFailed): // the state refuses it, not the input
		code = ExitConflict
	case errors.Is(err, client.ErrUnavailable):
		code = ExitUnavailable
	case errors.Is(err, client.ErrUnknownOutcome):
		// The write may have been applied: "unavailable" when the server
		// or the connection said so, a plain failure otherwise (an
		// internal error).
		if cc := connect.CodeOf(err); cc == connect.CodeUnavailable || cc == connect.CodeDeadlineExceeded {
			code = ExitUnavailable
		}
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return Exit(code, err)
	}
	msg := fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
	var e *client.Error
	if errors.As(err, &e) {
		for _, fv := range e.Fields {
			if line := fmt.Sprintf("%s: %s", fv.Field, fv.Description); line != ce.Message() {
				msg += "\n  " + line
			}
		}
	}
	return Exit(code, &serverError{msg: msg, err: ce})
}

// serverError is a server's answer as the CLI prints it; it wraps the
// *connect.Error.
type serverError struct {
	msg string
	err *connect.Error
}

func (e *serverError) Error() string { return e.msg }
func (e *serverError) Unwrap() error { return e.err }

// Unreachable returns the ExitUnreachable error for a call that could not
// Connect (refused, no route, unknown host), naming the address tried; nil
// for any other error.
func Unreachable(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return nil
	}
	addr := "the node"
	if op.Addr != nil {
		addr = op.Addr.String()
	}
	return Exit(ExitUnreachable, fmt.Errorf("unreachable: no answer from %s (--addr or SKALD_ADDR): %w", addr, op.Err))
}

// TLSError returns the ExitFailure error for a TLS handshake that failed
// on the node's certificate (not trusted, expired, for another name) or
// on a node that does not speak TLS, saying what to change; nil for any
// other error.
func TLSError(err error) error {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return Exit(ExitFailure, fmt.Errorf("tls: the node's certificate is not accepted (trust its CA with --ca or SKALD_CA; check the address's host name): %w", tlsCause(err)))
	case errors.As(err, &record):
		return Exit(ExitFailure, fmt.Errorf("tls: the node does not speak TLS (use an http:// address): %w", tlsCause(err)))
	}
	return nil
}

// tlsCause is the innermost error below the client's and Connect's
// wrapping: what the TLS handshake said.
func tlsCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
