package fsm

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
)

// Credentials. A namespace holds named credentials, each a token hash with
// a role, an optional scope and an optional expiry, kept in _metadata
// under CR nsid credid (keys.go) and in memory on the namespace's handle,
// so that checking a token is a map lookup. The namespace's own token
// (NamespaceRecord.token_hash, the one its create returned) is its
// initial credential, id 0, named InitialCredential: an owner (admin in
// the admin namespace). Nothing is migrated for it: a namespace written
// before credentials reads exactly as before on every replica, and only a
// RevokeCredential of the initial one writes a record for it (id 0,
// revoked). Credential ids come from the token (internal/nstoken) and are
// chosen by the proposing node; apply refuses one the namespace holds.
//
// Expiry is decided when a token is checked, by the checking node's
// clock; revocation is an entry, so every replica refuses a revoked
// credential from the same log position on.

// Role is what a credential may do; each role includes the ones below it.
type Role uint32

// Roles, in order. RoleAdmin exists only in the admin namespace
// (nstoken.AdminNamespace) and acts on every namespace and the cluster.
const (
	RoleReader Role = 1
	RoleWriter Role = 2
	RoleOwner  Role = 3
	RoleAdmin  Role = 4
)

// InitialCredential is the name of a namespace's initial credential.
const InitialCredential = "initial"

// Limits of a credential's name and scope.
const (
	MaxCredentialName = 64
	MaxScopeEntries   = 32
)

var roleNames = [...]string{"", "reader", "writer", "owner", "admin"}

func (r Role) String() string {
	if int(r) < len(roleNames) && r > 0 {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint32(r))
}

// ParseRole returns the role named s (reader, writer, owner, admin).
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if i > 0 && n == s {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("unknown role %q: want reader, writer, owner or admin", s)
}

var (
	// ErrCredentialNotFound is returned when revoking a credential the
	// namespace does not hold.
	ErrCredentialNotFound = errors.New("fsm: credential not found")
	// ErrCredentialExists is returned when creating a credential whose
	// name (or id) the namespace holds already.
	ErrCredentialExists = errors.New("fsm: credential already exists")
)

// CredentialInfo is one credential of a namespace.
type CredentialInfo struct {
	ID        uint64
	Name      string
	Role      Role
	Scope     []string // empty: the whole namespace
	ExpiresAt int64    // unix ns; 0: never
	CreatedAt int64    // unix ns
	TokenHash []byte
	Initial   bool
}

// Expired reports whether the credential has expired at now.
func (c CredentialInfo) Expired(now time.Time) bool {
	return c.ExpiresAt != 0 && now.UnixNano() >= c.ExpiresAt
}

// ValidateCredentialName checks a credential's name: 1..64 bytes of ASCII
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func ValidateCredentialName(field, name string) error {
	if name == "" {
		return invalid(field, "must not be empty")
	}
	if len(name) > MaxCredentialName {
		return invalid(field, "must be at most %d bytes, got %d", MaxCredentialName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return invalid(field, "must be letters, digits, '.', '_' or '-', starting with a letter or digit; %q is not", name)
		}
	}
	return nil
}

// ValidateScope checks a credential's scope: at most 32 entries, each a
// category ("invoice", no '-' or '*') or a stream-name prefix ending in
// '*' ("invoice-*", non-empty before the '*'), given once.
func ValidateScope(field string, scope []string) error {
	if len(scope) > MaxScopeEntries {
		return invalid(field, "must have at most %d entries, got %d", MaxScopeEntries, len(scope))
	}
	seen := make(map[string]bool, len(scope))
	for i, e := range scope {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := ValidateStreamName(f, e); err != nil {
			return err
		}
		prefix, isPrefix := strings.CutSuffix(e, "*")
		switch {
		case isPrefix && prefix == "":
			return invalid(f, "a prefix needs text before '*'")
		case strings.Contains(prefix, "*"):
			return invalid(f, "'*' may only end a stream-name prefix: %q", e)
		case !isPrefix && strings.Contains(e, "-"):
			return invalid(f, "%q is not a category (no '-'); write %q for a stream-name prefix", e, e+"*")
		case seen[e]:
			return invalid(f, "%q is given twice", e)
		}
		seen[e] = true
	}
	return nil
}

// ScopeAllowsStream reports whether scope (valid; empty: everything)
// covers stream: its category is an entry, or it starts with an entry's
// prefix.
func ScopeAllowsStream(scope []string, stream string) bool {
	if len(scope) == 0 {
		return true
	}
	cat := Category(stream)
	for _, e := range scope {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			if strings.HasPrefix(stream, p) {
				return true
			}
		} else if e == cat {
			return true
		}
	}
	return false
}

