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
// the role owns a table or holds a privilege on one (PostgreSQL's "role
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
// grantee holds already.
type GrantTable struct {
	Tables     []TableID  `json:"tables"`
	Grantee    RoleID     `json:"grantee"`
	Privileges Privileges `json:"privileges"`
	Revoke     bool       `json:"revoke,omitempty"`
}

// SetTableOwner makes Owner the owner of Table (ALTER TABLE … OWNER TO).
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
	r := v.Roles[role]
	if r == nil {
		return 0
	}
	if r.Superuser || (t.Owner != 0 && v.IsMember(role, t.Owner)) {
		return PrivAll
	}
	var p Privileges
	for _, a := range t.ACL {
		if a.Grantee == Public || v.IsMember(role, a.Grantee) {
			p |= a.Privileges
		}
	}
	return p
}

func checkRoleName(what, name string) *Outcome {
	switch {
	case name == "":
		out := reject(ErrInvalid, "%s: empty role name", what)
		return &out
	case name == "public" || name == "none" || strings.HasPrefix(name, "pg_"):
		out := reject(ErrInvalid, "%s: role name %q is reserved", what, name)
		return &out
	}
	return nil
}

func checkVerifier(what, verifier string) *Outcome {
	if verifier == "" {
		return nil
	}
	if _, err := auth.ParseVerifier(verifier); err != nil {
		out := reject(ErrInvalid, "%s: the password is not a SCRAM-SHA-256 verifier", what)
		return &out
	}
	return nil
}

func applyCreateRole(v *View, r CreateRole) Outcome {
	what := fmt.Sprintf("create role %q", r.Name)
	if out := checkRoleName(what, r.Name); out != nil {
		return *out
	}
	if out := checkVerifier(what, r.Verifier); out != nil {
		return *out
	}
	if old, ok := v.RoleByName(r.Name); ok {
		return reject(ErrExists, "%s: role %d has that name", what, old.ID)
	}
	id := v.NextRoleID
	switch {
	case id == 0:
		id = BootstrapRole
	case id < FirstRoleID:
		id = FirstRoleID
	}
	v.NextRoleID = id + 1
	v.Roles[id] = &Role{ID: id, Name: r.Name, Login: r.Login, Superuser: r.Superuser, Verifier: r.Verifier}
	return Outcome{Role: id}
}

func applyAlterRole(v *View, r AlterRole) Outcome {
	what := fmt.Sprintf("alter role %d", r.Role)
	role := v.Roles[r.Role]
	if role == nil {
		return reject(ErrNotFound, "%s: no such role", what)
	}
	if r.Name != "" && r.Name != role.Name {
		if out := checkRoleName(what, r.Name); out != nil {
			return *out
		}
		if old, ok := v.RoleByName(r.Name); ok {
			return reject(ErrExists, "%s: role %d has the name %q", what, old.ID, r.Name)
		}
	}
	if r.Verifier != nil {
		if out := checkVerifier(what, *r.Verifier); out != nil {
			return *out
		}
	}
	if r.Superuser != nil && !*r.Superuser && r.Role == BootstrapRole {
		return reject(ErrInUse, "%s: the bootstrap superuser stays a superuser", what)
	}
	if r.Name != "" {
		role.Name = r.Name
	}
	if r.Login != nil {
		role.Login = *r.Login
	}
	if r.Superuser != nil {
		role.Superuser = *r.Superuser
	}
	if r.Verifier != nil {
		role.Verifier = *r.Verifier
	}
	return Outcome{Role: role.ID}
}

func applyDropRole(v *View, r DropRole) Outcome {
	what := fmt.Sprintf("drop role %d", r.Role)
	role := v.Roles[r.Role]
	if role == nil {
		return reject(ErrNotFound, "%s: no such role", what)
	}
	if r.Role == BootstrapRole {
		return reject(ErrInUse, "%s (%q): it is the bootstrap superuser", what, role.Name)
	}
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		t := v.Tables[id]
		if t.Owner == r.Role {
			return reject(ErrInUse, "%s (%q): owner of table %s", what, role.Name, t.Spec.Name)
		}
		for _, a := range t.ACL {
			if a.Grantee == r.Role {
				return reject(ErrInUse, "%s (%q): privileges for table %s", what, role.Name, t.Spec.Name)
			}
		}
	}
	delete(v.Roles, r.Role)
	for _, other := range v.Roles {
		if i := slices.Index(other.MemberOf, r.Role); i >= 0 {
			other.MemberOf = slices.Delete(other.MemberOf, i, i+1)
			if len(other.MemberOf) == 0 {
				other.MemberOf = nil
			}
		}
	}
	return Outcome{}
}

