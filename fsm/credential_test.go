package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func createCred(ns string, id uint64, name string, role Role, scope ...string) *fsmv1.Command {
	h := sha256.Sum256([]byte(ns + name))
	return &fsmv1.Command{Kind: &fsmv1.Command_CreateCredential{CreateCredential: &fsmv1.CreateCredential{
		Namespace: ns, Id: id, Name: name, Role: uint32(role), Scope: scope, TokenHash: h[:], CreatedUnixNano: testTime,
	}}}
}

func revokeCred(ns, name string) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_RevokeCredential{RevokeCredential: &fsmv1.RevokeCredential{Namespace: ns, Name: name}}}
}

// credNames lists a namespace's credentials as "name:role".
func credNames(t *testing.T, s *Store, ns string) string {
	t.Helper()
	cs, err := s.Credentials(ns)
	if err != nil {
		t.Fatalf("credentials of %s: %v", ns, err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Name+":"+c.Role.String())
	}
	return strings.Join(out, " ")
}

func TestCredentialLifecycle(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(createNS("default"))
	if got := credNames(t, s, "app"); got != "initial:owner" {
		t.Fatalf("a new namespace's credentials: %q", got)
	}
	if got := credNames(t, s, "default"); got != "initial:admin" {
		t.Fatalf("the admin namespace's credentials: %q", got)
	}
	res := f.apply(
		createCred("app", 7, "reporting", RoleReader),
		createCred("app", 8, "billing", RoleWriter, "invoice-*", "payment"),
		createCred("app", 9, "reporting", RoleWriter),    // name taken
		createCred("app", 7, "other", RoleWriter),        // id taken
		createCred("app", 10, "initial", RoleReader),     // reserved
		createCred("app", 11, "boss", RoleAdmin),         // admin outside default
		createCred("nope", 12, "x", RoleReader),          // no namespace
		createCred("app", 13, "bad", RoleReader, "a-b"),  // not a category
		createCred("default", 14, "ops", RoleAdmin),      // a second admin
		createCred("app", 0, "zero", RoleReader),         // id 0 is the initial's
		createCred("app", 15, "-x", RoleReader),          // bad name
		createCred("app", 16, "x", Role(9)),              // bad role
		createCred("app", 17, "y", RoleReader, "*"),      // empty prefix
		createCred("app", 18, "z", RoleReader, "a", "a"), // twice
	)
	want := []string{"", "", "already exists", "already exists", "names the token", "only in the \"default\"", "namespace not found",
		"not a category", "", "must not be 0", "must be letters", "must be reader", "needs text before", "given twice"}
	for i, w := range want {
		err, _ := res[i].(error)
		switch {
		case w == "" && err != nil:
			t.Errorf("command %d: %v", i, err)
		case w != "" && (err == nil || !strings.Contains(err.Error(), w)):
			t.Errorf("command %d: got %v, want an error containing %q", i, res[i], w)
		}
	}
	if got := credNames(t, s, "app"); got != "billing:writer initial:owner reporting:reader" {
		t.Fatalf("credentials: %q", got)
	}
	c, nsID, ok := s.Credential("app", 8)
	h := sha256.Sum256([]byte("appbilling"))
	if !ok || nsID != 1 || c.Name != "billing" || c.Role != RoleWriter || !bytes.Equal(c.TokenHash, h[:]) ||
		strings.Join(c.Scope, ",") != "invoice-*,payment" || c.CreatedAt != testTime {
		t.Fatalf("Credential(app, 8) = %+v, %d, %v", c, nsID, ok)
	}

	// Revoke one and the initial one; both are gone at once.
	res = f.apply(revokeCred("app", "reporting"), revokeCred("app", "initial"), revokeCred("app", "initial"), revokeCred("app", "nobody"))
	for i, want := range []error{nil, nil, ErrCredentialNotFound, ErrCredentialNotFound} {
		err, _ := res[i].(error)
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("revoke %d: %v, want %v", i, res[i], want)
		}
	}
	if _, _, ok := s.Credential("app", 7); ok {
		t.Fatal("a revoked credential is still found")
	}
	if _, _, ok := s.Credential("app", 0); ok {
		t.Fatal("the revoked initial credential is still found")
	}
	if got := credNames(t, s, "app"); got != "billing:writer" {
		t.Fatalf("after the revokes: %q", got)
	}

	// The last admin cannot be revoked; one of two can.
	res = f.apply(revokeCred("default", "initial"), revokeCred("default", "ops"), createCred("default", 20, "reader", RoleReader),
		revokeCred("default", "reader"))
	if err, _ := res[0].(error); err != nil {
		t.Fatalf("revoke one of two admins: %v", err)
	}
	if err, _ := res[1].(error); err == nil || !strings.Contains(err.Error(), `"ops" is the last admin credential`) {
		t.Fatalf("revoke the last admin: %v", res[1])
	}
	if err, _ := res[3].(error); err != nil {
		t.Fatalf("revoke a reader of default: %v", err)
	}
	if got := credNames(t, s, "default"); got != "ops:admin" {
		t.Fatalf("default: %q", got)
	}

	// They survive a restart (load), and go with their namespace.
	s.Close()
	s = openTestStore(t, fs)
	f = newFeeder(t, s)
	if got := credNames(t, s, "app"); got != "billing:writer" {
		t.Fatalf("after a restart: %q", got)
	}
	if got := credNames(t, s, "default"); got != "ops:admin" {
		t.Fatalf("default after a restart: %q", got)
	}
	f.apply(deleteNS("app"), createNS("app"))
	if got := credNames(t, s, "app"); got != "initial:owner" {
		t.Fatalf("a re-created namespace's credentials: %q", got)
	}
	s.Close()
	s = openTestStore(t, fs)
	if got := credNames(t, s, "app"); got != "initial:owner" {
		t.Fatalf("a re-created namespace's credentials after a restart: %q", got)
	}
}