// ScopeAllowsCategory reports whether scope covers every stream of
// category: the category is an entry, or the category's name (and so
// each of its streams' names) starts with an entry's prefix.
func ScopeAllowsCategory(scope []string, category string) bool {
	if len(scope) == 0 {
		return true
	}
	for _, e := range scope {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			if strings.HasPrefix(category, p) {
				return true
			}
		} else if e == category {
			return true
		}
	}
	return false
}

func credentialInfoOf(r *fsmv1.CredentialRecord) CredentialInfo {
	return CredentialInfo{ID: r.Id, Name: r.Name, Role: Role(r.Role), Scope: r.Scope, ExpiresAt: r.ExpiresUnixNano,
		CreatedAt: r.CreatedUnixNano, TokenHash: r.TokenHash}
}

// initialCredential is ns's initial credential, ok false when revoked.
func initialCredential(rec *fsmv1.NamespaceRecord, creds map[uint64]*fsmv1.CredentialRecord) (CredentialInfo, bool) {
	if r := creds[0]; r != nil && r.Revoked {
		return CredentialInfo{}, false
	}
	role := RoleOwner
	if rec.Name == nstoken.AdminNamespace {
		role = RoleAdmin
	}
	return CredentialInfo{Name: InitialCredential, Role: role, CreatedAt: rec.CreatedUnixNano, TokenHash: rec.TokenHash, Initial: true}, true
}

// Credential returns namespace name's credential of id (0: the initial
// one) and the namespace's internal id.
func (s *Store) Credential(name string, id uint64) (CredentialInfo, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := s.mu.namespaces[name]
	if !ok {
		return CredentialInfo{}, 0, false
	}
	if id == 0 {
		c, ok := initialCredential(ns.rec, ns.creds)
		return c, ns.rec.Id, ok
	}
	r, ok := ns.creds[id]
	if !ok {
		return CredentialInfo{}, 0, false
	}
	return credentialInfoOf(r), ns.rec.Id, true
}

