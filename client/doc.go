// Package client is the Go client of a Skald cluster: typed calls for
// every EventStore, Namespaces and Cluster method over the generated
// Connect clients, sent to the right member and retried only when that
// is safe.
//
// # What it owns
//
//   - Routing. Writes go to the leader, reads round robin over the
//     members. With the admin token, New and a background loop learn the
//     members and the leader from Cluster.Status. With a namespace token
//     (Cluster.Status is admin only) the members are Config.Endpoints, and
//     the leader is the one a follower names when it forwards a write
//     (the Skald-Leader reply header), taken only if it is one of them.
//     A member that cannot be reached is skipped for Config.DownFor; the
//     client moves on within the caller's context, never past it.
//     Config.Pinned keeps every call on Config.Endpoints (a load
//     balancer, or nodes a tool chose); Config.FailFast gives up after one
//     round over the members instead of waiting for the context.
//   - Retries. Every message gets its id (a UUIDv7) before the first try.
//     A write is retried when it certainly was not applied: the member
//     could not be dialled, or a server refused before proposing (no
//     leader yet, leadership transfer in progress). An append whose
//     outcome is unknown (the connection broke after sending, the server
//     says it may have been applied) is sent again with the same ids: the
//     server deduplicates the ids clients give (within the namespace's
//     dedupe window, 2 minutes by default) and answers a repeat with the
//     original positions, so it lands once. The client retries for at
//     most half the window and not at all when the namespace does not
//     remember ids; then, and for namespace and cluster writes, an
//     unknown outcome returns ErrUnknownOutcome (idempotentWrites,
//     outcome.go). A removal (TruncateStream, DeleteByWatermark, a hard
//     DeleteStream, a soft one with an expected version) whose outcome is
//     unknown is sent again: repeating it removes nothing more. A soft
//     DeleteStream without an expected version is not (streamdelete.go).
//     Reads are retried on another member for any transient failure.
//   - Consistency. Reads are session-consistent by default: the client
//     carries the highest Raft index it wrote or saw applied and every
//     read waits for it on the member that serves it, so a caller reads
//     its own writes on any member. WithLinearizable and WithLocal ask for
//     more or less per call; Config.Consistency changes the default.
//   - Subscriptions. Subscribe is an iter.Seq2 that resumes on another
//     member after a failure, from the message after the last one it
//     delivered: no gap, no repeat.
//   - Errors. Every error wraps a sentinel (ErrWrongExpectedVersion,
//     ErrNotFound, ErrUnavailable, ErrUnknownOutcome, ...) for errors.Is;
//     errors.As gives *Error (endpoint, field violations) and
//     *WrongExpectedVersionError (the stream's actual version).
//
// # What it must never do
//
// Retry a write that may have been applied while servers cannot
// deduplicate it, unless repeating it changes nothing more; retry a definite refusal (a version conflict, bad input,
// a refused token); wait past the caller's context; import the server's
// packages (it depends only on the generated API in rpc/gen).
package client
