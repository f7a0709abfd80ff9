package pgcatalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Roles and privileges in the emulated catalogs: pg_authid, pg_roles,
// pg_user, pg_shadow, pg_group and pg_auth_members; the owners and ACLs of
// relations (pg_class.relowner and relacl); information_schema's
// table_privileges, role_table_grants, column_privileges, enabled_roles and
// applicable_roles; and what has_table_privilege and pg_has_role answer
// (the private relations mink.privileges and mink.members, read by the
// macros). All of it comes from the roles, owners and grants of the
// metadata view, through catalog.View's IsMember and TablePrivileges, the
// functions the privilege checks enforce, so the catalogs say what a role
// may do. Relations and rows are seen as the session's role sees them in
// PostgreSQL 15: information_schema shows the grants of roles it is a
// member of, and the tables it may use.

// catalogRole is a role as the catalogs show it.
type catalogRole struct {
	oid      uint32
	name     string
	super    bool
	login    bool
	verifier string
	memberOf []uint32
	// builtin: pg_database_owner, which is no role of the view.
	builtin bool
}

// bootstrap reports whether r is the bootstrap superuser, which PostgreSQL's
// initdb creates with every attribute (CREATEROLE, CREATEDB, REPLICATION,
// BYPASSRLS); CREATE ROLE … SUPERUSER gives none of them, in PostgreSQL as
// in mink, whose superusers need none.
func (r *catalogRole) bootstrap() bool { return r.oid == uint32(catalog.BootstrapRole) }

// Roles are the roles of a metadata view, read with the tables.
type Roles struct {
	list  []*catalogRole // by oid, with pg_database_owner
	byOID map[uint32]*catalogRole
	// view has the roles only (copies), for catalog.View's IsMember and
	// TablePrivileges.
	view *catalog.View
}

// NewRoles copies the roles of v. A view without the bootstrap
// superuser (a front end that runs without the server's bootstrap) gets
// one, named as a session acting as it is (the bootstrap's name, mink,
// otherwise), as the privilege checks treat that role as a superuser.
func NewRoles(v *catalog.View, session access.Identity) *Roles {
	cr := &Roles{byOID: map[uint32]*catalogRole{}, view: &catalog.View{Roles: map[catalog.RoleID]*catalog.Role{}}}
	for _, id := range slices.Sorted(maps.Keys(v.Roles)) {
		r := *v.Roles[id]
		r.MemberOf = slices.Clone(r.MemberOf)
		cr.view.Roles[id] = &r
	}
	if cr.view.Roles[catalog.BootstrapRole] == nil {
		name := "mink"
		if session.Role == catalog.BootstrapRole {
			name = session.Name
		}
		cr.view.Roles[catalog.BootstrapRole] = &catalog.Role{ID: catalog.BootstrapRole, Name: name, Login: true, Superuser: true}
	}
	for _, id := range slices.Sorted(maps.Keys(cr.view.Roles)) {
		r := cr.view.Roles[id]
		c := &catalogRole{oid: uint32(id), name: r.Name, super: r.Superuser, login: r.Login, verifier: r.Verifier}
		for _, g := range r.MemberOf {
			c.memberOf = append(c.memberOf, uint32(g))
		}
		cr.list = append(cr.list, c)
	}
	cr.list = append(cr.list, &catalogRole{oid: oidDatabaseOwner, name: "pg_database_owner", builtin: true})
	slices.SortFunc(cr.list, func(a, b *catalogRole) int { return int(a.oid) - int(b.oid) })
	for _, r := range cr.list {
		cr.byOID[r.oid] = r
	}
	return cr
}

// name is the name of a role, or its oid for one that does not exist, as
// PostgreSQL prints the grantee of an aclitem whose role was dropped.
func (cr *Roles) name(oid uint32) string {
	if r := cr.byOID[oid]; r != nil {
		return r.name
	}
	return fmt.Sprint(oid)
}

