// Package api is the root of Skald's public API module: the Go code
// generated from rpc/proto (skald/v1 messages in api/skald/v1, the Connect
// clients and handlers in api/skald/v1/skaldv1connect).
//
// It owns nothing hand-written but this comment. It is its own module so
// an application that uses the Go client (github.com/skalddb/skald/client)
// pulls connect-go and protobuf, never the server's module graph; it must
// never import anything of the server. Regenerate with `make generate`.
package api
