package rpc

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
)

// Who may call what (docs/access.md). Every Connect procedure and every
// EventoDB method has one row: the least role it needs and what it touches
// of the namespace, for the caller's scope. A call the table does not
// name is refused (TestEveryProcedureHasAccess and
// TestEveryEventoDBMethodHasAccess fail when a procedure or method is
// missing).

// touches is what a call touches of the namespace, for the scope check.
type touches uint8

const (
	// touchesNothing: no stream's data (the namespace's own record,
	// the cluster). Any scope may call it.
	touchesNothing touches = iota
	// touchesAll: the whole namespace ($all, listings, DCB queries, the
	// management of groups and indexes, settings, credentials). It needs
	// an unscoped credential; checked before the body is read.
	touchesAll
	// touchesRequest: the streams or the category the request names,
	// checked against the scope once the request is read (permitScope,
	// evScope).
	touchesRequest
	// touchesSource: the messages of the index or the group the request
	// names. A scoped caller passes the table; the handler checks the
	// definition, on the view it reads, against the scope (indexInScope,
	// groupInScope in scopesource.go) and refuses unless every message
	// the source can hold is in the scope.
	touchesSource
)

// access is one row of the table.
type access struct {
	role    fsm.Role
	touches touches
	// why, for a row touching the whole namespace, says how the call
	// reaches beyond any scope when that is not plain from its name.
	why string
}

var (
	readerStreams = access{role: fsm.RoleReader, touches: touchesRequest}
	readerAll     = access{role: fsm.RoleReader, touches: touchesAll}
	readerSource  = access{role: fsm.RoleReader, touches: touchesSource}
	readerNothing = access{role: fsm.RoleReader, touches: touchesNothing}
	writerStreams = access{role: fsm.RoleWriter, touches: touchesRequest}
	ownerStreams  = access{role: fsm.RoleOwner, touches: touchesRequest}
	ownerAll      = access{role: fsm.RoleOwner, touches: touchesAll}
	adminOnlyRow  = access{role: fsm.RoleAdmin, touches: touchesAll}
	// A DCB query's items name types and tags, never a category: no
	// query lies within a scope.
	readerQuery = access{role: fsm.RoleReader, touches: touchesAll,
		why: "its query selects by type and tag in every category"}
)

// procedureAccess is the Connect table.
var procedureAccess = map[string]access{
	skaldv1connect.EventStoreAppendProcedure:            writerStreams, // a condition reads the namespace: unscoped
	skaldv1connect.EventStoreAppendMultiProcedure:       writerStreams,
	skaldv1connect.EventStoreAppendStreamProcedure:      writerStreams, // each request as Append
	skaldv1connect.EventStoreQueryProcedure:             readerQuery,
	skaldv1connect.EventStoreReadStreamProcedure:        readerStreams,
	skaldv1connect.EventStoreReadCategoryProcedure:      readerStreams,
	skaldv1connect.EventStoreReadAllProcedure:           readerAll,
	skaldv1connect.EventStoreLastMessageProcedure:       readerStreams,
	skaldv1connect.EventStoreStreamVersionProcedure:     readerStreams,
	skaldv1connect.EventStoreListStreamsProcedure:       readerAll,
	skaldv1connect.EventStoreListCategoriesProcedure:    readerAll,
	skaldv1connect.EventStoreSubscribeProcedure:         readerStreams, // all: unscoped
	skaldv1connect.EventStoreDeleteStreamProcedure:      ownerStreams,
	skaldv1connect.EventStoreTruncateStreamProcedure:    ownerStreams,
	skaldv1connect.EventStoreDeleteByWatermarkProcedure: ownerStreams,

	skaldv1connect.NamespacesCreateProcedure:                adminOnlyRow,
	skaldv1connect.NamespacesDeleteProcedure:                adminOnlyRow,
	skaldv1connect.NamespacesListProcedure:                  adminOnlyRow,
	skaldv1connect.NamespacesGetProcedure:                   readerNothing,
	skaldv1connect.NamespacesSetRetentionPolicyProcedure:    ownerAll,
	skaldv1connect.NamespacesListRetentionPoliciesProcedure: readerAll,

	skaldv1connect.SubscriptionsCreateGroupProcedure:  ownerAll,
	skaldv1connect.SubscriptionsUpdateGroupProcedure:  ownerAll,
	skaldv1connect.SubscriptionsDeleteGroupProcedure:  ownerAll,
	skaldv1connect.SubscriptionsReplayParkedProcedure: ownerAll,
	skaldv1connect.SubscriptionsDeleteParkedProcedure: ownerAll,
	skaldv1connect.SubscriptionsGetGroupProcedure:     readerSource,
	skaldv1connect.SubscriptionsListGroupsProcedure:   readerAll,
	skaldv1connect.SubscriptionsListParkedProcedure:   readerSource,
	skaldv1connect.SubscriptionsConsumeProcedure:      readerSource,
	skaldv1connect.SubscriptionsAckProcedure:          readerSource,
	skaldv1connect.SubscriptionsNackProcedure:         readerSource,
	skaldv1connect.IndexesCreateProcedure:             ownerAll,
	skaldv1connect.IndexesDeleteProcedure:             ownerAll,
	skaldv1connect.IndexesRebuildProcedure:            ownerAll,
	skaldv1connect.IndexesPauseProcedure:              ownerAll,
	skaldv1connect.IndexesResumeProcedure:             ownerAll,
	skaldv1connect.IndexesListProcedure:               readerAll,
	skaldv1connect.IndexesInfoProcedure:               readerSource,
	skaldv1connect.IndexesQueryProcedure:              readerSource,
	skaldv1connect.CredentialsCreateProcedure:         ownerAll,
	skaldv1connect.CredentialsListProcedure:           ownerAll,
	skaldv1connect.CredentialsRevokeProcedure:         ownerAll,
	skaldv1connect.ClusterStatusProcedure:             adminOnlyRow,
	skaldv1connect.ClusterTransferLeadershipProcedure: adminOnlyRow,
	skaldv1connect.ClusterRemoveServerProcedure:       adminOnlyRow,
	skaldv1connect.ClusterLeaveProcedure:              adminOnlyRow,
}