// super reports whether oid is a superuser.
func (cr *Roles) super(oid uint32) bool {
	r := cr.byOID[oid]
	return r != nil && r.super
}

// hasRole is pg_has_role(member, role, 'USAGE'): a superuser has every
// role; every role inherits (mink has no NOINHERIT), so USAGE is MEMBER.
func (cr *Roles) hasRole(member, role uint32) bool {
	return cr.super(member) || cr.view.IsMember(catalog.RoleID(member), catalog.RoleID(role))
}

// restrictedCatalogs are the emulated relations PostgreSQL grants to no
// one (relacl {owner=arwdDxt/owner}): only superusers read them, with the
// roles' password verifiers.
var restrictedCatalogs = map[string]string{
	"pg_catalog.pg_authid": "table pg_authid",
	"pg_catalog.pg_shadow": "view pg_shadow",
}

// Session is the role a session acts as, for the catalogs.
type Session struct {
	Role  uint32
	Name  string // current_user
	Super bool
}

// aclEntry is one aclitem of a relation: grantee (0: PUBLIC) holds privs,
// granted by grantor.
type aclEntry struct {
	grantee, grantor uint32
	privs            catalog.Privileges
}

// publicCatalogPrivileges are what PUBLIC holds on an emulated catalog, as
// in PostgreSQL: SELECT, SELECT and UPDATE on pg_settings, nothing on the
// restricted ones.
func publicCatalogPrivileges(key string) catalog.Privileges {
	switch {
	case restrictedCatalogs[key] != "":
		return 0
	case key == "pg_catalog.pg_settings":
		return catalog.PrivSelect | catalog.PrivUpdate
	}
	return catalog.PrivSelect
}

// owner is the oid of the relation's owner: the table's (a table without
// an owner is the bootstrap superuser's, as the privilege checks have it),
// the bootstrap superuser for the catalogs.
func (r *catalogRelation) owner() uint32 {
	if r.table != nil && r.table.owner != 0 {
		return uint32(r.table.owner)
	}
	return uint32(catalog.BootstrapRole)
}

// acl is the relation's ACL as aclexplode(coalesce(relacl,
// acldefault('r', relowner))) lists it: the owner's entry first, then the
// roles granted something, by oid, then PUBLIC, all granted by the owner
// (mink has no grant options, so only owners and superusers grant, and
// PostgreSQL records a superuser's grant as the owner's). explicit is
// whether relacl is set: a table nobody granted anything on has NULL, as
// in PostgreSQL, and the catalogs have theirs.
func (in *Input) acl(r *catalogRelation) (acl []aclEntry, explicit bool) {
	owner := r.owner()
	acl = []aclEntry{{grantee: owner, grantor: owner, privs: catalog.PrivAll}}
	if r.table == nil {
		if p := publicCatalogPrivileges(r.schema + "." + r.name); p != 0 {
			acl = append(acl, aclEntry{grantee: 0, grantor: owner, privs: p})
		}
		return acl, true
	}
	var public catalog.Privileges
	for _, a := range r.table.acl {
		switch g := uint32(a.Grantee); {
		case a.Grantee == catalog.Public:
			public = a.Privileges
		case g != owner:
			acl = append(acl, aclEntry{grantee: g, grantor: owner, privs: a.Privileges})
		}
	}
	if public != 0 {
		acl = append(acl, aclEntry{grantee: 0, grantor: owner, privs: public})
	}
	return acl, len(r.table.acl) > 0
}

// relacl is pg_class.relacl: aclitem texts, or nil for NULL.
func (in *Input) relacl(r *catalogRelation) []string {
	acl, explicit := in.acl(r)
	if !explicit {
		return nil
	}
	out := make([]string, len(acl))
	for i, a := range acl {
		grantee := ""
		if a.grantee != 0 {
			grantee = aclName(in.Roles.name(a.grantee))
		}
		out[i] = grantee + "=" + a.privs.Letters() + "/" + aclName(in.Roles.name(a.grantor))
	}
	return out
}

