package node

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// Rejections on the peer service: the state machine's own (fsm.RejectionOf)
// and the refusals of this package, all as an fsmv1.Rejection.

// rejectionOf returns the wire form of err when it is a business error
// (nothing was written), and false otherwise.
func rejectionOf(err error) (*fsmv1.Rejection, bool) {
	var (
		sl *nodeapi.SettingsLimitError
		nf *nodeapi.NotInFlightError
	)
	switch {
	case errors.As(err, &sl):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_SETTINGS_LIMIT, Namespace: sl.Namespace, Limit: sl.Limit, Description: sl.What}, true
	case errors.As(err, &nf):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_NOT_IN_FLIGHT, Message: strings.Join(nf.IDs, ",")}, true
	}
	if r, ok := fsm.RejectionOf(err); ok {
		return r, true
	}
	switch {
	case errors.Is(err, nodeapi.ErrUpgradeRequired):
		return fsm.SentinelRejection(fsmv1.Reason_REASON_UPGRADE_REQUIRED, err), true
	case errors.Is(err, nodeapi.ErrTooManyConsumers):
		return fsm.SentinelRejection(fsmv1.Reason_REASON_TOO_MANY_CONSUMERS, err), true
	}
	return nil, false
}

// errorOf is the inverse of rejectionOf.
func errorOf(r *fsmv1.Rejection) error {
	switch r.Reason {
	case fsmv1.Reason_REASON_SETTINGS_LIMIT:
		return &nodeapi.SettingsLimitError{Namespace: r.Namespace, What: r.Description, Limit: r.Limit}
	case fsmv1.Reason_REASON_NOT_IN_FLIGHT:
		return &nodeapi.NotInFlightError{IDs: strings.Split(r.Message, ",")}
	case fsmv1.Reason_REASON_UPGRADE_REQUIRED:
		return fsm.SentinelError(nodeapi.ErrUpgradeRequired, r)
	case fsmv1.Reason_REASON_TOO_MANY_CONSUMERS:
		return fsm.SentinelError(nodeapi.ErrTooManyConsumers, r)
	}
	if err, ok := fsm.RejectionError(r); ok {
		return err
	}
	return fmt.Errorf("node: unknown rejection %v: %s", r.Reason, r.Message)
}

// legacyRejection is the name the Rejection message had in skald.peer.v1
// before it moved to skald.fsm.v1 (same fields, same bytes). A group
// call's error detail is a google.protobuf.Any, which names the message's
// type: rejectionDetail sends the old name so a node of the previous
// release still reads it, and rejectionIn reads both names. Drop the old
// name once no supported release predates the move.
const legacyRejection = "skald.peer.v1.Rejection"

// rejectionDetail is rej as a Connect error detail.
func rejectionDetail(rej *fsmv1.Rejection) (*connect.ErrorDetail, error) {
	b, err := proto.Marshal(rej)
	if err != nil {
		return nil, err
	}
	return connect.NewErrorDetail(&anypb.Any{TypeUrl: "type.googleapis.com/" + legacyRejection, Value: b})
}

// rejectionIn returns the rejection among ce's details, under either name.
func rejectionIn(ce *connect.Error) (*fsmv1.Rejection, bool) {
	for _, d := range ce.Details() {
		switch d.Type() {
		case legacyRejection, string((&fsmv1.Rejection{}).ProtoReflect().Descriptor().FullName()):
			rej := &fsmv1.Rejection{}
			if proto.Unmarshal(d.Bytes(), rej) == nil {
				return rej, true
			}
		}
	}
	return nil, false
}
