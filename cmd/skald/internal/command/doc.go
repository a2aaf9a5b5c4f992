// Package command is what the client programs of the skald binary share:
// the connection flags and the client they make (Flags, Connect), the one
// mapping of errors to exit codes and messages (APIError, Report), output
// as a table or as JSON (WriteJSON prints the client's types as the API's
// JSON would), and Command, the runner that does a client command's
// repeated part once: flags, connect, call, exit code, output.
//
// It imports no other package of cmd/skald; they import it.
package command