// evMethodAccess is the EventoDB table (/rpc methods, and the paths
// /subscribe and /import).
var evMethodAccess = map[string]access{
	"stream.write":               writerStreams,
	"stream.get":                 readerStreams,
	"stream.last":                readerStreams,
	"stream.version":             readerStreams,
	"stream.delete":              ownerStreams,
	"stream.truncate":            ownerStreams,
	"category.deleteByWatermark": ownerStreams,
	"category.get":               readerStreams,
	"ns.create":                  adminOnlyRow,
	"ns.delete":                  adminOnlyRow,
	"ns.list":                    adminOnlyRow,
	"ns.info":                    readerNothing,
	"ns.streams":                 readerAll,
	"ns.categories":              readerAll,
	"ns.setRetention":            ownerAll,
	"ns.retention":               readerAll,
	"token.create":               ownerAll,
	"token.list":                 ownerAll,
	"token.revoke":               ownerAll,
	"sys.version":                readerNothing,
	"sys.health":                 readerNothing,
	evSubscribePath:              readerStreams,
	evImportPath:                 ownerAll,
}

// The EventoDB paths that are not /rpc methods, as they appear in
// evMethodAccess.
const (
	evSubscribePath = "GET /subscribe"
	evImportPath    = "POST /import"
)

// describe names the caller's credential for an error message.
func (c caller) describe() string {
	s := fmt.Sprintf("credential %q (role %s", c.credential, c.role)
	if len(c.scope) > 0 {
		s += ", scope " + strings.Join(c.scope, ",")
	}
	return s + fmt.Sprintf(") of namespace %q", c.home)
}

// onlyOwnNamespace says why c may not act (what: "get", "manage the
// retention of"…) on a namespace other than its own.
func (c caller) onlyOwnNamespace(what string) string {
	return fmt.Sprintf("%s may only %s its own namespace %q; only an admin credential names another namespace", c.describe(), what, c.namespace)
}

// denied is why c may not call method under row a, or nil: its role, or
// its scope when a touches the whole namespace.
func denied(c caller, method string, a access, ok bool) error {
	switch {
	case !ok:
		return fmt.Errorf("%s is not in the access table", method)
	case c.role < a.role:
		return fmt.Errorf("%s may not call %s: it needs the %s role", c.describe(), method, a.role)
	case a.touches == touchesAll && len(c.scope) > 0 && a.why != "":
		return fmt.Errorf("%s may not call %s: %s, beyond the scope %s; it needs an unscoped credential",
			c.describe(), method, a.why, strings.Join(c.scope, ","))
	case a.touches == touchesAll && len(c.scope) > 0:
		return fmt.Errorf("%s may not call %s: it reaches the whole namespace and needs an unscoped credential", c.describe(), method)
	}
	return nil
}

