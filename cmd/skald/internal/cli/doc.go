// Package cli holds the client commands of the skald binary (ns, token,
// append, read, sub, cluster, ...), its usage text, help topics and shell
// completion. Most commands are a command.Command run by its runner.
package cli
