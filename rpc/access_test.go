package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
)

// The access model as docs/access.md states it, written independently of
// access.go's table: the least role of each call, and what it touches
// (nothing of the data, the whole namespace, or the stream or category it
// names, itself or as the source of the index or group it names). The
// tests below call every procedure and method with every role, scoped
// and not, and check each refusal (and each admission) against it.
type spec struct {
	role    fsm.Role
	touches string // "nothing", "whole" or "target"
}

var (
	rdTarget = spec{fsm.RoleReader, "target"}
	rdWhole  = spec{fsm.RoleReader, "whole"}
	rdNone   = spec{fsm.RoleReader, "nothing"}
	wrTarget = spec{fsm.RoleWriter, "target"}
	owTarget = spec{fsm.RoleOwner, "target"}
	owWhole  = spec{fsm.RoleOwner, "whole"}
	admin    = spec{fsm.RoleAdmin, "whole"}
)

// connectSpec: procedure -> spec, and a JSON request naming the stream
// {s} or the category {c}.
var connectSpec = map[string]struct {
	spec
	body string
}{
	"skald.v1.EventStore/Append":            {wrTarget, `{"stream":"{s}","messages":[{"type":"T","data":"e30="}]}`},
	"skald.v1.EventStore/AppendStream":      {wrTarget, `{"id":"1","append":{"stream":"{s}","messages":[{"type":"T","data":"e30="}]}}`},
	"skald.v1.EventStore/AppendMulti":       {wrTarget, `{"streams":[{"stream":"{s}","messages":[{"type":"T","data":"e30="}]}]}`},
	"skald.v1.EventStore/Query":             {rdWhole, `{}`},
	"skald.v1.EventStore/ReadStream":        {rdTarget, `{"stream":"{s}"}`},
	"skald.v1.EventStore/ReadCategory":      {rdTarget, `{"category":"{c}"}`},
	"skald.v1.EventStore/ReadAll":           {rdWhole, `{}`},
	"skald.v1.EventStore/LastMessage":       {rdTarget, `{"stream":"{s}"}`},
	"skald.v1.EventStore/StreamVersion":     {rdTarget, `{"stream":"{s}"}`},
	"skald.v1.EventStore/ListStreams":       {rdWhole, `{}`},
	"skald.v1.EventStore/ListCategories":    {rdWhole, `{}`},
	"skald.v1.EventStore/Subscribe":         {rdTarget, `{"stream":"{s}"}`},
	"skald.v1.EventStore/DeleteStream":      {owTarget, `{"stream":"{s}-none"}`},
	"skald.v1.EventStore/TruncateStream":    {owTarget, `{"stream":"{s}-none","before":1}`},
	"skald.v1.EventStore/DeleteByWatermark": {owTarget, `{"category":"{c}"}`},

	"skald.v1.Namespaces/Create":                {admin, `{"name":""}`},
	"skald.v1.Namespaces/Delete":                {admin, `{"name":""}`},
	"skald.v1.Namespaces/List":                  {admin, `{}`},
	"skald.v1.Namespaces/Get":                   {rdNone, `{"name":"app"}`},
	"skald.v1.Namespaces/SetRetentionPolicy":    {owWhole, `{}`},
	"skald.v1.Namespaces/ListRetentionPolicies": {rdWhole, `{"namespace":"app"}`},

	"skald.v1.Subscriptions/CreateGroup":  {owWhole, `{}`},
	"skald.v1.Subscriptions/UpdateGroup":  {owWhole, `{}`},
	"skald.v1.Subscriptions/DeleteGroup":  {owWhole, `{"name":"nope"}`},
	"skald.v1.Subscriptions/ReplayParked": {owWhole, `{}`},
	"skald.v1.Subscriptions/DeleteParked": {owWhole, `{}`},
	"skald.v1.Subscriptions/GetGroup":     {rdTarget, `{"name":"{c}-g"}`},
	"skald.v1.Subscriptions/ListGroups":   {rdWhole, `{}`},
	"skald.v1.Subscriptions/ListParked":   {rdTarget, `{"group":"{c}-g"}`},
	"skald.v1.Subscriptions/Consume":      {rdTarget, `{"group":"{c}-g","consumer":"c"}`},
	"skald.v1.Subscriptions/Ack":          {rdTarget, `{"group":"{c}-g","ids":["x"]}`},
	"skald.v1.Subscriptions/Nack":         {rdTarget, `{"group":"{c}-g","ids":["x"]}`},

	"skald.v1.Indexes/Create":  {owWhole, `{}`},
	"skald.v1.Indexes/Delete":  {owWhole, `{"name":"nope"}`},
	"skald.v1.Indexes/Rebuild": {owWhole, `{"name":"nope"}`},
	"skald.v1.Indexes/Pause":   {owWhole, `{"name":"nope"}`},
	"skald.v1.Indexes/Resume":  {owWhole, `{"name":"nope"}`},
	"skald.v1.Indexes/List":    {rdWhole, `{}`},
	"skald.v1.Indexes/Info":    {rdTarget, `{"name":"{c}-idx"}`},
	"skald.v1.Indexes/Query":   {rdTarget, `{"name":"{c}-idx"}`},

	"skald.v1.Credentials/Create": {owWhole, `{"name":""}`},
	"skald.v1.Credentials/List":   {owWhole, `{}`},
	"skald.v1.Credentials/Revoke": {owWhole, `{"name":"nobody"}`},

	"skald.v1.Cluster/Status":             {admin, `{}`},
	"skald.v1.Cluster/TransferLeadership": {admin, `{"id":"nope"}`},
	"skald.v1.Cluster/RemoveServer":       {admin, `{"id":"nope"}`},
	"skald.v1.Cluster/Leave":              {admin, `{}`}, // not called with the admin token: the node would leave
}

