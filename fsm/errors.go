package fsm

import (
	"errors"
	"fmt"
)

// Business errors. Apply returns them as per-entry results (never as a
// storage failure); every replica reaches the same verdict for the same
// entry.
var (
	// ErrNamespaceNotFound is returned when a command or read names a
	// namespace that does not exist.
	ErrNamespaceNotFound = errors.New("fsm: namespace not found")
	// ErrNamespaceExists is returned when creating a namespace whose name is
	// taken.
	ErrNamespaceExists = errors.New("fsm: namespace already exists")
	// ErrPositionExists is returned when an import chunk holds a global
	// position or a stream position that is already stored (or twice).
	ErrPositionExists = errors.New("fsm: position exists")
	// ErrBadCommand is returned for a log entry that does not decode as a
	// Command. It means a bug in the proposer; apply rejects it on every
	// replica alike.
	ErrBadCommand = errors.New("fsm: malformed command")
	// ErrStreamNotFound is returned when deleting or truncating a stream
	// that never had a message.
	ErrStreamNotFound = errors.New("fsm: stream not found")
	// ErrStreamDeleted is returned for a write or truncate of a stream that
	// was hard-deleted (a tombstone).
	ErrStreamDeleted = errors.New("fsm: stream was hard-deleted")
	// ErrDuplicateID is matched (errors.Is) by a *DuplicateIDError: an
	// append carried a remembered message id and was not a retry of the
	// append that wrote it.
	ErrDuplicateID = errors.New("fsm: duplicate message id")
	// ErrClosed is returned by reads on a closed store.
	ErrClosed = errors.New("fsm: store closed")
	// ErrNamespaceLimit is matched (errors.Is) by a *NamespaceLimitError:
	// a namespace create was refused because as many namespaces as the
	// leader's limit allows exist already.
	ErrNamespaceLimit = errors.New("fsm: namespace limit reached")
	// ErrInterrupted is the result of each entry of an ApplyBatch that gave
	// up waiting for a resource because the store was interrupted
	// (Store.Interrupt, at shutdown). The entry is not applied; it is
	// committed, and applies when the node starts again. It is never a
	// business verdict.
	ErrInterrupted = errors.New("fsm: apply interrupted while waiting for a resource; the entry applies when the node restarts")
	// ErrLocked is returned by Open when another process (or this one)
	// holds a database's lock file: the data directory is in use. The
	// error names the lock file.
	ErrLocked = errors.New("fsm: data directory in use")
	// ErrIndexExists is returned when creating an index whose name the
	// namespace already uses.
	ErrIndexExists = errors.New("fsm: index already exists")
	// ErrIndexNotFound is returned when a command or read names an index
	// the namespace does not have.
	ErrIndexNotFound = errors.New("fsm: index not found")
	// ErrIndexPaused is returned when a read must wait for an index that
	// is paused (SetIndexState) and does not hold what the read must see:
	// it would wait until the index is resumed.
	ErrIndexPaused = errors.New("fsm: index is paused")
	// ErrIndexFailed is returned when a read names an index this node
	// stopped maintaining after an error confined to it (indexstate.go);
	// the error names the reason. A rebuild clears it.
	ErrIndexFailed = errors.New("fsm: index failed on this node")
)

// NamespaceLimitError is returned when a CreateNamespace finds Limit
// namespaces (CreateNamespace.max_namespaces, stamped by the leader)
// existing already. Nothing was written. It matches ErrNamespaceLimit.
type NamespaceLimitError struct {
	Name  string // the namespace that was not created
	Limit int64
}

func (e *NamespaceLimitError) Error() string { return "fsm: " + e.Describe() }

// Describe is the error's text without the package prefix: what the APIs
// send when they quote it.
func (e *NamespaceLimitError) Describe() string {
	return fmt.Sprintf("namespace %q not created: %d namespaces exist, the most the cluster allows (--max-namespaces); delete one or raise the limit", e.Name, e.Limit)
}

// Is makes errors.Is(err, ErrNamespaceLimit) true.
func (e *NamespaceLimitError) Is(target error) bool { return target == ErrNamespaceLimit }

// VersionConflictError is returned when an append's expected version does
// not match the stream's version at apply time. Nothing was written.
type VersionConflictError struct {
	Stream   string
	Expected int64
	Actual   int64 // -1 when the stream has no message
}

func (e *VersionConflictError) Error() string {
	return fmt.Sprintf("fsm: stream %q: expected version %d, stream is at version %d", e.Stream, e.Expected, e.Actual)
}

// ValidationError is returned when a command carries input that breaks a
// rule (names, sizes, JSON shape). Field names the offending field with
// proto-style paths ("messages[0].data").
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return "fsm: " + e.Describe() }

// Describe is the error's text without the package prefix: what the APIs
// send when they quote it.
func (e *ValidationError) Describe() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
