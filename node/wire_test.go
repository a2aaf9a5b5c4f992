package node

import (
	"encoding/hex"
	"errors"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
	peerv1 "github.com/skalddb/skald/node/peerv1"
)

// oldWire holds what the peer service's messages encoded to before the
// results and rejections moved from skald.peer.v1 (ApplyResponse,
// AppendResult, Rejection, ...) to skald.fsm.v1 (Result, ...): captured
// from the previous release's generated types (deterministic marshal) for
// the messages newWire builds.
var oldWire = map[string]string{
	"append":              "082a12160a026e731206616363742d3118032004280a300b3801",
	"append_multi":        "082b42200a026e73120b1203612d3120012801300212091203622d312803300318012003",
	"import":              "082c1a080a026e7310071863",
	"create_namespace":    "082d22100a026e731005188080a8b1e39fe7cb17",
	"delete_namespace":    "082e2a100a026e73100c188180a8b1e39fe7cb17",
	"set_node_info":       "082f3001",
	"stream_deletion":     "08304a0d0a026e731203612d3118022005",
	"watermark_deletion":  "083152080a026e7310031802",
	"retention_policy":    "08325a060a026e731001",
	"expiry":              "0833620a0a026e73100418012001",
	"group":               "08347a0a0a026e7312040a026731",
	"parked_change":       "083582010c0a026e731202673118022001",
	"index_result":        "08368a010f0a026e7312090a0762792d74797065",
	"credential":          "0837c202080a026e7312026369",
	"rejection_conflicts": "3a0d08086a090a03612d3110011802",
	"rejection_duplicate": "3a2a08071a0e6d657373616765735b325d2e69642a03612d314002480350095a026d316207636f6e74656e74",
	"rejection_settings":  "3a150819220b63726564656e7469616c7372026e737864",
	"rejection_message":   "3a1e0829121a66736d3a2063726564656e7469616c206578697374733a206369",
	"batch":               "0a1a0a18082a12140a026e731206616363742d3118032003280a300a0a120a103a0e08042a06616363742d31300138040a1a1218080112146e6f64653a206e6f7420746865206c6561646572",
	"settle":              "0a0708131203612c62",
}

func rejected(r *fsmv1.Rejection) *fsmv1.Result {
	return &fsmv1.Result{Result: &fsmv1.Result_Rejection{Rejection: r}}
}

