package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/skalddb/skald/client"
)

// Command is one client command as the runner runs it. Run does the part
// every command shares, once, in this order:
//
//  1. flags: the connection flags (NewFlagSet) and the command's own
//     (Flags), parsed with the positional arguments (MinArgs..MaxArgs);
//     then the command's check, before anything is sent;
//  2. connect: --addr, the token, --ns, --ca and the CLI's timeouts
//     (Flags.Connect);
//  3. call: Call, with the client and the positional arguments;
//  4. errors: a failed call becomes its exit code and message (APIError);
//  5. output: Text for -o table, the result itself for -o json (JSON
//     changes what is printed when set).
//
// Commands that do more than one call and print (tail, sub consume,
// export) use the same parts (Flags, APIError, WriteJSON) by hand.
type Command[T any] struct {
	// Name is the command as typed after skald ("ns create"); Usage its
	// one-line synopsis, for --help and usage errors.
	Name, Usage string
	// MinArgs and MaxArgs bound the positional arguments.
	MinArgs, MaxArgs int
	// Flags, when set, declares the command's own flags on fs. The
	// function it returns, when not nil, checks them with the positional
	// arguments after parsing and before connecting: a Mistake it returns
	// is a usage error naming the command; any other error is returned
	// as it is (an *ExitError keeps its code).
	Flags func(fs *flag.FlagSet) (check func(args []string) error)
	// Dial, when set, connects instead of Flags.Connect (to the leader,
	// say); its error is returned as it is.
	Dial func(ctx context.Context, cf *Flags) (*client.Client, error)
	// Call makes the command's call. Its error is mapped by APIError.
	Call func(ctx context.Context, c *client.Client, args []string) (T, error)
	// Text prints the result for -o table; args are the positional
	// arguments.
	Text func(w io.Writer, args []string, r T) error
	// JSON, when set, is what -o json prints of the result: a client
	// value (WriteJSON) or an API message (PrintJSON). Unset, the result
	// itself is printed; an error it returns is the command's.
	JSON func(r T) any
}

// Run runs the command with args, the words after its name.
func (cmd Command[T]) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := NewFlagSet(cmd.Name, cmd.Usage, stderr)
	var check func([]string) error
	if cmd.Flags != nil {
		check = cmd.Flags(fs)
	}
	rest, err := cf.Parse(fs, args, cmd.MinArgs, cmd.MaxArgs)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(rest); err != nil {
			var m *mistake
			if errors.As(err, &m) {
				return cf.UsageError(fs, m.what)
			}
			return err
		}
	}
	dial := (*Flags).Connect
	if cmd.Dial != nil {
		dial = func(cf *Flags, ctx context.Context) (*client.Client, error) { return cmd.Dial(ctx, cf) }
	}
	c, err := dial(cf, ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := cmd.Call(ctx, c, rest)
	if err != nil {
		return APIError(err)
	}
	if cf.Output == "json" {
		var v any = r
		if cmd.JSON != nil {
			v = cmd.JSON(r)
		}
		return Print(stdout, v)
	}
	return cmd.Text(stdout, rest, r)
}

// Print writes v as one line of JSON: an API message as PrintJSON does,
// anything else (the client's types) as WriteJSON does.
func Print(w io.Writer, v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	if m, ok := v.(proto.Message); ok {
		return PrintJSON(w, m)
	}
	return WriteJSON(w, v)
}

// mistake is a usage mistake a command's check found.
type mistake struct{ what string }

func (m *mistake) Error() string { return m.what }

// Mistake is a usage mistake for a Command's check: Run reports it as a
// usage error (exit 2) with the command's synopsis.
func Mistake(format string, args ...any) error {
	return &mistake{what: fmt.Sprintf(format, args...)}
}