// namespaceACL is pg_namespace.nspacl of a schema owned by owner, as
// PostgreSQL 15 has it for its three: USAGE and CREATE for the owner,
// USAGE for PUBLIC.
func (in *Input) namespaceACL(owner uint32) []string {
	name := aclName(in.Roles.name(owner))
	return []string{name + "=UC/" + name, "=U/" + name}
}

// aclName quotes a role name in an aclitem as PostgreSQL's putid does:
// names of anything but letters, digits and underscores go in double
// quotes, with a double quote doubled.
func aclName(name string) string {
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80) {
			return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		}
	}
	return name
}

// tablePrivileges is what role (0: PUBLIC) may do on the relation: for a
// user table, catalog.View.TablePrivileges (what the privilege checks
// allow); for a catalog, everything for a superuser and PUBLIC's
// privileges otherwise.
func (in *Input) tablePrivileges(role uint32, r *catalogRelation) catalog.Privileges {
	switch {
	case in.Roles.super(role):
		return catalog.PrivAll
	case r.table == nil:
		return publicCatalogPrivileges(r.schema + "." + r.name)
	case role == uint32(catalog.Public):
		for _, a := range r.table.acl {
			if a.Grantee == catalog.Public {
				return a.Privileges
			}
		}
		return 0
	}
	return in.Roles.view.TablePrivileges(catalog.RoleID(role), &catalog.Table{Owner: r.table.owner, ACL: r.table.acl})
}

// canGrant reports whether role holds its privileges on the relation with
// the grant option: a superuser, or a member of the owning role (a table
// without an owner is only a superuser's, as ALTER and GRANT have it).
func (in *Input) canGrant(role uint32, r *catalogRelation) bool {
	if in.Roles.super(role) {
		return true
	}
	return r.table != nil && r.table.owner != 0 && in.Roles.view.IsMember(catalog.RoleID(role), r.table.owner)
}

// visible reports whether information_schema shows the relation to the
// session: it is a member of the owner, or holds one of privs on it (its
// views' pg_has_role(relowner, 'USAGE') OR has_table_privilege(…) OR
// has_any_column_privilege(…); mink has no column grants).
func (in *Input) visible(r *catalogRelation, privs catalog.Privileges) bool {
	return in.Roles.hasRole(in.Session.Role, r.owner()) || in.tablePrivileges(in.Session.Role, r)&privs != 0
}

// Privileges the information_schema views look for.
const (
	anyTablePrivilege    = catalog.PrivAll
	anyColumnPrivilege   = catalog.PrivSelect | catalog.PrivInsert | catalog.PrivUpdate | catalog.PrivReferences
	constraintPrivileges = catalog.PrivAll &^ catalog.PrivSelect
)

// The builders of the roles' relations.

func rolAttributes(r *catalogRole) []any {
	boot := r.bootstrap()
	return []any{"oid", r.oid, "rolname", r.name, "rolsuper", r.super, "rolinherit", true, "rolcreaterole", boot,
		"rolcreatedb", boot, "rolcanlogin", r.login, "rolreplication", boot, "rolbypassrls", boot,
		"rolconnlimit", int32(-1)}
}

func buildAuthid(in *Input, b *relBuilder) {
	for _, r := range in.Roles.list {
		row := rolAttributes(r)
		// Only superusers read pg_authid (checkCatalogAccess); the
		// verifier is left out of any other session's copy all the same.
		if r.verifier != "" && in.Session.Super {
			row = append(row, "rolpassword", r.verifier)
		}
		b.add(row...)
	}
}

func buildRoles(in *Input, b *relBuilder) {
	for _, r := range in.Roles.list {
		// PostgreSQL's pg_roles shows ******** for every role, with a
		// password or not.
		b.add(append(rolAttributes(r), "rolpassword", "********")...)
	}
}

