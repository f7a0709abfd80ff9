package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/minkdb/mink/auth"
)

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
	for _, id := range slices.Sorted(maps.Keys(v.Schemas)) {
		if sc := v.Schemas[id]; sc.Owner == r.Role {
			return reject(ErrInUse, "%s (%q): owner of schema %s", what, role.Name, sc.Name)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Views)) {
		sv := v.Views[id]
		if sv.Owner == r.Role {
			return reject(ErrInUse, "%s (%q): owner of view %s", what, role.Name, sv.Spec.Name)
		}
		for _, a := range sv.ACL {
			if a.Grantee == r.Role {
				return reject(ErrInUse, "%s (%q): privileges for view %s", what, role.Name, sv.Spec.Name)
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
		if v.Tables[id] == nil && v.Views[id] == nil {
			return reject(ErrNotFound, "%s: no table %d", what, id)
		}
	}
	for _, id := range r.Tables {
		if t := v.Tables[id]; t != nil {
			t.ACL = grantACL(t.ACL, r)
		} else {
			sv := v.Views[id]
			sv.ACL = grantACL(sv.ACL, r)
		}
	}
	return Outcome{}
}

// grantACL returns acl with r's grant or revoke applied.
func grantACL(acl []ACLItem, r GrantTable) []ACLItem {
	i := slices.IndexFunc(acl, func(a ACLItem) bool { return a.Grantee == r.Grantee })
	switch {
	case i >= 0 && r.Revoke:
		acl[i].Privileges &^= r.Privileges
		if acl[i].Privileges == 0 {
			acl = slices.Delete(acl, i, i+1)
		}
	case i >= 0:
		acl[i].Privileges |= r.Privileges
	case !r.Revoke:
		acl = append(acl, ACLItem{Grantee: r.Grantee, Privileges: r.Privileges})
		slices.SortFunc(acl, func(a, b ACLItem) int { return int(a.Grantee) - int(b.Grantee) })
	}
	if len(acl) == 0 {
		return nil
	}
	return acl
}

func applySetTableOwner(v *View, r SetTableOwner) Outcome {
	what := fmt.Sprintf("set the owner of table %d to role %d", r.Table, r.Owner)
	t, sv := v.Tables[r.Table], v.Views[r.Table]
	if t == nil && sv == nil {
		return reject(ErrNotFound, "%s: no such table", what)
	}
	if v.Roles[r.Owner] == nil {
		return reject(ErrNotFound, "%s: no such role", what)
	}
	if t != nil {
		t.Owner = r.Owner
	} else {
		sv.Owner = r.Owner
	}
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
