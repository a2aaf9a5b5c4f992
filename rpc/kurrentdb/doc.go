// Package kurrentdb serves KurrentDB's gRPC client protocol
// (event_store.client.*) so that KurrentDB's official clients read and
// append to a Skald namespace unchanged.
//
// It owns the translation only: KurrentDB's messages, revisions,
// positions, metadata and error shapes to and from Skald's. Every
// append and read goes through rpc.Local, which authenticates, checks
// role and scope, validates and maps errors as the API port does; this
// package must never reach the node or the state machine around it, and
// must never admit a call the same credential could not make through
// Connect. Authentication is decided from the request headers before
// any request body is read.
//
// The mapping (docs/kurrentdb.md): one connection acts on one namespace,
// the namespace of its credential (Basic credential-name:token, or
// Bearer token), or the namespace a listener without authentication is
// bound to. A stream revision is the Skald stream position; a $all
// position is commit = prepare = the namespace's global position.
// Methods not served answer Unimplemented, and ServerFeatures lists
// exactly the served ones.
package kurrentdb