func userAttributes(r *catalogRole) []any {
	boot := r.bootstrap()
	return []any{"usename", r.name, "usesysid", r.oid, "usecreatedb", boot, "usesuper", r.super, "userepl", boot,
		"usebypassrls", boot}
}

func buildUsers(in *Input, b *relBuilder) {
	for _, r := range in.Roles.list {
		if r.login {
			b.add(append(userAttributes(r), "passwd", "********")...)
		}
	}
}

func buildShadow(in *Input, b *relBuilder) {
	for _, r := range in.Roles.list {
		if !r.login {
			continue
		}
		row := userAttributes(r)
		if r.verifier != "" && in.Session.Super {
			row = append(row, "passwd", r.verifier)
		}
		b.add(row...)
	}
}

// members are the direct members of each role, by oid.
func (cr *Roles) members() map[uint32][]uint32 {
	m := map[uint32][]uint32{}
	for _, r := range cr.list {
		for _, g := range r.memberOf {
			m[g] = append(m[g], r.oid)
		}
	}
	return m
}

func buildGroups(in *Input, b *relBuilder) {
	members := in.Roles.members()
	for _, r := range in.Roles.list {
		if !r.login {
			b.add("groname", r.name, "grosysid", r.oid, "grolist", append([]uint32{}, members[r.oid]...))
		}
	}
}

// buildAuthMembers: every grant of a role was a superuser's (only
// superusers manage roles), which PostgreSQL 15 records as the bootstrap
// superuser's; there is no ADMIN OPTION.
func buildAuthMembers(in *Input, b *relBuilder) {
	for _, r := range in.Roles.list {
		for _, g := range r.memberOf {
			b.add("roleid", g, "member", r.oid, "grantor", uint32(catalog.BootstrapRole), "admin_option", false)
		}
	}
}

func buildEnabledRoles(in *Input, b *relBuilder) {
	for _, r := range in.Roles.list {
		if in.Roles.hasRole(in.Session.Role, r.oid) {
			b.add("role_name", r.name)
		}
	}
}

// buildApplicableRoles: the memberships of the roles the session has,
// and the database owner's of pg_database_owner.
func buildApplicableRoles(in *Input, b *relBuilder) {
	type grant struct{ member, role uint32 }
	grants := []grant{{uint32(catalog.BootstrapRole), oidDatabaseOwner}}
	for _, r := range in.Roles.list {
		for _, g := range r.memberOf {
			grants = append(grants, grant{r.oid, g})
		}
	}
	for _, g := range grants {
		if in.Roles.hasRole(in.Session.Role, g.member) {
			b.add("grantee", in.Roles.name(g.member), "role_name", in.Roles.name(g.role), "is_grantable", "NO")
		}
	}
}

// grantRow is one row of information_schema.table_privileges: a privilege
// of an aclitem of a relation.
type grantRow struct {
	rel              *catalogRelation
	grantor, grantee uint32
	priv             catalog.Privileges
	grantable        bool
}

// grants lists the privileges of every relation's ACL, in aclexplode's
// order, that keep reports a session should see.
func (in *Input) grants(keep func(grantor, grantee uint32) bool) []grantRow {
	var out []grantRow
	for _, r := range in.relations() {
		if r.kind != "r" && r.kind != "v" && r.kind != "p" {
			continue
		}
		acl, _ := in.acl(r)
		owner := r.owner()
		for _, a := range acl {
			if !keep(a.grantor, a.grantee) {
				continue
			}
			// PostgreSQL: pg_has_role(grantee, relowner, 'USAGE') OR the
			// grant option, which only the owner's entry has.
			grantable := a.grantee != 0 && in.Roles.hasRole(a.grantee, owner)
			for _, p := range privilegeBits {
				if a.privs&p != 0 {
					out = append(out, grantRow{rel: r, grantor: a.grantor, grantee: a.grantee, priv: p, grantable: grantable})
				}
			}
		}
	}
	return out
}

