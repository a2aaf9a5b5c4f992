package fsm

import (
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// EncodeCommand returns the bytes of a Raft log entry for cmd. The
// encoding is deterministic so the same command always yields the same
// entry.
func EncodeCommand(cmd *fsmv1.Command) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
}