// A replayed entry (at or below the applied index) changes nothing, and
// a batch that creates a namespace and its credentials works as one.
func TestCredentialReplay(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	logs := commandEntries(t, 1, createNS("app"), createCred("app", 5, "w", RoleWriter), revokeCred("app", "w"), createCred("app", 6, "w", RoleReader))
	for i, r := range s.ApplyBatch(logs) {
		if err, ok := r.(error); ok {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	for _, r := range s.ApplyBatch(logs) {
		if r != nil {
			t.Fatalf("a replayed entry answered %v", r)
		}
	}
	if got := credNames(t, s, "app"); got != "initial:owner w:reader" {
		t.Fatalf("credentials: %q", got)
	}
}

func TestScopeRules(t *testing.T) {
	t.Parallel()
	scope := []string{"invoice-*", "payment"}
	for _, tc := range []struct {
		stream string
		want   bool
	}{{"invoice-1", true}, {"invoice-", true}, {"invoice", false}, {"payment", true}, {"payment-9+x", true}, {"paymentx-1", false}, {"other-1", false}} {
		if got := ScopeAllowsStream(scope, tc.stream); got != tc.want {
			t.Errorf("stream %q: %v, want %v", tc.stream, got, tc.want)
		}
	}
	for _, tc := range []struct {
		category string
		want     bool
	}{{"payment", true}, {"invoice", false}, {"invoice-x", true}, {"pay", false}} {
		if got := ScopeAllowsCategory(scope, tc.category); got != tc.want {
			t.Errorf("category %q: %v, want %v", tc.category, got, tc.want)
		}
	}
	if !ScopeAllowsStream(nil, "x-1") || !ScopeAllowsCategory(nil, "x") {
		t.Error("an empty scope must allow everything")
	}
}

// A store written before credentials (namespaces with their token only,
// which is what CreateNamespace has always written) reads the same after
// a restart: each token is its namespace's initial owner credential, and
// opening writes nothing.
func TestNamespacesFromBeforeCredentials(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "a-1", newMsg("T", `{}`)))
	before := contentHash(t, s)
	s.Close()
	s = openTestStore(t, fs)
	if got := contentHash(t, s); got != before {
		t.Fatalf("reopening changed the stored content: %s, was %s", got, before)
	}
	h := sha256.Sum256([]byte("token-app"))
	c, nsID, ok := s.Credential("app", 0)
	if !ok || nsID != 1 || c.Name != InitialCredential || c.Role != RoleOwner || !c.Initial || !bytes.Equal(c.TokenHash, h[:]) {
		t.Fatalf("the namespace's token after an upgrade: %+v, %d, %v", c, nsID, ok)
	}
	if got := credNames(t, s, "app"); got != "initial:owner" {
		t.Fatalf("credentials: %q", got)
	}
}