// evSpec: EventoDB method -> spec and its arguments ({s} the stream,
// {c} the category).
var evSpec = map[string]struct {
	spec
	args string
}{
	"stream.write":               {wrTarget, `"{s}", {"type":"T","data":{}}`},
	"stream.get":                 {rdTarget, `"{s}"`},
	"stream.last":                {rdTarget, `"{s}"`},
	"stream.version":             {rdTarget, `"{s}"`},
	"stream.delete":              {owTarget, `"{s}-none"`},
	"stream.truncate":            {owTarget, `"{s}-none", 1`},
	"category.get":               {rdTarget, `"{c}"`},
	"category.deleteByWatermark": {owTarget, `"{c}", {}`},
	"ns.create":                  {admin, `""`},
	"ns.delete":                  {admin, `""`},
	"ns.list":                    {admin, ``},
	"ns.info":                    {rdNone, `"app"`},
	"ns.streams":                 {rdWhole, `"app"`},
	"ns.categories":              {rdWhole, `"app"`},
	"ns.setRetention":            {owWhole, ``},
	"ns.retention":               {rdWhole, ``},
	"token.create":               {owWhole, `""`},
	"token.list":                 {owWhole, ``},
	"token.revoke":               {owWhole, `"nobody"`},
	"sys.version":                {rdNone, ``},
	"sys.health":                 {rdNone, ``},
	evSubscribePath:              {rdTarget, `stream={s}`},
	evImportPath:                 {owWhole, ``},
}

// accessCase is one credential the table is run with.
type accessCase struct {
	name   string
	role   fsm.Role
	scoped bool // scope: the category "invoice"
	token  string
}

// accessSetup starts a node with namespace app and a credential of each
// role (an owner and a writer scoped to the category invoice among them).
// Each of the categories invoice and order has messages, an index
// ({c}-idx) and a group ({c}-g) over it.
func accessSetup(t *testing.T) (*server, []accessCase) {
	s := single(t)
	appToken, _ := nstoken.New("app")
	if _, err := s.n.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "app", TokenHash: nstoken.Hash(appToken)}); err != nil {
		t.Fatal(err)
	}
	own := newClients(s, protocols[0], appToken)
	for _, category := range []string{"invoice", "order"} {
		appendMsgs(t, own, category+"-1", "T", 20) // a delivery for each consumer the table starts
		createGroup(t, own, &skaldv1.CreateGroupRequest{Name: category + "-g",
			Source: &skaldv1.CreateGroupRequest_Category{Category: category}})
		if _, err := own.indexes.Create(ctxT(t), connect.NewRequest(&skaldv1.IndexesCreateRequest{
			Definition: &skaldv1.IndexDefinition{Name: category + "-idx", Version: 1, Category: category,
				Fields: []*skaldv1.IndexField{{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA,
					Pointer: "/i", Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_INT}}}})); err != nil {
			t.Fatal(err)
		}
	}
	cases := []accessCase{{"admin", fsm.RoleAdmin, false, adminToken}, {"owner (initial)", fsm.RoleOwner, false, appToken}}
	for _, c := range []accessCase{{"writer", fsm.RoleWriter, false, ""}, {"reader", fsm.RoleReader, false, ""},
		{"scoped-owner", fsm.RoleOwner, true, ""}, {"scoped-writer", fsm.RoleWriter, true, ""}, {"scoped-reader", fsm.RoleReader, true, ""}} {
		c.token = createCredential(t, s, appToken, c.name, c.role, c.scoped)
		cases = append(cases, c)
	}
	return s, cases
}