func applyGrantRole(v *View, r GrantRole) Outcome {
	what := fmt.Sprintf("grant role %d to %d", r.Role, r.Member)
	if r.Revoke {
		what = fmt.Sprintf("revoke role %d from %d", r.Role, r.Member)
	}
	group, member := v.Roles[r.Role], v.Roles[r.Member]
	if group == nil || member == nil {
		return reject(ErrNotFound, "%s: no such role", what)
	}
	i := slices.Index(member.MemberOf, r.Role)
	if r.Revoke {
		if i >= 0 {
			member.MemberOf = slices.Delete(member.MemberOf, i, i+1)
			if len(member.MemberOf) == 0 {
				member.MemberOf = nil
			}
		}
		return Outcome{}
	}
	if i >= 0 {
		return Outcome{}
	}
	if v.IsMember(r.Role, r.Member) {
		return reject(ErrInvalid, "%s: role %q is a member of role %q", what, group.Name, member.Name)
	}
	member.MemberOf = append(member.MemberOf, r.Role)
	slices.Sort(member.MemberOf)
	return Outcome{}
}

func applyGrantTable(v *View, r GrantTable) Outcome {
	what := fmt.Sprintf("grant on %d tables to role %d", len(r.Tables), r.Grantee)
	if len(r.Tables) == 0 || r.Privileges == 0 || r.Privileges&^PrivAll != 0 {
		return reject(ErrInvalid, "%s: no tables or no privileges", what)
	}
	if r.Grantee != Public && v.Roles[r.Grantee] == nil {
		return reject(ErrNotFound, "%s: no such role", what)
	}
	for _, id := range r.Tables {
		if v.Tables[id] == nil {
			return reject(ErrNotFound, "%s: no table %d", what, id)
		}
	}
	for _, id := range r.Tables {
		t := v.Tables[id]
		i := slices.IndexFunc(t.ACL, func(a ACLItem) bool { return a.Grantee == r.Grantee })
		switch {
		case i >= 0 && r.Revoke:
			t.ACL[i].Privileges &^= r.Privileges
			if t.ACL[i].Privileges == 0 {
				t.ACL = slices.Delete(t.ACL, i, i+1)
			}
		case i >= 0:
			t.ACL[i].Privileges |= r.Privileges
		case !r.Revoke:
			t.ACL = append(t.ACL, ACLItem{Grantee: r.Grantee, Privileges: r.Privileges})
			slices.SortFunc(t.ACL, func(a, b ACLItem) int { return int(a.Grantee) - int(b.Grantee) })
		}
		if len(t.ACL) == 0 {
			t.ACL = nil
		}
	}
	return Outcome{}
}

func applySetTableOwner(v *View, r SetTableOwner) Outcome {
	what := fmt.Sprintf("set the owner of table %d to role %d", r.Table, r.Owner)
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "%s: no such table", what)
	}
	if v.Roles[r.Owner] == nil {
		return reject(ErrNotFound, "%s: no such role", what)
	}
	t.Owner = r.Owner
	return Outcome{}
}

func applySetClusterKey(v *View, r SetClusterKey) Outcome {
	if len(r.Key) < auth.KeyLen {
		return reject(ErrInvalid, "set cluster key: %d bytes, want %d", len(r.Key), auth.KeyLen)
	}
	if v.ClusterKey != nil {
		if string(v.ClusterKey) == string(r.Key) {
			return Outcome{}
		}
		return reject(ErrExists, "set cluster key: the cluster has a key")
	}
	v.ClusterKey = slices.Clone(r.Key)
	return Outcome{}
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
		for i, a := range t.ACL {
			if (a.Grantee != Public && v.Roles[a.Grantee] == nil) || a.Privileges == 0 || (i > 0 && t.ACL[i-1].Grantee >= a.Grantee) {
				return fmt.Errorf("table %d: bad acl %+v", id, t.ACL)
			}
		}
	}
	if v.ClusterKey != nil && len(v.ClusterKey) < auth.KeyLen {
		return fmt.Errorf("cluster key of %d bytes", len(v.ClusterKey))
	}
	return nil
}