// permit fails PermissionDenied when c may not call procedure.
func permit(c caller, procedure string) error {
	a, ok := procedureAccess[procedure]
	if err := denied(c, strings.TrimPrefix(procedure, "/"), a, ok); err != nil {
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return nil
}

// scopeDenied is the error for a stream or category outside c's scope.
func scopeDenied(c caller, method, what, name string) error {
	return fmt.Errorf("%s may not call %s on %s %q: it is outside the credential's scope", c.describe(), method, what, name)
}

// permitScope fails PermissionDenied when the request msg of procedure
// touches a stream or category outside c's scope. An unscoped caller
// passes at once.
func permitScope(c caller, procedure string, msg any) error {
	if len(c.scope) == 0 || procedureAccess[procedure].touches != touchesRequest {
		return nil
	}
	method := strings.TrimPrefix(procedure, "/")
	stream := func(s string) error {
		if !fsm.ScopeAllowsStream(c.scope, s) {
			return scopeDenied(c, method, "stream", s)
		}
		return nil
	}
	category := func(s string) error {
		if !fsm.ScopeAllowsCategory(c.scope, s) {
			return scopeDenied(c, method, "category", s)
		}
		return nil
	}
	var err error
	switch m := msg.(type) {
	case *skaldv1.AppendRequest:
		if m.Condition != nil {
			err = fmt.Errorf("%s may not call %s with a condition: a condition reads the whole namespace and needs an unscoped credential", c.describe(), method)
		} else {
			err = stream(m.Stream)
		}
	case *skaldv1.AppendStreamRequest:
		return permitScope(c, procedure, m.GetAppend())
	case *skaldv1.AppendMultiRequest:
		for _, s := range m.Streams {
			if err = stream(s.Stream); err != nil {
				break
			}
		}
	case *skaldv1.ReadStreamRequest:
		err = stream(m.Stream)
	case *skaldv1.LastMessageRequest:
		err = stream(m.Stream)
	case *skaldv1.StreamVersionRequest:
		err = stream(m.Stream)
	case *skaldv1.DeleteStreamRequest:
		err = stream(m.Stream)
	case *skaldv1.TruncateStreamRequest:
		err = stream(m.Stream)
	case *skaldv1.ReadCategoryRequest:
		err = category(m.Category)
	case *skaldv1.DeleteByWatermarkRequest:
		err = category(m.Category)
		for s := range m.Watermarks {
			if err != nil {
				break
			}
			err = stream(s)
		}
	case *skaldv1.SubscribeRequest:
		switch t := m.Target.(type) {
		case *skaldv1.SubscribeRequest_Stream:
			err = stream(t.Stream)
		case *skaldv1.SubscribeRequest_Category:
			err = category(t.Category)
		default:
			err = fmt.Errorf("%s may not call %s on every stream: it needs an unscoped credential", c.describe(), method)
		}
	default:
		err = fmt.Errorf("%s: the scope of %T is not known", method, msg)
	}
	if err != nil {
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return nil
}

// lastUsed keeps when each credential last admitted a call on this node,
// to the minute: a read-locked map lookup and one atomic load per call, a
// store once a minute, never a Raft write. It is lost at restart
// (docs/access.md). Entries of revoked credentials stay until restart: a
// few dozen bytes each.
type lastUsed struct {
	mu sync.RWMutex
	m  map[[2]uint64]*atomic.Int64 // {namespace id, credential id} -> unix minutes
}

func (u *lastUsed) touch(c caller) {
	if u == nil {
		return
	}
	minute := time.Now().Unix() / 60
	key := [2]uint64{c.homeID, c.credID}
	u.mu.RLock()
	t := u.m[key]
	u.mu.RUnlock()
	if t == nil {
		u.mu.Lock()
		if t = u.m[key]; t == nil {
			if u.m == nil {
				u.m = make(map[[2]uint64]*atomic.Int64)
			}
			t = new(atomic.Int64)
			u.m[key] = t
		}
		u.mu.Unlock()
	}
	if t.Load() != minute {
		t.Store(minute)
	}
}

// get returns when the credential last admitted a call here (unix ns, to
// the minute), or 0.
func (u *lastUsed) get(nsID, credID uint64) int64 {
	u.mu.RLock()
	t := u.m[[2]uint64{nsID, credID}]
	u.mu.RUnlock()
	if t == nil {
		return 0
	}
	return t.Load() * 60 * int64(time.Second)
}

// credentialRecheck is how often a long call (a subscription, a consumer)
// checks that its credential still admits it, at least: a revocation or
// expiry ends it within this.
const credentialRecheck = time.Second
