package nodeapi

import "github.com/skalddb/skald/fsm"

// SettleAction is what Settle does with delivered messages.
type SettleAction int32

const (
	SettleAck   SettleAction = iota // done
	SettleRetry                     // deliver again (parked past max retries)
	SettlePark                      // park now
	SettleSkip                      // done, without processing: like an ack
)

// GroupDelivery is one message handed to a consumer.
type GroupDelivery struct {
	Message fsm.Message
	// Delivery counts deliveries of this message: 1 the first time.
	Delivery int32
}

// GroupState is the owner's live view of a group (GroupStats).
type GroupState struct {
	Active    bool
	Consumers int
	InFlight  int64
	// Lag: messages the owner holds unsettled, plus every message of the
	// namespace past its read position (an upper bound for a stream or
	// category source).
	Lag          int64
	Redeliveries int64
	Acked        int64
	Parked       int64
}
