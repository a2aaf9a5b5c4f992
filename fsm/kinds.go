package fsm

import (
	"reflect"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Kind is what Skald knows of one kind of command (one field of the
// Command oneof): the facts the leader needs before it proposes one, the
// result apply answers, and the apply function. kinds holds one row per
// kind, and is the only place these facts are written: node's stamp and
// its disk-space and version checks read them, apply dispatches through
// it, and TestKindsCoverCommand fails when a field of the oneof has no
// row. Adding a kind is a row here and its apply function (docs/
// architecture.md, "Adding a command kind").
type Kind struct {
	// Name is the kind's field in the Command oneof ("append").
	Name protoreflect.Name
	// Stamp fills what the leader decides just before it proposes (the
	// time, ids the client did not give), so every replica applies the
	// same entry; nil when the kind carries nothing of the kind. now is
	// the leader's clock (Unix nanoseconds), newID makes a message id.
	Stamp func(c *fsmv1.Command, now int64, newID func() string)
	// Grows: the kind may add data, so the leader refuses it while a
	// voter's disk is nearly full (node's disk-space alarm). Kinds that
	// only remove data, or record the cluster's own state, are let
	// through so an operator can free space.
	Grows bool
	// GrowsWhen, when set, decides in place of Grows for a kind where it
	// depends on the command (resuming an index adds data, pausing it
	// stops its growth). Read both through MayGrow.
	GrowsWhen func(c *fsmv1.Command) bool
	// Version is the StateMachineVersion every server must have reported
	// before the kind may be proposed (0: every version applies it, or an
	// older replica's refusal changes nothing a newer one holds), so a
	// rolling upgrade never puts in the log an entry a replica would apply
	// otherwise.
	Version uint32
	// Result is the field of the Result oneof that answers the kind: its
	// apply function returns that field's value (the message, or true for
	// set_node_info), and answer puts it in the entry's Result. It is the
	// one place that names the field.
	Result protoreflect.Name

	// apply applies the command: the Result member, a business error, or
	// nil when the entry changes nothing (already held: replay).
	apply func(a *applier, l *Entry, c *fsmv1.Command) any
}

// resultOneof is the oneof of fsmv1.Result that answers a kind.
var resultOneof = (&fsmv1.Result{}).ProtoReflect().Descriptor().Oneofs().ByName("result")

// answer is what apply answers for the entry at index, given r, what the
// kind's apply function returned: the Result holding r in the row's
// Result field, or r itself when it is an error or nil. An apply function
// that returns a value of another type than the field's is a bug, and
// panics here (every kind's tests meet it).
func (k *Kind) answer(index uint64, r any) any {
	var v protoreflect.Value
	switch r := r.(type) {
	case proto.Message:
		v = protoreflect.ValueOfMessage(r.ProtoReflect())
	case bool:
		v = protoreflect.ValueOfBool(r)
	default:
		return r
	}
	res := &fsmv1.Result{Index: index}
	res.ProtoReflect().Set(resultOneof.Fields().ByName(k.Result), v)
	return res
}

// MayGrow reports whether cmd, of kind k, may add data (Grows, GrowsWhen).
func (k Kind) MayGrow(cmd *fsmv1.Command) bool {
	if k.GrowsWhen != nil {
		return k.GrowsWhen(cmd)
	}
	return k.Grows
}

// KindOf returns the row of cmd's kind; false for an empty or unknown
// kind (which apply refuses as ErrBadCommand).
func KindOf(cmd *fsmv1.Command) (Kind, bool) {
	k, ok := kinds[reflect.TypeOf(cmd.GetKind())]
	if !ok {
		return Kind{}, false
	}
	return *k, true
}

// kinds is the table of command kinds, by the type of the oneof's
// wrapper (*fsmv1.Command_Append, ...).
var kinds = map[reflect.Type]*Kind{
	kind[*fsmv1.Command_CreateNamespace](): {Name: "create_namespace", Grows: true, Result: "create_namespace",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetCreateNamespace().CreatedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetCreateNamespace, (*applier).createNamespace)},
	kind[*fsmv1.Command_DeleteNamespace](): {Name: "delete_namespace", Result: "delete_namespace",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetDeleteNamespace().DeletedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetDeleteNamespace, (*applier).deleteNamespace)},
	kind[*fsmv1.Command_Append](): {Name: "append", Grows: true, Result: "append",
		Stamp: func(c *fsmv1.Command, now int64, newID func() string) {
			a := c.GetAppend()
			stampTime(&a.TimeUnixNano, now)
			stampIDs(a.Messages, newID)
		},
		apply: on((*fsmv1.Command).GetAppend, (*applier).append)},
	kind[*fsmv1.Command_Import](): {Name: "import", Grows: true, Result: "import",
		apply: on((*fsmv1.Command).GetImport, (*applier).importChunk)},
	kind[*fsmv1.Command_SetNodeInfo](): {Name: "set_node_info", Result: "set_node_info",
		apply: on((*fsmv1.Command).GetSetNodeInfo, (*applier).setNodeInfo)},
	kind[*fsmv1.Command_AppendMulti](): {Name: "append_multi", Grows: true, Result: "append_multi",
		Stamp: func(c *fsmv1.Command, now int64, newID func() string) {
			a := c.GetAppendMulti()
			stampTime(&a.TimeUnixNano, now)
			for _, s := range a.Streams {
				stampIDs(s.Messages, newID)
			}
		},
		apply: on((*fsmv1.Command).GetAppendMulti, (*applier).appendMulti)},
	kind[*fsmv1.Command_TruncateStream](): {Name: "truncate_stream", Result: "stream_deletion",
		apply: on((*fsmv1.Command).GetTruncateStream, (*applier).truncateStream)},
	kind[*fsmv1.Command_DeleteStream](): {Name: "delete_stream", Result: "stream_deletion",
		apply: on((*fsmv1.Command).GetDeleteStream, (*applier).deleteStream)},
	kind[*fsmv1.Command_DeleteByWatermark](): {Name: "delete_by_watermark", Result: "watermark_deletion",
		apply: on((*fsmv1.Command).GetDeleteByWatermark, (*applier).deleteByWatermark)},
	kind[*fsmv1.Command_SetRetentionPolicy](): {Name: "set_retention_policy", Result: "retention_policy",
		apply: on((*fsmv1.Command).GetSetRetentionPolicy, (*applier).setRetentionPolicy)},
	kind[*fsmv1.Command_ExpireMessages](): {Name: "expire_messages", Result: "expiry",
		// Always the leader's clock: the entry expires what is due now.
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) { c.GetExpireMessages().TimeUnixNano = now },
		apply: on((*fsmv1.Command).GetExpireMessages, (*applier).expireMessages)},
	kind[*fsmv1.Command_CreateGroup](): {Name: "create_group", Grows: true, Result: "group",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetCreateGroup().CreatedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetCreateGroup, (*applier).createGroup)},
	kind[*fsmv1.Command_UpdateGroup](): {Name: "update_group", Grows: true, Result: "group",
		apply: on((*fsmv1.Command).GetUpdateGroup, (*applier).updateGroup)},
	kind[*fsmv1.Command_DeleteGroup](): {Name: "delete_group", Grows: true, Result: "group",
		apply: on((*fsmv1.Command).GetDeleteGroup, (*applier).deleteGroup)},
	kind[*fsmv1.Command_GroupProgress](): {Name: "group_progress", Grows: true, Result: "group",
		apply: on((*fsmv1.Command).GetGroupProgress, (*applier).groupProgress)},
	kind[*fsmv1.Command_ReplayParked](): {Name: "replay_parked", Grows: true, Result: "parked_change",
		apply: on((*fsmv1.Command).GetReplayParked, (*applier).replayParked)},
	kind[*fsmv1.Command_DeleteParked](): {Name: "delete_parked", Grows: true, Result: "parked_change",
		apply: on((*fsmv1.Command).GetDeleteParked, (*applier).deleteParked)},
	kind[*fsmv1.Command_IndexTypes](): {Name: "index_types", Grows: true, Result: "index_types",
		apply: on((*fsmv1.Command).GetIndexTypes, (*applier).indexTypes)},
	kind[*fsmv1.Command_CreateIndex](): {Name: "create_index", Grows: true, Version: IndexesVersion, Result: "index_result",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) { stampTime(&c.GetCreateIndex().TimeUnixNano, now) },
		apply: on((*fsmv1.Command).GetCreateIndex, (*applier).createIndex)},
	kind[*fsmv1.Command_DeleteIndex](): {Name: "delete_index", Version: IndexesVersion, Result: "index_result",
		apply: on((*fsmv1.Command).GetDeleteIndex, (*applier).deleteIndex)},
	kind[*fsmv1.Command_RebuildIndex](): {Name: "rebuild_index", Grows: true, Version: IndexesVersion, Result: "index_result",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) { stampTime(&c.GetRebuildIndex().TimeUnixNano, now) },
		apply: on((*fsmv1.Command).GetRebuildIndex, (*applier).rebuildIndex)},
	kind[*fsmv1.Command_SetIndexState](): {Name: "set_index_state", Version: IndexesVersion, Result: "index_result",
		GrowsWhen: func(c *fsmv1.Command) bool { return !c.GetSetIndexState().Paused }, // resuming grows the index again
		apply:     on((*fsmv1.Command).GetSetIndexState, (*applier).setIndexState)},
	kind[*fsmv1.Command_CreateCredential](): {Name: "create_credential", Grows: true, Version: CredentialsVersion, Result: "credential",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetCreateCredential().CreatedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetCreateCredential, (*applier).createCredential)},
	// No version: a revocation goes whatever a server runs or last said.
	// A replica older than CredentialsVersion applies it as a malformed
	// command and writes nothing, which is what it holds of credentials:
	// a create is gated, so a replica that cannot apply the revocation
	// never applied the credential it revokes.
	kind[*fsmv1.Command_RevokeCredential](): {Name: "revoke_credential", Result: "credential",
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetRevokeCredential().RevokedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetRevokeCredential, (*applier).revokeCredential)},
}

// kind is the table's key for the oneof wrapper type W.
func kind[W any]() reflect.Type { return reflect.TypeFor[W]() }

// on makes a row's apply from the oneof getter and the apply function.
func on[C any](get func(*fsmv1.Command) C, apply func(*applier, *Entry, C) any) func(*applier, *Entry, *fsmv1.Command) any {
	return func(a *applier, l *Entry, c *fsmv1.Command) any { return apply(a, l, get(c)) }
}

// stampTime sets *t to now unless the command already carries a time.
func stampTime(t *int64, now int64) {
	if *t == 0 {
		*t = now
	}
}

// stampIDs gives every message without an id one.
func stampIDs(msgs []*fsmv1.NewMessage, newID func() string) {
	for _, m := range msgs {
		if m.Id == "" {
			m.Id = newID()
		}
	}
}