// privilegeBits are the table privileges one by one, in aclexplode's
// order.
var privilegeBits = func() []catalog.Privileges {
	var out []catalog.Privileges
	for p := catalog.Privileges(1); p != 0 && p&catalog.PrivAll == p; p <<= 1 {
		out = append(out, p)
	}
	return out
}()

// granteeName is a grantee as information_schema names it.
func (in *Input) granteeName(oid uint32) string {
	if oid == 0 {
		return "PUBLIC"
	}
	return in.Roles.name(oid)
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

// seesGrant is table_privileges' filter: grants by or to a role the
// session has, and grants to PUBLIC.
func (in *Input) seesGrant(grantor, grantee uint32) bool {
	return in.Roles.hasRole(in.Session.Role, grantor) || grantee == 0 || in.Roles.hasRole(in.Session.Role, grantee)
}

func buildTablePrivileges(in *Input, b *relBuilder) {
	for _, g := range in.grants(in.seesGrant) {
		name := g.priv.Names()[0]
		b.add("grantor", in.Roles.name(g.grantor), "grantee", in.granteeName(g.grantee), "table_catalog", in.Database,
			"table_schema", g.rel.schema, "table_name", g.rel.name, "privilege_type", name,
			"is_grantable", yesNo(g.grantable), "with_hierarchy", yesNo(g.priv == catalog.PrivSelect))
	}
}

// buildRoleTableGrants: table_privileges' rows whose grantor or grantee is
// an enabled role (PUBLIC is none).
func buildRoleTableGrants(in *Input, b *relBuilder) {
	keep := func(grantor, grantee uint32) bool {
		return in.Roles.hasRole(in.Session.Role, grantor) || grantee != 0 && in.Roles.hasRole(in.Session.Role, grantee)
	}
	for _, g := range in.grants(keep) {
		b.add("grantor", in.Roles.name(g.grantor), "grantee", in.granteeName(g.grantee), "table_catalog", in.Database,
			"table_schema", g.rel.schema, "table_name", g.rel.name, "privilege_type", g.priv.Names()[0],
			"is_grantable", yesNo(g.grantable), "with_hierarchy", yesNo(g.priv == catalog.PrivSelect))
	}
}

// buildColumnPrivileges: the table privileges that apply to columns, for
// each column (mink has no column grants).
func buildColumnPrivileges(in *Input, b *relBuilder) {
	for _, g := range in.grants(in.seesGrant) {
		if g.priv&anyColumnPrivilege == 0 {
			continue
		}
		for _, c := range g.rel.cols {
			b.add("grantor", in.Roles.name(g.grantor), "grantee", in.granteeName(g.grantee), "table_catalog", in.Database,
				"table_schema", g.rel.schema, "table_name", g.rel.name, "column_name", c.name,
				"privilege_type", g.priv.Names()[0], "is_grantable", yesNo(g.grantable))
		}
	}
}

// The private relations of has_table_privilege and pg_has_role.

// privilegesKey is mink.privileges: (roleid, relid, privs), privs being
// the aclitem letters of what the role may do on the relation, with a *
// when it may grant them. Every relation has a row for PUBLIC (roleid 0);
// a role has one only where it may do more than PUBLIC, and superusers
// have none (the macros give them everything).
const privilegesKey = "mink.privileges"

// membersKey is mink.members: (member, roleid) for every role a role has,
// itself included.
const membersKey = "mink.members"

func privilegeLetters(p catalog.Privileges, grantable bool) string {
	if grantable {
		return p.Letters() + "*"
	}
	return p.Letters()
}

func buildPrivileges(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		public := in.tablePrivileges(0, r)
		b.add("roleid", uint32(0), "relid", r.oid, "privs", privilegeLetters(public, false))
		if r.table == nil {
			continue
		}
		for _, role := range in.Roles.list {
			if role.super || role.builtin {
				continue
			}
			p, grantable := in.tablePrivileges(role.oid, r), in.canGrant(role.oid, r)
			if p != public || grantable {
				b.add("roleid", role.oid, "relid", r.oid, "privs", privilegeLetters(p, grantable))
			}
		}
	}
}

