package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/minkdb/mink/auth"
)

// Roles, their memberships, table owners and table privileges, and the
// cluster key that signs bearer tokens. They are in the metadata log so that
// every node authenticates and authorizes alike, and a grant or revoke holds
// on every node from the log index it is applied at.

// RoleID identifies a role. The bootstrap superuser is BootstrapRole, as
// PostgreSQL's is oid 10; other roles are numbered from FirstRoleID. Ids are
// never reused.
type RoleID uint32

const (
	// BootstrapRole is the id of the first role created: the superuser a
	// node creates at its first start (server's --superuser-password-file).
	BootstrapRole RoleID = 10
	// FirstRoleID is the id of the second role, like PostgreSQL's first
	// user oid.
	FirstRoleID RoleID = 16384
	// Public is the grantee of privileges granted TO PUBLIC: every role.
	Public RoleID = 0
)

// Role is a role: a user when it may log in.
type Role struct {
	ID        RoleID `json:"id"`
	Name      string `json:"name"`
	Login     bool   `json:"login,omitempty"`
	Superuser bool   `json:"superuser,omitempty"`
	// Verifier is the SCRAM-SHA-256 verifier of the role's password
	// (auth.Verifier's text form); empty: no password, so no password
	// login.
	Verifier string `json:"verifier,omitempty"`
	// MemberOf lists the roles granted to this one, sorted. A member has
	// the privileges of the roles it is a member of, transitively
	// (PostgreSQL's INHERIT), but not their SUPERUSER or LOGIN.
	MemberOf []RoleID `json:"member_of,omitempty"`
}

// Privileges is a set of table privileges.
type Privileges uint8

const (
	PrivInsert Privileges = 1 << iota
	PrivSelect
	PrivUpdate
	PrivDelete
	PrivTruncate
	PrivReferences
	PrivTrigger

	// PrivAll is every table privilege (GRANT ALL).
	PrivAll = PrivInsert | PrivSelect | PrivUpdate | PrivDelete | PrivTruncate | PrivReferences | PrivTrigger
)

// privilegeNames are the privileges in PostgreSQL's aclitem order, with
// their aclitem letters and SQL names.
var privilegeNames = []struct {
	p      Privileges
	letter byte
	name   string
}{
	{PrivInsert, 'a', "INSERT"}, {PrivSelect, 'r', "SELECT"}, {PrivUpdate, 'w', "UPDATE"},
	{PrivDelete, 'd', "DELETE"}, {PrivTruncate, 'D', "TRUNCATE"}, {PrivReferences, 'x', "REFERENCES"},
	{PrivTrigger, 't', "TRIGGER"},
}

// Letters is p in aclitem form ("arwdDxt" for PrivAll).
func (p Privileges) Letters() string {
	var b strings.Builder
	for _, n := range privilegeNames {
		if p&n.p != 0 {
			b.WriteByte(n.letter)
		}
	}
	return b.String()
}