// newWire is the same content as today's messages.
func newWire() map[string]proto.Message {
	return map[string]proto.Message{
		"append": &fsmv1.Result{Index: 42, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "ns", Stream: "acct-1", FirstPosition: 3, LastPosition: 4,
			FirstGlobalPosition: 10, LastGlobalPosition: 11, Duplicate: true}}},
		"append_multi": &fsmv1.Result{Index: 43, Result: &fsmv1.Result_AppendMulti{AppendMulti: &fsmv1.AppendMultiResult{Namespace: "ns", FirstGlobalPosition: 1, LastGlobalPosition: 3,
			Streams: []*fsmv1.AppendResult{{Stream: "a-1", FirstPosition: 0, LastPosition: 1, FirstGlobalPosition: 1, LastGlobalPosition: 2}, {Stream: "b-1", FirstGlobalPosition: 3, LastGlobalPosition: 3}}}}},
		"import":             &fsmv1.Result{Index: 44, Result: &fsmv1.Result_Import{Import: &fsmv1.ImportResult{Namespace: "ns", Imported: 7, LastGlobalPosition: 99}}},
		"create_namespace":   &fsmv1.Result{Index: 45, Result: &fsmv1.Result_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespaceResult{Name: "ns", Id: 5, CreatedUnixNano: 1700000000000000000}}},
		"delete_namespace":   &fsmv1.Result{Index: 46, Result: &fsmv1.Result_DeleteNamespace{DeleteNamespace: &fsmv1.DeleteNamespaceResult{Name: "ns", MessagesDeleted: 12, DeletedUnixNano: 1700000000000000001}}},
		"set_node_info":      &fsmv1.Result{Index: 47, Result: &fsmv1.Result_SetNodeInfo{SetNodeInfo: true}},
		"stream_deletion":    &fsmv1.Result{Index: 48, Result: &fsmv1.Result_StreamDeletion{StreamDeletion: &fsmv1.StreamDeletionResult{Namespace: "ns", Stream: "a-1", MessagesDeleted: 2, Version: 5}}},
		"watermark_deletion": &fsmv1.Result{Index: 49, Result: &fsmv1.Result_WatermarkDeletion{WatermarkDeletion: &fsmv1.WatermarkDeletionResult{Namespace: "ns", MessagesDeleted: 3, Streams: 2}}},
		"retention_policy":   &fsmv1.Result{Index: 50, Result: &fsmv1.Result_RetentionPolicy{RetentionPolicy: &fsmv1.RetentionPolicyResult{Namespace: "ns", Replaced: true}}},
		"expiry":             &fsmv1.Result{Index: 51, Result: &fsmv1.Result_Expiry{Expiry: &fsmv1.ExpiryResult{Namespace: "ns", MessagesDeleted: 4, Streams: 1, More: true}}},
		"group":              &fsmv1.Result{Index: 52, Result: &fsmv1.Result_Group{Group: &fsmv1.GroupResult{Namespace: "ns", Group: &fsmv1.GroupRecord{Name: "g1"}}}},
		"parked_change":      &fsmv1.Result{Index: 53, Result: &fsmv1.Result_ParkedChange{ParkedChange: &fsmv1.ParkedChangeResult{Namespace: "ns", Group: "g1", Changed: 2, Parked: 1}}},
		"index_result":       &fsmv1.Result{Index: 54, Result: &fsmv1.Result_IndexResult{IndexResult: &fsmv1.IndexResult{Namespace: "ns", Definition: &fsmv1.IndexDefinition{Name: "by-type"}}}},
		"credential":         &fsmv1.Result{Index: 55, Result: &fsmv1.Result_Credential{Credential: &fsmv1.CredentialResult{Namespace: "ns", Name: "ci"}}},
		"rejection_conflicts": rejected(&fsmv1.Rejection{Reason: fsmv1.Reason_REASON_VERSION_CONFLICTS,
			Conflicts: []*fsmv1.StreamConflict{{Stream: "a-1", ExpectedVersion: 1, ActualVersion: 2}}}),
		"rejection_duplicate": rejected(&fsmv1.Rejection{Reason: fsmv1.Reason_REASON_DUPLICATE_ID, Record: 2, Id: "m1", Stream: "a-1", Position: 3, GlobalPosition: 9,
			DuplicateReason: "content", Field: "messages[2].id"}),
		"rejection_settings": rejected(&fsmv1.Rejection{Reason: fsmv1.Reason_REASON_SETTINGS_LIMIT, Namespace: "ns", Limit: 100, Description: "credentials"}),
		"rejection_message":  rejected(&fsmv1.Rejection{Reason: fsmv1.Reason_REASON_CREDENTIAL_EXISTS, Message: "fsm: credential exists: ci"}),
		"batch": &peerv1.ApplyBatchResponse{Outcomes: []*peerv1.ApplyOutcome{
			{Outcome: &peerv1.ApplyOutcome_Response{Response: &fsmv1.Result{Index: 42, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{Namespace: "ns", Stream: "acct-1",
				FirstPosition: 3, LastPosition: 3, FirstGlobalPosition: 10, LastGlobalPosition: 10}}}}},
			{Outcome: &peerv1.ApplyOutcome_Response{Response: rejected(&fsmv1.Rejection{Reason: fsmv1.Reason_REASON_VERSION_CONFLICT, Stream: "acct-1", ExpectedVersion: 1, ActualVersion: 4})}},
			{Outcome: &peerv1.ApplyOutcome_Failure{Failure: &peerv1.ApplyFailure{Kind: peerv1.FailureKind_FAILURE_KIND_NOT_LEADER, Message: "node: not the leader"}}},
		}},
		"settle": &peerv1.GroupSettleResponse{Rejection: &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_NOT_IN_FLIGHT, Message: "a,b"}},
	}
}

// TestWireUnchangedByResultMove: fsm's Result and Rejection encode to the
// bytes the peer service's ApplyResponse and Rejection did, and decode
// what a node of the previous release sends, so old and new nodes forward
// writes to each other during a rolling upgrade.
func TestWireUnchangedByResultMove(t *testing.T) {
	t.Parallel()
	msgs := newWire()
	if len(msgs) != len(oldWire) {
		t.Fatalf("%d messages, %d captured", len(msgs), len(oldWire))
	}
	for name, m := range msgs {
		t.Run(name, func(t *testing.T) {
			old, err := hex.DecodeString(oldWire[name])
			if err != nil {
				t.Fatal(err)
			}
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(got) != oldWire[name] {
				t.Errorf("encodes to %x, the previous release to %s", got, oldWire[name])
			}
			back := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(old, back); err != nil {
				t.Fatalf("decode the previous release's bytes: %v", err)
			}
			if !proto.Equal(back, m) {
				t.Errorf("the previous release's bytes decode to %v, want %v", back, m)
			}
		})
	}
}