// createCredential creates a credential through the Credentials service
// with the owner token, and returns its token.
func createCredential(t *testing.T, s *server, owner, name string, role fsm.Role, scoped bool) string {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"role":%d}`, name, role)
	if scoped {
		body = fmt.Sprintf(`{"name":%q,"role":%d,"scope":["invoice"]}`, name, role)
	}
	status, out := connectCall(t, s.addr, owner, "skald.v1.Credentials/Create", body, nil)
	var resp struct{ Token string }
	if status != 200 || json.Unmarshal(out, &resp) != nil || resp.Token == "" {
		t.Fatalf("create credential %s: %d %s", name, status, out)
	}
	return resp.Token
}

// connectCall calls a unary procedure with the Connect protocol's JSON.
func connectCall(t *testing.T, addr, token, procedure, body string, header http.Header) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+addr+"/"+procedure, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// connectCode calls procedure and returns the Connect error code it
// answered ("" for none): for a server stream, the first message's or the
// end of the stream's; for AppendStream (over h2c), its one request's
// answer or the end of the stream's.
func connectCode(t *testing.T, addr, token, procedure, body string) string {
	t.Helper()
	bidi := procedure == "skald.v1.EventStore/AppendStream"
	if !bidi && procedure != "skald.v1.EventStore/Subscribe" && procedure != "skald.v1.Subscriptions/Consume" {
		status, out := connectCall(t, addr, token, procedure, body, nil)
		if status == 200 {
			return ""
		}
		var e struct{ Code string }
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s: %d %s", procedure, status, out)
		}
		return e.Code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/"+procedure, bytes.NewReader(append(env, body...)))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Authorization", "Bearer "+token)
	hc := http.DefaultClient
	if bidi {
		hc = h2c()
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 { // refused before the stream
		var e struct{ Code string }
		out, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s: %d %s", procedure, resp.StatusCode, out)
		}
		return e.Code
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatalf("%s: read the stream: %v", procedure, err)
	}
	msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(resp.Body, msg); err != nil {
		t.Fatalf("%s: read the stream: %v", procedure, err)
	}
	if head[0]&2 == 0 && bidi {
		var answer struct{ Error struct{ Code string } }
		if err := json.Unmarshal(msg, &answer); err != nil {
			t.Fatalf("%s: answer %s", procedure, msg)
		}
		return answer.Error.Code
	}
	if head[0]&2 == 0 {
		return "" // a message: admitted
	}
	var end struct{ Error struct{ Code string } }
	if err := json.Unmarshal(msg, &end); err != nil {
		t.Fatalf("%s: end of stream %s", procedure, msg)
	}
	return end.Error.Code
}

// fill puts stream and category in place of {s} and {c}.
func fill(text, stream, category string) string {
	return strings.NewReplacer("{s}", stream, "{c}", category).Replace(text)
}

// allowed is what the model says of c calling a call of spec sp on the
// stream or category target (in or out of the scoped credentials'
// scope).
func (sp spec) allowed(c accessCase, inScope bool) bool {
	switch {
	case c.role < sp.role:
		return false
	case c.scoped && sp.touches == "whole":
		return false
	case c.scoped && sp.touches == "target" && !inScope:
		return false
	}
	return true
}

// Every role, scoped and not, against every Connect procedure: a refused
// call is PermissionDenied, an admitted one anything else.
func TestConnectRoleTable(t *testing.T) {
	t.Parallel()
	s, cases := accessSetup(t)
	for proc, row := range connectSpec {
		for _, c := range cases {
			if proc == "skald.v1.Cluster/Leave" && c.role == fsm.RoleAdmin {
				continue
			}
			for _, inScope := range []bool{true, false} {
				stream, category := "invoice-1", "invoice"
				if !inScope {
					stream, category = "order-1", "order"
				}
				code := connectCode(t, s.addr, c.token, proc, fill(row.body, stream, category))
				if want := row.allowed(c, inScope); want == (code == "permission_denied") {
					t.Errorf("%s by %s on %s: code %q, want allowed %v", proc, c.name, stream, code, want)
				}
			}
		}
	}
}

// Every role, scoped and not, against every EventoDB method (and
// /subscribe, /import): a refused call is 403 AUTH_UNAUTHORIZED.
func TestEventoDBRoleTable(t *testing.T) {
	t.Parallel()
	s, cases := accessSetup(t)
	for method, row := range evSpec {
		for _, c := range cases {
			for _, inScope := range []bool{true, false} {
				stream, category := "invoice-1", "invoice"
				if !inScope {
					stream, category = "order-1", "order"
				}
				args := fill(row.args, stream, category)
				status, code := evCallCode(t, s.addr, c.token, method, args)
				denied := status == http.StatusForbidden && code == "AUTH_UNAUTHORIZED"
				if want := row.allowed(c, inScope); want == denied {
					t.Errorf("%s(%s) by %s: %d %s, want allowed %v", method, args, c.name, status, code, want)
				}
			}
		}
	}
}

// evCallCode calls an EventoDB method (or path) and returns the status
// and error code (the status alone for a stream that started).
func evCallCode(t *testing.T, addr, token, method, args string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var req *http.Request
	switch method {
	case evSubscribePath:
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/subscribe?"+args, nil)
	case evImportPath:
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/import", strings.NewReader(""))
	default:
		body := `["` + method + `"`
		if args != "" {
			body += "," + args
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/rpc", strings.NewReader(body+"]"))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		return 200, ""
	}
	out, _ := io.ReadAll(resp.Body)
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(out, &e)
	return resp.StatusCode, e.Error.Code
}

// Every procedure of the API has a row in access.go's table, and the
// test's model names every one too.
func TestEveryProcedureHasAccess(t *testing.T) {
	t.Parallel()
	// Every file of the API's package, so a service added in a new file
	// is covered without editing this list.
	var files []protoreflect.FileDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("skald.v1", func(fd protoreflect.FileDescriptor) bool {
		files = append(files, fd)
		return true
	})
	_ = skaldv1.File_skald_v1_event_store_proto // registers the package's files
	n := 0
	for _, fd := range files {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				proc := string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				n++
				if _, ok := procedureAccess["/"+proc]; !ok {
					t.Errorf("%s has no row in procedureAccess (access.go)", proc)
				}
				if _, ok := connectSpec[proc]; !ok {
					t.Errorf("%s is not in the test's model (connectSpec)", proc)
				}
			}
		}
	}
	if n != len(procedureAccess) || n != len(connectSpec) {
		t.Errorf("the API has %d procedures, procedureAccess %d rows, connectSpec %d", n, len(procedureAccess), len(connectSpec))
	}
}

// Every EventoDB method (and the paths /subscribe and /import) has a row,
// and the test's model names every one too.
func TestEveryEventoDBMethodHasAccess(t *testing.T) {
	t.Parallel()
	for m := range evMethods {
		if _, ok := evMethodAccess[m]; !ok {
			t.Errorf("EventoDB method %s has no row in evMethodAccess (access.go)", m)
		}
		if _, ok := evSpec[m]; !ok {
			t.Errorf("EventoDB method %s is not in the test's model (evSpec)", m)
		}
	}
	if want := len(evMethods) + 2; len(evMethodAccess) != want || len(evSpec) != want {
		t.Errorf("%d methods and 2 paths; evMethodAccess has %d rows, evSpec %d", len(evMethods), len(evMethodAccess), len(evSpec))
	}
}