// Credentials returns namespace name's credentials, by name (the revoked
// initial one left out).
func (s *Store) Credentials(name string) ([]CredentialInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := s.mu.namespaces[name]
	if !ok {
		return nil, ErrNamespaceNotFound
	}
	var out []CredentialInfo
	if c, ok := initialCredential(ns.rec, ns.creds); ok {
		out = append(out, c)
	}
	for id, r := range ns.creds {
		if id != 0 {
			out = append(out, credentialInfoOf(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// creds returns the credentials of ns as of the current entry, for
// change: the first call copies the committed ones into the call's
// staging.
func (a *applier) creds(ns *namespace) map[uint64]*fsmv1.CredentialRecord {
	if m, ok := a.credentials[ns]; ok {
		return m
	}
	a.s.mu.Lock()
	m := make(map[uint64]*fsmv1.CredentialRecord, len(ns.creds)+1)
	for id, r := range ns.creds {
		m[id] = r
	}
	a.s.mu.Unlock()
	if a.credentials == nil {
		a.credentials = make(map[*namespace]map[uint64]*fsmv1.CredentialRecord)
	}
	a.credentials[ns] = m
	return m
}

func (a *applier) createCredential(l *Entry, c *fsmv1.CreateCredential) any {
	if err := ValidateCredentialName("name", c.Name); err != nil {
		return err
	}
	if c.Name == InitialCredential {
		return invalid("name", "%q names the token the namespace was created with", InitialCredential)
	}
	role := Role(c.Role)
	switch {
	case role < RoleReader || role > RoleAdmin:
		return invalid("role", "must be reader, writer, owner or admin, got %d", c.Role)
	case role == RoleAdmin && c.Namespace != nstoken.AdminNamespace:
		return invalid("role", "admin credentials exist only in the %q namespace", nstoken.AdminNamespace)
	case role == RoleAdmin && len(c.Scope) > 0:
		return invalid("scope", "an admin credential has no scope")
	case c.Id == 0:
		return invalid("id", "must not be 0")
	case len(c.TokenHash) != 32:
		return invalid("token_hash", "must be 32 bytes, got %d", len(c.TokenHash))
	case c.ExpiresUnixNano < 0:
		return invalid("expires_unix_nano", "must not be negative")
	}
	if err := ValidateScope("scope", c.Scope); err != nil {
		return err
	}
	ns, m, answer := a.credentialsFor(l, c.Namespace)
	if ns == nil {
		return answer
	}
	if _, ok := m[c.Id]; ok {
		return fmt.Errorf("%w: id %x", ErrCredentialExists, c.Id)
	}
	for _, r := range m {
		if r.Name == c.Name {
			return fmt.Errorf("%w: %q", ErrCredentialExists, c.Name)
		}
	}
	rec := &fsmv1.CredentialRecord{Id: c.Id, Name: c.Name, Role: c.Role, Scope: c.Scope, ExpiresUnixNano: c.ExpiresUnixNano,
		TokenHash: c.TokenHash, CreatedUnixNano: c.CreatedUnixNano}
	a.touchMeta(l)
	a.putCredential(ns, rec)
	m[c.Id] = rec
	return &fsmv1.CredentialResult{Namespace: c.Namespace, Name: c.Name, CreatedUnixNano: c.CreatedUnixNano}
}

// credentialsFor is the namespace an entry on credentials acts on, with
// its credentials. When ns is nil, answer is the entry's answer instead:
// nil when _metadata already holds the entry, ErrNamespaceNotFound when
// there is no such namespace.
func (a *applier) credentialsFor(l *Entry, namespace string) (ns *namespace, m map[uint64]*fsmv1.CredentialRecord, answer any) {
	if l.Index <= a.s.metaApplied.index {
		return nil, nil, nil // _metadata already holds this entry
	}
	if ns = a.lookup(namespace); ns == nil {
		return nil, nil, ErrNamespaceNotFound
	}
	return ns, a.creds(ns), nil
}

func (a *applier) revokeCredential(l *Entry, c *fsmv1.RevokeCredential) any {
	if err := ValidateCredentialName("name", c.Name); err != nil {
		return err
	}
	ns, m, answer := a.credentialsFor(l, c.Namespace)
	if ns == nil {
		return answer
	}
	if c.Namespace == nstoken.AdminNamespace && lastAdmin(m, c.Name) {
		return invalid("name", "%q is the last admin credential: create another admin before revoking it", c.Name)
	}
	if c.Name == InitialCredential {
		if r := m[0]; r != nil && r.Revoked {
			return fmt.Errorf("%w: %q", ErrCredentialNotFound, c.Name)
		}
		rec := &fsmv1.CredentialRecord{Id: 0, Name: InitialCredential, Revoked: true}
		a.touchMeta(l)
		a.putCredential(ns, rec)
		m[0] = rec
		return &fsmv1.CredentialResult{Namespace: c.Namespace, Name: c.Name}
	}
	for id, r := range m {
		if id != 0 && r.Name == c.Name {
			a.touchMeta(l)
			if err := a.meta.Delete(credentialKey(ns.rec.Id, id), nil); err != nil {
				a.fatal("stage credential revoke: %v", err)
			}
			delete(m, id)
			return &fsmv1.CredentialResult{Namespace: c.Namespace, Name: c.Name}
		}
	}
	return fmt.Errorf("%w: %q", ErrCredentialNotFound, c.Name)
}

// lastAdmin reports whether name is the only admin credential left in
// the admin namespace's credentials m (expiry aside: apply knows no
// clock).
func lastAdmin(m map[uint64]*fsmv1.CredentialRecord, name string) bool {
	admins, isAdmin := 0, false
	if r := m[0]; r == nil || !r.Revoked {
		admins++
		isAdmin = name == InitialCredential
	}
	for id, r := range m {
		if id != 0 && Role(r.Role) == RoleAdmin {
			admins++
			isAdmin = isAdmin || r.Name == name
		}
	}
	return isAdmin && admins == 1
}

func (a *applier) putCredential(ns *namespace, rec *fsmv1.CredentialRecord) {
	v, err := proto.Marshal(rec)
	if err != nil {
		a.fatal("encode credential record: %v", err)
	}
	if err := a.meta.Set(credentialKey(ns.rec.Id, rec.Id), v, nil); err != nil {
		a.fatal("stage credential: %v", err)
	}
}

// dropCredentials stages the deletion of every credential of ns (its
// namespace is deleted).
func (a *applier) dropCredentials(ns *namespace) {
	p := credentialPrefix(ns.rec.Id)
	if err := a.meta.DeleteRange(p, prefixEnd(p), nil); err != nil {
		a.fatal("stage credentials delete: %v", err)
	}
}

// loadCredentials reads every credential of _metadata onto its
// namespace's handle.
func loadCredentials(meta *pebble.DB, namespaces map[string]*namespace) error {
	byID := make(map[uint64]*namespace, len(namespaces))
	for _, ns := range namespaces {
		byID[ns.rec.Id] = ns
	}
	it, err := meta.NewIter(&pebble.IterOptions{LowerBound: prefixCredential, UpperBound: prefixEnd(prefixCredential)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(prefixCredential)+16 {
			it.Close()
			return fmt.Errorf("credential key %q: %w", k, errCorruptValue)
		}
		ns := byID[uint64(keySuffixUint64(k[:len(k)-8]))]
		if ns == nil {
			continue // not expected: a namespace's delete removes its credentials
		}
		rec := &fsmv1.CredentialRecord{}
		if err := proto.Unmarshal(it.Value(), rec); err != nil {
			it.Close()
			return fmt.Errorf("credential record %q: %w", k, err)
		}
		if ns.creds == nil {
			ns.creds = make(map[uint64]*fsmv1.CredentialRecord)
		}
		ns.creds[rec.Id] = rec
	}
	return it.Close()
}