func buildMembers(in *Input, b *relBuilder) {
	for _, member := range in.Roles.list {
		if member.builtin {
			continue
		}
		// The roles member has: itself and, transitively, the roles it is
		// a member of (catalog.View.IsMember, for every role at once).
		has := map[uint32]bool{member.oid: true}
		stack := []uint32{member.oid}
		for len(stack) > 0 {
			r := in.Roles.byOID[stack[len(stack)-1]]
			stack = stack[:len(stack)-1]
			if r == nil {
				continue
			}
			for _, g := range r.memberOf {
				if !has[g] {
					has[g] = true
					stack = append(stack, g)
				}
			}
		}
		for _, role := range slices.Sorted(maps.Keys(has)) {
			b.add("member", member.oid, "roleid", role)
		}
	}
}

// The privilege functions: has_table_privilege, has_any_column_privilege,
// has_column_privilege and pg_has_role become calls of the macros
// mink_has_privilege and mink_has_role, which read mink.privileges and
// mink.members when the statement runs (a GRANT holds from the next
// execution of a prepared statement). A role is a name or an oid (a name
// that is no role fails with 42704, as in PostgreSQL; 'public' is PUBLIC
// for the privileges of tables); a table a name (42P01 if there is none)
// or an oid (NULL if there is none). The privilege list must be a
// constant.

// PrivilegeName is one entry of a function's list of privileges.
type PrivilegeName struct {
	name  string
	privs catalog.Privileges
	// grant: WITH GRANT OPTION (WITH ADMIN OPTION for roles).
	grant bool
}

// TablePrivilegeNames are has_table_privilege's: each privilege, with or
// without the grant option, and RULE, which PostgreSQL 15 accepts and
// nobody holds.
var TablePrivilegeNames = privilegeNamesOf(catalog.PrivAll, "RULE")

// ColumnPrivilegeNames are has_column_privilege's and
// has_any_column_privilege's.
var ColumnPrivilegeNames = privilegeNamesOf(anyColumnPrivilege)

func privilegeNamesOf(privs catalog.Privileges, none ...string) []PrivilegeName {
	var out []PrivilegeName
	for _, p := range privilegeBits {
		if privs&p != 0 {
			n := p.Names()[0]
			out = append(out, PrivilegeName{name: n, privs: p}, PrivilegeName{name: n + " WITH GRANT OPTION", privs: p, grant: true})
		}
	}
	for _, n := range none {
		out = append(out, PrivilegeName{name: n}, PrivilegeName{name: n + " WITH GRANT OPTION", grant: true})
	}
	return out
}

// RolePrivilegeNames are pg_has_role's (PostgreSQL 15's).
var RolePrivilegeNames = []PrivilegeName{
	{name: "MEMBER"}, {name: "MEMBER WITH GRANT OPTION", grant: true}, {name: "MEMBER WITH ADMIN OPTION", grant: true},
	{name: "USAGE"}, {name: "USAGE WITH GRANT OPTION", grant: true}, {name: "USAGE WITH ADMIN OPTION", grant: true},
}

// ParsePrivileges parses a comma-separated list of privileges as
// PostgreSQL's convert_any_priv_string does (each entry trimmed, matched
// case-insensitively); the function asks for any of them. plain says
// whether an entry without the grant option was named.
func ParsePrivileges(list string, names []PrivilegeName) (privs catalog.Privileges, plain, grant bool, err error) {
	for _, chunk := range strings.Split(list, ",") {
		chunk = strings.Trim(chunk, " \t\n\r\v\f")
		i := slices.IndexFunc(names, func(n PrivilegeName) bool { return strings.EqualFold(n.name, chunk) })
		if i < 0 {
			return 0, false, false, pgwire.Errorf(pgwire.CodeInvalidParameterValue, "unrecognized privilege type: \"%s\"", chunk)
		}
		if names[i].grant {
			grant = true
		} else {
			plain = true
			privs |= names[i].privs
		}
	}
	return privs, plain, grant, nil
}