// Names lists the SQL names of the privileges in p, in aclitem order.
func (p Privileges) Names() []string {
	var out []string
	for _, n := range privilegeNames {
		if p&n.p != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// PrivilegeByName returns the privilege of a SQL name (SELECT, …),
// case-insensitively.
func PrivilegeByName(name string) (Privileges, bool) {
	for _, n := range privilegeNames {
		if strings.EqualFold(n.name, name) {
			return n.p, true
		}
	}
	return 0, false
}

// ACLItem is a grant of privileges on a table to a role (or to Public).
type ACLItem struct {
	Grantee    RoleID     `json:"grantee"`
	Privileges Privileges `json:"privileges"`
}

// CreateRole creates a role. Rejected with ErrExists if the name is taken,
// and ErrInvalid for an empty or reserved name ("public", or one starting
// with "pg_") or a Verifier that is not one. The outcome's Role is the new
// id.
type CreateRole struct {
	Name      string `json:"name"`
	Login     bool   `json:"login,omitempty"`
	Superuser bool   `json:"superuser,omitempty"`
	Verifier  string `json:"verifier,omitempty"`
}

// AlterRole changes what is set of a role: its name, LOGIN, SUPERUSER, or
// password (Verifier: a verifier, or "" to remove the password).
type AlterRole struct {
	Role      RoleID  `json:"role"`
	Name      string  `json:"name,omitempty"`
	Login     *bool   `json:"login,omitempty"`
	Superuser *bool   `json:"superuser,omitempty"`
	Verifier  *string `json:"verifier,omitempty"`
}

// DropRole drops a role and its memberships. Rejected with ErrInUse while
// the role owns a table or a view or holds a privilege on one (PostgreSQL's "role
// cannot be dropped because some objects depend on it"), and for the
// bootstrap superuser.
type DropRole struct {
	Role RoleID `json:"role"`
}

// GrantRole makes Member a member of Role, or with Revoke no longer one.
// Granting again, or revoking what was not granted, changes nothing. A grant
// that would make a role a member of itself, directly or through others, is
// rejected with ErrInvalid.
type GrantRole struct {
	Role   RoleID `json:"role"`
	Member RoleID `json:"member"`
	Revoke bool   `json:"revoke,omitempty"`
}

// GrantTable grants Privileges on Tables to Grantee (Public: every role),
// or with Revoke takes them away. It adds to (or removes from) what the
// grantee holds already. An id in Tables may be a view's (GRANT … ON a
// view).
type GrantTable struct {
	Tables     []TableID  `json:"tables"`
	Grantee    RoleID     `json:"grantee"`
	Privileges Privileges `json:"privileges"`
	Revoke     bool       `json:"revoke,omitempty"`
}

// SetTableOwner makes Owner the owner of Table (ALTER TABLE … OWNER TO), a
// table or a view.
type SetTableOwner struct {
	Table TableID `json:"table"`
	Owner RoleID  `json:"owner"`
}

// SetClusterKey sets the key that signs the cluster's bearer tokens. The
// first one proposed wins: a second with another key is rejected with
// ErrExists, one with the same key changes nothing.
type SetClusterKey struct {
	Key []byte `json:"key"`
}

func (CreateRole) Kind() Kind    { return KindCreateRole }
func (AlterRole) Kind() Kind     { return KindAlterRole }
func (DropRole) Kind() Kind      { return KindDropRole }
func (GrantRole) Kind() Kind     { return KindGrantRole }
func (GrantTable) Kind() Kind    { return KindGrantTable }
func (SetTableOwner) Kind() Kind { return KindSetTableOwner }
func (SetClusterKey) Kind() Kind { return KindSetClusterKey }

// RoleByName returns the role named name.
func (v *View) RoleByName(name string) (*Role, bool) {
	for _, r := range v.Roles {
		if r.Name == name {
			return r, true
		}
	}
	return nil, false
}

// IsMember reports whether role is group, or a member of it, directly or
// through other roles.
func (v *View) IsMember(role, group RoleID) bool {
	if role == group {
		return true
	}
	r := v.Roles[role]
	if r == nil {
		return false
	}
	if len(r.MemberOf) == 0 {
		return false // the common case: a role in no group
	}
	if slices.Contains(r.MemberOf, group) {
		return true
	}
	// Walk the memberships. Graphs are small: the visited roles are kept
	// in arrays on the stack, not in maps, as this runs on every privilege
	// check.
	var seenBuf, stackBuf [16]RoleID
	seen := seenBuf[:0]
	stack := append(stackBuf[:0], r.MemberOf...)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if slices.Contains(seen, id) {
			continue
		}
		seen = append(seen, id)
		g := v.Roles[id]
		if g == nil {
			continue
		}
		for _, m := range g.MemberOf {
			if m == group {
				return true
			}
			stack = append(stack, m)
		}
	}
	return false
}

// TablePrivileges is what role may do on t: everything for a superuser and
// for the owner (or a member of the owning role); otherwise what was
// granted to it, to a role it is a member of, or to Public. A table
// without an owner (created before roles existed) is a superuser's.
func (v *View) TablePrivileges(role RoleID, t *Table) Privileges {
	return v.privileges(role, t.Owner, t.ACL)
}

// privileges is what role may do on a relation owned by owner with acl.
func (v *View) privileges(role, owner RoleID, acl []ACLItem) Privileges {
	r := v.Roles[role]
	if r == nil {
		return 0
	}
	if r.Superuser || (owner != 0 && v.IsMember(role, owner)) {
		return PrivAll
	}
	var p Privileges
	for _, a := range acl {
		if a.Grantee == Public || v.IsMember(role, a.Grantee) {
			p |= a.Privileges
		}
	}
	return p
}

// checkACL checks that acl is sorted by grantee, each once, with
// privileges, for existing roles.
func (v *View) checkACL(acl []ACLItem) error {
	for i, a := range acl {
		if (a.Grantee != Public && v.Roles[a.Grantee] == nil) || a.Privileges == 0 || (i > 0 && acl[i-1].Grantee >= a.Grantee) {
			return fmt.Errorf("bad acl %+v", acl)
		}
	}
	return nil
}

func (r *Role) clone() *Role {
	c := *r
	c.MemberOf = slices.Clone(r.MemberOf)
	return &c
}

// checkRoles checks the invariants of roles, owners and grants.
func (v *View) checkRoles() error {
	names := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(v.Roles)) {
		r := v.Roles[id]
		if r == nil || r.ID != id || id == Public || r.Name == "" || names[r.Name] {
			return fmt.Errorf("role %d: bad or duplicate entry %+v", id, r)
		}
		names[r.Name] = true
		if id >= v.NextRoleID {
			return fmt.Errorf("role %d: not below the next role id %d", id, v.NextRoleID)
		}
		if r.MemberOf != nil && (len(r.MemberOf) == 0 || !slices.IsSorted(r.MemberOf)) {
			return fmt.Errorf("role %d: member-of list %v not sorted (or empty, not nil)", id, r.MemberOf)
		}
		for _, g := range r.MemberOf {
			if v.Roles[g] == nil || g == id {
				return fmt.Errorf("role %d: member of role %d, which is not a role", id, g)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		t := v.Tables[id]
		if t.Owner != 0 && v.Roles[t.Owner] == nil {
			return fmt.Errorf("table %d: owner role %d does not exist", id, t.Owner)
		}
		if err := v.checkACL(t.ACL); err != nil {
			return fmt.Errorf("table %d: %w", id, err)
		}
	}
	if v.ClusterKey != nil && len(v.ClusterKey) < auth.KeyLen {
		return fmt.Errorf("cluster key of %d bytes", len(v.ClusterKey))
	}
	return nil
}
