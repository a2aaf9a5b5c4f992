package fsm

import (
	"fmt"
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
	Result Answer

	// apply applies the command: the Result member, a business error, or
	// nil when the entry changes nothing (already held: replay).
	apply func(a *applier, l *Entry, c *fsmv1.Command) any
}

// Answer is a field of the Result oneof that answers a kind: its name,
// and typed code to set and test it, so that no write reads or sets the
// oneof by reflection. Make one with answers.
type Answer struct {
	// Name is the field's name in the Result oneof ("append").
	Name protoreflect.Name
	// set puts v, what the kind's apply function returned, in res's
	// field; false when v is not of the field's type.
	set func(res *fsmv1.Result, v any) bool
	// has reports whether res holds the field.
	has func(res *fsmv1.Result) bool
}

// answers is the Answer of the Result field name, whose oneof wrapper
// wrap makes of the field's value (V: the message, or bool). W, wrap's
// type, is what the field's oneof case holds, so set and has cannot
// disagree about the field.
func answers[V, W any](name protoreflect.Name, wrap func(V) W) Answer {
	return Answer{
		Name: name,
		set: func(res *fsmv1.Result, v any) bool {
			x, ok := v.(V)
			return ok && setOneof(&res.Result, wrap(x))
		},
		has: func(res *fsmv1.Result) bool {
			_, ok := res.GetResult().(W)
			return ok
		},
	}
}

// setOneof sets *dst, a oneof field of interface type I, to w, a case of
// that oneof; false when w is not one.
func setOneof[I any](dst *I, w any) bool {
	c, ok := w.(I)
	if ok {
		*dst = c
	}
	return ok
}

// answer is what apply answers for the entry at index, given r, what the
// kind's apply function returned: the Result holding r in the row's
// Result field, or r itself when it is an error or nil. An apply function
// that returns a value of another type than the field's is a bug, and
// panics here (every kind's tests meet it).
func (k *Kind) answer(index uint64, r any) any {
	switch r.(type) {
	case proto.Message, bool:
	default:
		return r
	}
	res := &fsmv1.Result{Index: index}
	if !k.Result.set(res, r) {
		panic(fmt.Sprintf("fsm: the apply function of %s answered %T, which Result.%s does not hold",
			k.Name, r, k.Result.Name))
	}
	return res
}

// Answered reports whether res holds the Result field that answers k.
func (k *Kind) Answered(res *fsmv1.Result) bool { return k.Result.has(res) }

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

// The fields of the Result oneof that answer the kinds (the table's
// Result column).
var (
	answerAppend = answers("append",
		func(v *fsmv1.AppendResult) *fsmv1.Result_Append {
			return &fsmv1.Result_Append{Append: v}
		})
	answerImport = answers("import",
		func(v *fsmv1.ImportResult) *fsmv1.Result_Import {
			return &fsmv1.Result_Import{Import: v}
		})
	answerCreateNamespace = answers("create_namespace",
		func(v *fsmv1.CreateNamespaceResult) *fsmv1.Result_CreateNamespace {
			return &fsmv1.Result_CreateNamespace{CreateNamespace: v}
		})
	answerDeleteNamespace = answers("delete_namespace",
		func(v *fsmv1.DeleteNamespaceResult) *fsmv1.Result_DeleteNamespace {
			return &fsmv1.Result_DeleteNamespace{DeleteNamespace: v}
		})
	answerSetNodeInfo = answers("set_node_info",
		func(v bool) *fsmv1.Result_SetNodeInfo {
			return &fsmv1.Result_SetNodeInfo{SetNodeInfo: v}
		})
	answerAppendMulti = answers("append_multi",
		func(v *fsmv1.AppendMultiResult) *fsmv1.Result_AppendMulti {
			return &fsmv1.Result_AppendMulti{AppendMulti: v}
		})
	answerStreamDeletion = answers("stream_deletion",
		func(v *fsmv1.StreamDeletionResult) *fsmv1.Result_StreamDeletion {
			return &fsmv1.Result_StreamDeletion{StreamDeletion: v}
		})
	answerWatermarkDeletion = answers("watermark_deletion",
		func(v *fsmv1.WatermarkDeletionResult) *fsmv1.Result_WatermarkDeletion {
			return &fsmv1.Result_WatermarkDeletion{WatermarkDeletion: v}
		})
	answerRetentionPolicy = answers("retention_policy",
		func(v *fsmv1.RetentionPolicyResult) *fsmv1.Result_RetentionPolicy {
			return &fsmv1.Result_RetentionPolicy{RetentionPolicy: v}
		})
	answerExpiry = answers("expiry",
		func(v *fsmv1.ExpiryResult) *fsmv1.Result_Expiry {
			return &fsmv1.Result_Expiry{Expiry: v}
		})
	answerGroup = answers("group",
		func(v *fsmv1.GroupResult) *fsmv1.Result_Group {
			return &fsmv1.Result_Group{Group: v}
		})
	answerParkedChange = answers("parked_change",
		func(v *fsmv1.ParkedChangeResult) *fsmv1.Result_ParkedChange {
			return &fsmv1.Result_ParkedChange{ParkedChange: v}
		})
	answerIndexResult = answers("index_result",
		func(v *fsmv1.IndexResult) *fsmv1.Result_IndexResult {
			return &fsmv1.Result_IndexResult{IndexResult: v}
		})
	answerCredential = answers("credential",
		func(v *fsmv1.CredentialResult) *fsmv1.Result_Credential {
			return &fsmv1.Result_Credential{Credential: v}
		})
	answerIndexTypes = answers("index_types",
		func(v *fsmv1.IndexTypesResult) *fsmv1.Result_IndexTypes {
			return &fsmv1.Result_IndexTypes{IndexTypes: v}
		})
)