// privilegeMacros are the macros of the privilege functions (added to
// catalogMacros).
var privilegeMacros = []catalogMacro{
	{name: "mink_role_oid", sql: `(p_name, p_public) AS CASE WHEN p_name IS NOT NULL THEN coalesce(
		(SELECT m_r.oid FROM mink_pg_catalog__pg_roles m_r WHERE m_r.rolname = p_name),
		CASE WHEN p_public AND p_name = 'public' THEN 0::UINTEGER END,
		error(` + QuoteLiteral(Raised(pgwire.CodeUndefinedObject, `role "`)) + ` || p_name || '" does not exist')) END`,
		deps: []string{relRoles}},
	// A name or an oid, told apart by its type.
	{name: "mink_role_any", sql: `(p_r, p_public) AS CASE WHEN typeof(p_r) = 'VARCHAR' THEN mink_role_oid(p_r::VARCHAR, p_public)
		ELSE try_cast(p_r AS UINTEGER) END`},
	{name: "mink_rel_any", sql: `(p_r) AS CASE WHEN typeof(p_r) = 'VARCHAR' THEN mink_to_regclass(p_r::VARCHAR)
		ELSE try_cast(p_r AS UINTEGER) END`},
	// The letters of what a role may do on a relation (mink.privileges),
	// NULL for a relation that does not exist.
	{name: "mink_relprivs", sql: `(p_role, p_rel) AS CASE
		WHEN coalesce((SELECT m_r.rolsuper FROM mink_pg_catalog__pg_roles m_r WHERE m_r.oid = p_role), false)
			THEN (SELECT 'arwdDxt*' FROM mink_privileges m_p WHERE m_p.roleid = 0 AND m_p.relid = p_rel)
		ELSE coalesce((SELECT m_p.privs FROM mink_privileges m_p WHERE m_p.roleid = p_role AND m_p.relid = p_rel),
			(SELECT m_p.privs FROM mink_privileges m_p WHERE m_p.roleid = 0 AND m_p.relid = p_rel)) END`,
		deps: []string{relRoles, privilegesKey}},
	{name: "mink_has_privilege", sql: `(p_role, p_rel, p_pattern) AS CASE WHEN p_role IS NOT NULL
		THEN regexp_matches(mink_relprivs(p_role, p_rel), p_pattern) END`},
	{name: "mink_has_role", sql: `(p_member, p_role, p_admin) AS CASE
		WHEN p_member IS NULL OR p_role IS NULL THEN NULL
		WHEN coalesce((SELECT m_r.rolsuper FROM mink_pg_catalog__pg_roles m_r WHERE m_r.oid = p_member), false) THEN true
		WHEN p_admin THEN false
		ELSE EXISTS (SELECT 1 FROM mink_members m_m WHERE m_m.member = p_member AND m_m.roleid = p_role) END`,
		deps: []string{relRoles, membersKey}},
}

// Superuser reports whether role is a superuser in the view the roles were
// read from (false for a role that no longer exists).
func (cr *Roles) Superuser(role catalog.RoleID) bool {
	r := cr.view.Roles[role]
	return r != nil && r.Superuser
}

// Restricted reports whether key is an emulated relation only superusers
// may read (PostgreSQL grants it to no one), and what it is, for the
// error message ("table pg_authid").
func Restricted(key string) (what string, ok bool) {
	what, ok = restrictedCatalogs[key]
	return what, ok
}

// Raised is the message of an error a macro raises with the engine's
// error(): the engine reports it with code as its SQLSTATE (the format of
// sqlfront/engine's Raised, which pgcatalog does not import so that it
// stays free of cgo; a test in sqlfront checks that they agree).
func Raised(code, msg string) string { return "[SQLSTATE " + code + "] " + msg }