// TestOldAnswersDecode: what a leader of the previous release answers a
// forwarded write comes back from the peer client as the error or result
// it stood for.
func TestOldAnswersDecode(t *testing.T) {
	t.Parallel()
	decode := func(name string, m proto.Message) proto.Message {
		t.Helper()
		b, _ := hex.DecodeString(oldWire[name])
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	res, err := answer(decode("append", &fsmv1.Result{}).(*fsmv1.Result))
	if err != nil || res.Index != 42 || res.GetAppend().FirstGlobalPosition != 10 || !res.GetAppend().Duplicate {
		t.Fatalf("append: %v, %v", res, err)
	}
	_, err = answer(decode("rejection_conflicts", &fsmv1.Result{}).(*fsmv1.Result))
	var vs *fsm.VersionConflictsError
	if !errors.As(err, &vs) || len(vs.Conflicts) != 1 || vs.Conflicts[0] != (fsm.VersionConflictError{Stream: "a-1", Expected: 1, Actual: 2}) {
		t.Fatalf("conflicts: %v", err)
	}
	_, err = answer(decode("rejection_settings", &fsmv1.Result{}).(*fsmv1.Result))
	var sl *nodeapi.SettingsLimitError
	if !errors.As(err, &sl) || *sl != (nodeapi.SettingsLimitError{Namespace: "ns", What: "credentials", Limit: 100}) {
		t.Fatalf("settings limit: %v", err)
	}
	_, err = answer(decode("rejection_message", &fsmv1.Result{}).(*fsmv1.Result))
	if !errors.Is(err, fsm.ErrCredentialExists) || err.Error() != "fsm: credential already exists: fsm: credential exists: ci" {
		t.Fatalf("credential exists: %v", err)
	}
	batch := decode("batch", &peerv1.ApplyBatchResponse{}).(*peerv1.ApplyBatchResponse)
	if r, err := resultOf(batch.Outcomes[0]); err != nil || r.GetAppend().Stream != "acct-1" {
		t.Fatalf("batch outcome 0: %v, %v", r, err)
	}
	var vc *fsm.VersionConflictError
	if _, err := resultOf(batch.Outcomes[1]); !errors.As(err, &vc) || vc.Actual != 4 {
		t.Fatalf("batch outcome 1: %v", err)
	}
	if _, err := resultOf(batch.Outcomes[2]); !errors.Is(err, errNotLeader) {
		t.Fatalf("batch outcome 2: %v", err)
	}
	settle := decode("settle", &peerv1.GroupSettleResponse{}).(*peerv1.GroupSettleResponse)
	var nf *nodeapi.NotInFlightError
	if err := errorOf(settle.Rejection); !errors.As(err, &nf) || len(nf.IDs) != 2 || nf.IDs[1] != "b" {
		t.Fatalf("settle: %v", err)
	}
}

// TestRejectionDetailNames: a group call's rejection travels as an error
// detail (an Any, which names the message): sent under the previous
// release's name, read under either.
func TestRejectionDetailNames(t *testing.T) {
	t.Parallel()
	rej := &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_GROUP_NOT_FOUND, Message: "fsm: subscription group not found: \"g\""}
	d, err := rejectionDetail(rej)
	if err != nil {
		t.Fatal(err)
	}
	if d.Type() != "skald.peer.v1.Rejection" {
		t.Fatalf("detail named %q: a node of the previous release would not read it", d.Type())
	}
	current, err := connect.NewErrorDetail(rej)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*connect.ErrorDetail{d, current} {
		ce := connect.NewError(connect.CodeFailedPrecondition, errors.New(rej.Message))
		ce.AddDetail(d)
		got, ok := rejectionIn(ce)
		if !ok || !proto.Equal(got, rej) {
			t.Fatalf("%s: read %v, %v", d.Type(), got, ok)
		}
		if err := errorOf(got); !errors.Is(err, fsm.ErrGroupNotFound) || err.Error() != rej.Message {
			t.Fatalf("%s: error %v", d.Type(), err)
		}
	}
}
