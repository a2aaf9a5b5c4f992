package cli

import (
	"fmt"
	"io"
	"sort"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// helpTopics are `skald help TOPIC`: what a man page would hold that no
// single command's --help does. They restate README.md and docs/api.md;
// keep them in step.
var helpTopics = map[string]string{
	"exit-codes": `Exit codes of skald's client commands

  0  ok
  1  error (also a TLS certificate the client does not trust: pass --ca)
  2  usage or invalid input (nothing was changed)
  3  authentication: no token, a malformed or unknown one, or one not allowed to do this
  4  not found (namespace, stream, group, parked message)
  5  conflict: expected version, already exists, stream hard-deleted, condition failed, a paused or failed index (the state refuses the call)
  6  unavailable: no leader yet, node not caught up, shutting down; retry
  7  unreachable: the node at --addr did not answer (down, or a wrong address)

Under -o json an error is one object on stderr:
  {"error":{"exitCode":4,"code":"not_found","message":"..."}}
`,
	"consistency": `Consistency levels of reads (ReadOptions.consistency)

  linearizable  the default: the node confirms with the leader (a read index) and waits until it
                has applied that far, so a read sees every write acknowledged before it began,
                on any node
  session       waits until the node has applied min_index (the index a write or an earlier read
                returned): read-your-writes on any node without asking the leader; Unavailable
                after the deadline or 5 s
  local         answers from what the node has applied now; with max_staleness a follower that
                has not heard from the leader within it answers Unavailable

Writes always go through the leader: a follower forwards them and names the leader in a
Skald-Leader header. The Go client uses session by default. See docs/api.md.
`,
	"tokens": `Tokens

  ns_<base64url(namespace), no padding>_<64 hex characters>

A token is one credential of one namespace, which clients read from the token itself, with a role
(reader, writer, owner, admin) and an optional scope; the server keeps only its SHA-256. A
namespace's first token ('skald ns create NAME', printed once) is its owner credential "initial";
more come from 'skald token create NAME --role R [--scope C,P*] [--expires 30d]', and
'skald token revoke NAME' refuses one on every node (docs/access.md, with a rotation runbook).
Admin credentials are the "default" namespace's: they manage namespaces and the cluster, their
data calls act on "default", and --ns NAME (SKALD_NS) makes a command act on another namespace.

Client commands take --token or SKALD_TOKEN, or --token-file / SKALD_TOKEN_FILE (a file, so the
token is not on the command line). The EventoDB API takes the same tokens as
'Authorization: Bearer <token>'.
`,
}

// helpTopicNames lists the topics, sorted.
func helpTopicNames() []string {
	names := make([]string, 0, len(helpTopics))
	for n := range helpTopics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runHelp prints the usage, a topic, or a command's --help.
func runHelp(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, Usage)
		fmt.Fprintf(stdout, "\nHelp topics: skald help %v\n", helpTopicNames())
		return nil
	}
	if t, ok := helpTopics[args[0]]; ok {
		fmt.Fprint(stdout, t)
		return nil
	}
	return command.Exit(2, fmt.Errorf("help: no topic %q; topics: %v (and skald COMMAND --help for a command)", args[0], helpTopicNames()))
}