// kinds is the table of command kinds, by the type of the oneof's
// wrapper (*fsmv1.Command_Append, ...).
var kinds = map[reflect.Type]*Kind{
	kind[*fsmv1.Command_CreateNamespace](): {Name: "create_namespace", Grows: true, Result: answerCreateNamespace,
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetCreateNamespace().CreatedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetCreateNamespace, (*applier).createNamespace)},
	kind[*fsmv1.Command_DeleteNamespace](): {Name: "delete_namespace", Result: answerDeleteNamespace,
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetDeleteNamespace().DeletedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetDeleteNamespace, (*applier).deleteNamespace)},
	kind[*fsmv1.Command_Append](): {Name: "append", Grows: true, Result: answerAppend,
		Stamp: func(c *fsmv1.Command, now int64, newID func() string) {
			a := c.GetAppend()
			stampTime(&a.TimeUnixNano, now)
			stampIDs(a.Messages, newID)
		},
		apply: on((*fsmv1.Command).GetAppend, (*applier).append)},
	kind[*fsmv1.Command_Import](): {Name: "import", Grows: true, Result: answerImport,
		apply: on((*fsmv1.Command).GetImport, (*applier).importChunk)},
	kind[*fsmv1.Command_SetNodeInfo](): {Name: "set_node_info", Result: answerSetNodeInfo,
		apply: on((*fsmv1.Command).GetSetNodeInfo, (*applier).setNodeInfo)},
	kind[*fsmv1.Command_AppendMulti](): {Name: "append_multi", Grows: true, Result: answerAppendMulti,
		Stamp: func(c *fsmv1.Command, now int64, newID func() string) {
			a := c.GetAppendMulti()
			stampTime(&a.TimeUnixNano, now)
			for _, s := range a.Streams {
				stampIDs(s.Messages, newID)
			}
		},
		apply: on((*fsmv1.Command).GetAppendMulti, (*applier).appendMulti)},
	kind[*fsmv1.Command_TruncateStream](): {Name: "truncate_stream", Result: answerStreamDeletion,
		apply: on((*fsmv1.Command).GetTruncateStream, (*applier).truncateStream)},
	kind[*fsmv1.Command_DeleteStream](): {Name: "delete_stream", Result: answerStreamDeletion,
		apply: on((*fsmv1.Command).GetDeleteStream, (*applier).deleteStream)},
	kind[*fsmv1.Command_DeleteByWatermark](): {Name: "delete_by_watermark", Result: answerWatermarkDeletion,
		apply: on((*fsmv1.Command).GetDeleteByWatermark, (*applier).deleteByWatermark)},
	kind[*fsmv1.Command_SetRetentionPolicy](): {Name: "set_retention_policy", Result: answerRetentionPolicy,
		apply: on((*fsmv1.Command).GetSetRetentionPolicy, (*applier).setRetentionPolicy)},
	kind[*fsmv1.Command_ExpireMessages](): {Name: "expire_messages", Result: answerExpiry,
		// Always the leader's clock: the entry expires what is due now.
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) { c.GetExpireMessages().TimeUnixNano = now },
		apply: on((*fsmv1.Command).GetExpireMessages, (*applier).expireMessages)},
	kind[*fsmv1.Command_CreateGroup](): {Name: "create_group", Grows: true, Result: answerGroup,
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetCreateGroup().CreatedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetCreateGroup, (*applier).createGroup)},
	kind[*fsmv1.Command_UpdateGroup](): {Name: "update_group", Grows: true, Result: answerGroup,
		apply: on((*fsmv1.Command).GetUpdateGroup, (*applier).updateGroup)},
	kind[*fsmv1.Command_DeleteGroup](): {Name: "delete_group", Grows: true, Result: answerGroup,
		apply: on((*fsmv1.Command).GetDeleteGroup, (*applier).deleteGroup)},
	kind[*fsmv1.Command_GroupProgress](): {Name: "group_progress", Grows: true, Result: answerGroup,
		apply: on((*fsmv1.Command).GetGroupProgress, (*applier).groupProgress)},
	kind[*fsmv1.Command_ReplayParked](): {Name: "replay_parked", Grows: true, Result: answerParkedChange,
		apply: on((*fsmv1.Command).GetReplayParked, (*applier).replayParked)},
	kind[*fsmv1.Command_DeleteParked](): {Name: "delete_parked", Grows: true, Result: answerParkedChange,
		apply: on((*fsmv1.Command).GetDeleteParked, (*applier).deleteParked)},
	kind[*fsmv1.Command_IndexTypes](): {Name: "index_types", Grows: true, Result: answerIndexTypes,
		apply: on((*fsmv1.Command).GetIndexTypes, (*applier).indexTypes)},
	kind[*fsmv1.Command_CreateIndex](): {Name: "create_index", Grows: true, Version: IndexesVersion,
		Result: answerIndexResult,
		Stamp:  func(c *fsmv1.Command, now int64, _ func() string) { stampTime(&c.GetCreateIndex().TimeUnixNano, now) },
		apply:  on((*fsmv1.Command).GetCreateIndex, (*applier).createIndex)},
	kind[*fsmv1.Command_DeleteIndex](): {Name: "delete_index", Version: IndexesVersion, Result: answerIndexResult,
		apply: on((*fsmv1.Command).GetDeleteIndex, (*applier).deleteIndex)},
	kind[*fsmv1.Command_RebuildIndex](): {Name: "rebuild_index", Grows: true, Version: IndexesVersion,
		Result: answerIndexResult,
		Stamp:  func(c *fsmv1.Command, now int64, _ func() string) { stampTime(&c.GetRebuildIndex().TimeUnixNano, now) },
		apply:  on((*fsmv1.Command).GetRebuildIndex, (*applier).rebuildIndex)},
	kind[*fsmv1.Command_SetIndexState](): {Name: "set_index_state", Version: IndexesVersion, Result: answerIndexResult,
		GrowsWhen: func(c *fsmv1.Command) bool { return !c.GetSetIndexState().Paused }, // resuming grows the index again
		apply:     on((*fsmv1.Command).GetSetIndexState, (*applier).setIndexState)},
	kind[*fsmv1.Command_CreateCredential](): {Name: "create_credential", Grows: true, Version: CredentialsVersion,
		Result: answerCredential,
		Stamp: func(c *fsmv1.Command, now int64, _ func() string) {
			stampTime(&c.GetCreateCredential().CreatedUnixNano, now)
		},
		apply: on((*fsmv1.Command).GetCreateCredential, (*applier).createCredential)},
	// No version: a revocation goes whatever a server runs or last said.
	// A replica older than CredentialsVersion applies it as a malformed
	// command and writes nothing, which is what it holds of credentials:
	// a create is gated, so a replica that cannot apply the revocation
	// never applied the credential it revokes.
	kind[*fsmv1.Command_RevokeCredential](): {Name: "revoke_credential", Result: answerCredential,
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
