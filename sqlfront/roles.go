package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Roles and grants: CREATE/ALTER/DROP ROLE (and USER), GRANT/REVOKE of
// roles and of table privileges, ALTER TABLE … OWNER TO. They are catalog
// records (catalog/roles.go), so they hold on every node of the cluster
// from the next statement. They take effect when they run, also inside a
// transaction block (ROLLBACK does not undo them), and a CREATE ROLE with
// IN ROLE or ROLE clauses is several records, not one atomic change.
//
// Only superusers manage roles (mink has no CREATEROLE attribute); a role
// may change its own password. Table owners and superusers grant and
// revoke privileges on a table (there are no grant options), and change
// its owner.

// PostgreSQL's error codes of role management that pgwire has no name for.
const (
	codeDependentObjects      = "2BP01"
	codeInvalidGrantOperation = "0LP01"
	codeObjectInUse           = "55006"
)

func permissionDenied(format string, args ...any) *pgwire.Error {
	return errorf(pgwire.CodeInsufficientPrivilege, format, args...)
}

func undefinedRole(name string) *pgwire.Error {
	return errorf(pgwire.CodeUndefinedObject, "role %q does not exist", name)
}

// requireSuperuser refuses a statement to a role that is not a superuser.
func (s *session) requireSuperuser(what string) error {
	if !s.isSuperuser() {
		return &pgwire.Error{Code: pgwire.CodeInsufficientPrivilege, Message: "permission denied to " + what,
			Detail: "Only superusers may " + what + " in mink."}
	}
	return nil
}

// roleOptions are the options of CREATE ROLE and ALTER ROLE that mink keeps.
type roleOptions struct {
	login, superuser *bool
	password         *string // "" removes it
	inRoles, members []string
}

func boolArg(d *pg.DefElem) bool {
	switch a := d.Arg.GetNode().(type) {
	case *pg.Node_Boolean:
		return a.Boolean.Boolval
	case *pg.Node_Integer:
		return a.Integer.Ival != 0
	}
	return true
}

func roleNames(nodes []*pg.Node) []string {
	var out []string
	for _, n := range nodes {
		if rs := n.GetRoleSpec(); rs != nil {
			out = append(out, rs.Rolename)
		}
	}
	return out
}

// parseRoleOptions reads CREATE/ALTER ROLE options, refusing those mink
// does not have with 0A000 (their defaults are accepted).
func parseRoleOptions(opts []*pg.Node) (roleOptions, []*pgwire.Error, error) {
	var o roleOptions
	var notices []*pgwire.Error
	for _, n := range opts {
		d := n.GetDefElem()
		if d == nil {
			continue
		}
		switch d.Defname {
		case "canlogin":
			b := boolArg(d)
			o.login = &b
		case "superuser":
			b := boolArg(d)
			o.superuser = &b
		case "password":
			pw := ""
			if str := d.Arg.GetString_(); str != nil {
				pw = str.Sval
			}
			if d.Arg != nil && pw == "" && d.Arg.GetString_() != nil {
				notices = append(notices, notice(pgwire.CodeSuccessfulCompletion, "empty string is not a valid password, clearing password"))
			}
			o.password = &pw
		case "inherit":
			if !boolArg(d) {
				return o, nil, unsupported("NOINHERIT is not supported by mink: a member always has the privileges of its roles")
			}
		case "createrole", "createdb", "isreplication", "bypassrls":
			if boolArg(d) {
				name := map[string]string{"createrole": "CREATEROLE", "createdb": "CREATEDB", "isreplication": "REPLICATION", "bypassrls": "BYPASSRLS"}[d.Defname]
				return o, nil, unsupported("%s is not supported by mink (superusers manage roles; there is one database and no row security)", name)
			}
		case "connectionlimit":
			if i := d.Arg.GetInteger(); i == nil || i.Ival != -1 {
				return o, nil, unsupported("CONNECTION LIMIT is not supported by mink")
			}
		case "addroleto":
			o.inRoles = append(o.inRoles, roleNames(d.Arg.GetList().GetItems())...)
		case "rolemembers":
			o.members = append(o.members, roleNames(d.Arg.GetList().GetItems())...)
		case "adminmembers":
			return o, nil, unsupported("ADMIN (membership with ADMIN OPTION) is not supported by mink: superusers manage memberships")
		case "validUntil":
			return o, nil, unsupported("VALID UNTIL is not supported by mink")
		default:
			return o, nil, unsupported("role option %q is not supported by mink", d.Defname)
		}
	}
	return o, notices, nil
}

// verifierOf is the stored form of a password: a SCRAM-SHA-256 verifier,
// derived here, or kept as given when the text is one already (PostgreSQL
// does the same, so dumped roles restore).
func verifierOf(password string) (string, error) {
	if password == "" || auth.LooksLikeVerifier(password) {
		return password, nil
	}
	if strings.HasPrefix(password, "md5") && len(password) == 35 {
		return "", unsupported("MD5 password hashes are not supported by mink: give the password, or a SCRAM-SHA-256 verifier")
	}
	v, err := auth.NewVerifier(password)
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// checkNewRoleName refuses names PostgreSQL reserves.
func checkNewRoleName(name string) error {
	switch {
	case name == "public" || name == "none":
		return errorf(codeReservedName, "role name %q is reserved", name)
	case strings.HasPrefix(name, "pg_"):
		return &pgwire.Error{Code: codeReservedName, Message: fmt.Sprintf("role name %q is reserved", name),
			Detail: `Role names starting with "pg_" are reserved.`}
	}
	return nil
}

// roleID resolves a role name (CURRENT_USER, SESSION_USER and CURRENT_ROLE
// too) in v.
func (s *session) roleID(v *catalog.View, rs *pg.RoleSpec) (catalog.RoleID, string, error) {
	name := rs.GetRolename()
	switch rs.GetRoletype() {
	case pg.RoleSpecType_ROLESPEC_CURRENT_USER, pg.RoleSpecType_ROLESPEC_SESSION_USER, pg.RoleSpecType_ROLESPEC_CURRENT_ROLE:
		name = s.identity.Name
		if r := v.Roles[s.identity.Role]; r != nil {
			return r.ID, r.Name, nil
		}
	case pg.RoleSpecType_ROLESPEC_PUBLIC:
		return catalog.Public, "public", nil
	}
	r, ok := v.RoleByName(name)
	if !ok {
		return 0, name, undefinedRole(name)
	}
	return r.ID, r.Name, nil
}

// lookupRole resolves a role outside a view.
func (s *session) lookupRole(rs *pg.RoleSpec) (id catalog.RoleID, name string, err error) {
	s.f.cfg.Meta.Read(func(v *catalog.View) { id, name, err = s.roleID(v, rs) })
	return id, name, err
}

func (s *session) planCreateRole(cr *pg.CreateRoleStmt) (*stmt, error) {
	opts, notices, err := parseRoleOptions(cr.Options)
	if err != nil {
		return nil, err
	}
	tag := "CREATE ROLE"
	login := false
	switch cr.StmtType {
	case pg.RoleStmtType_ROLESTMT_USER:
		login = true
	case pg.RoleStmtType_ROLESTMT_GROUP:
		tag = "CREATE ROLE" // PostgreSQL's tag for CREATE GROUP too
	}
	if opts.login != nil {
		login = *opts.login
	}
	return s.tagWithNotices(tag, func(ctx context.Context) ([]*pgwire.Error, error) {
		if err := s.requireSuperuser("create roles"); err != nil {
			return nil, err
		}
		if err := checkNewRoleName(cr.Role); err != nil {
			return nil, err
		}
		rec := catalog.CreateRole{Name: cr.Role, Login: login, Superuser: opts.superuser != nil && *opts.superuser}
		if opts.password != nil {
			if rec.Verifier, err = verifierOf(*opts.password); err != nil {
				return nil, err
			}
		}
		var inRoles, members []catalog.RoleID
		var lookupErr error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			for _, names := range []struct {
				names []string
				dst   *[]catalog.RoleID
			}{{opts.inRoles, &inRoles}, {opts.members, &members}} {
				for _, name := range names.names {
					r, ok := v.RoleByName(name)
					if !ok {
						lookupErr = undefinedRole(name)
						return
					}
					*names.dst = append(*names.dst, r.ID)
				}
			}
		})
		if lookupErr != nil {
			return nil, lookupErr
		}
		out, err := s.f.cfg.Meta.Propose(ctx, rec)
		if errors.Is(err, catalog.ErrExists) {
			return nil, errorf(pgwire.CodeDuplicateObject, "role %q already exists", cr.Role)
		}
		if err != nil {
			return nil, err
		}
		for _, g := range inRoles {
			if err := s.proposeGrantRole(ctx, catalog.GrantRole{Role: g, Member: out.Role}); err != nil {
				return nil, err
			}
		}
		for _, m := range members {
			if err := s.proposeGrantRole(ctx, catalog.GrantRole{Role: out.Role, Member: m}); err != nil {
				return nil, err
			}
		}
		return notices, nil
	}), nil
}

func (s *session) planAlterRole(ar *pg.AlterRoleStmt) (*stmt, error) {
	opts, notices, err := parseRoleOptions(ar.Options)
	if err != nil {
		return nil, err
	}
	if len(opts.inRoles) > 0 || len(opts.members) > 0 {
		return nil, unsupported("ALTER ROLE … IN ROLE is not supported: use GRANT role TO role")
	}
	return s.tagWithNotices("ALTER ROLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		id, name, err := s.lookupRole(ar.Role)
		if err != nil {
			return nil, err
		}
		ownPassword := id == s.identity.Role && opts.login == nil && opts.superuser == nil && opts.password != nil
		if !ownPassword {
			if err := s.requireSuperuser("alter roles"); err != nil {
				return nil, err
			}
		}
		rec := catalog.AlterRole{Role: id, Login: opts.login, Superuser: opts.superuser}
		if opts.password != nil {
			v, err := verifierOf(*opts.password)
			if err != nil {
				return nil, err
			}
			rec.Verifier = &v
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, rec); err != nil {
			if errors.Is(err, catalog.ErrInUse) {
				return nil, permissionDenied("the bootstrap superuser %s stays a superuser", name)
			}
			if errors.Is(err, catalog.ErrNotFound) {
				return nil, undefinedRole(name)
			}
			return nil, err
		}
		return notices, nil
	}), nil
}

func (s *session) planRenameRole(rn *pg.RenameStmt) (*stmt, error) {
	return s.tagOnly("ALTER ROLE", func(ctx context.Context) error {
		if err := s.requireSuperuser("rename roles"); err != nil {
			return err
		}
		id, _, err := s.lookupRole(&pg.RoleSpec{Roletype: pg.RoleSpecType_ROLESPEC_CSTRING, Rolename: rn.Subname})
		if err != nil {
			return err
		}
		if id == s.identity.Role {
			return unsupported("session user cannot be renamed")
		}
		if err := checkNewRoleName(rn.Newname); err != nil {
			return err
		}
		_, err = s.f.cfg.Meta.Propose(ctx, catalog.AlterRole{Role: id, Name: rn.Newname})
		if errors.Is(err, catalog.ErrExists) {
			return errorf(pgwire.CodeDuplicateObject, "role %q already exists", rn.Newname)
		}
		return err
	}), nil
}

func (s *session) planDropRole(dr *pg.DropRoleStmt) (*stmt, error) {
	return s.tagWithNotices("DROP ROLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		if err := s.requireSuperuser("drop roles"); err != nil {
			return nil, err
		}
		var notices []*pgwire.Error
		for _, n := range dr.Roles {
			rs := n.GetRoleSpec()
			id, name, err := s.lookupRole(rs)
			if err != nil {
				if dr.MissingOk && rs.GetRoletype() == pg.RoleSpecType_ROLESPEC_CSTRING {
					notices = append(notices, notice(pgwire.CodeUndefinedObject, "role %q does not exist, skipping", name))
					continue
				}
				return nil, err
			}
			if id == s.identity.Role {
				return nil, errorf(codeObjectInUse, "current user cannot be dropped")
			}
			_, err = s.f.cfg.Meta.Propose(ctx, catalog.DropRole{Role: id})
			switch {
			case errors.Is(err, catalog.ErrInUse):
				_, detail, _ := strings.Cut(err.Error(), "): ")
				if id == catalog.BootstrapRole {
					return nil, errorf(codeDependentObjects, "cannot drop role %s because it is required by the database system", name)
				}
				return nil, &pgwire.Error{Code: codeDependentObjects,
					Message: fmt.Sprintf("role %q cannot be dropped because some objects depend on it", name), Detail: strings.TrimSuffix(detail, ": "+catalog.ErrInUse.Error())}
			case errors.Is(err, catalog.ErrNotFound):
				if !dr.MissingOk {
					return nil, undefinedRole(name)
				}
			case err != nil:
				return nil, err
			}
		}
		return notices, nil
	}), nil
}

func (s *session) proposeGrantRole(ctx context.Context, rec catalog.GrantRole) error {
	_, err := s.f.cfg.Meta.Propose(ctx, rec)
	if errors.Is(err, catalog.ErrInvalid) {
		var group, member string
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			if r := v.Roles[rec.Role]; r != nil {
				group = r.Name
			}
			if r := v.Roles[rec.Member]; r != nil {
				member = r.Name
			}
		})
		return errorf(codeInvalidGrantOperation, "role %q is a member of role %q", group, member)
	}
	return err
}

func (s *session) planGrantRole(gr *pg.GrantRoleStmt) (*stmt, error) {
	for _, o := range gr.Opt {
		if d := o.GetDefElem(); d != nil && boolArg(d) && d.Defname != "inherit" {
			return nil, unsupported("GRANT … WITH %s OPTION is not supported by mink: superusers manage memberships", strings.ToUpper(d.Defname))
		}
	}
	tag := "GRANT ROLE"
	if !gr.IsGrant {
		tag = "REVOKE ROLE"
	}
	return s.tagOnly(tag, func(ctx context.Context) error {
		if err := s.requireSuperuser("grant and revoke roles"); err != nil {
			return err
		}
		for _, g := range gr.GrantedRoles {
			group, _, err := s.lookupRole(&pg.RoleSpec{Roletype: pg.RoleSpecType_ROLESPEC_CSTRING, Rolename: g.GetAccessPriv().GetPrivName()})
			if err != nil {
				return err
			}
			for _, m := range gr.GranteeRoles {
				member, _, err := s.lookupRole(m.GetRoleSpec())
				if err != nil {
					return err
				}
				if err := s.proposeGrantRole(ctx, catalog.GrantRole{Role: group, Member: member, Revoke: !gr.IsGrant}); err != nil {
					return err
				}
			}
		}
		return nil
	}), nil
}

// planGrant runs GRANT and REVOKE of table privileges. GRANT and REVOKE on
// schema public or database mink are accepted and change nothing (with a
// notice): every role may use the one schema and connect to the one
// database.
func (s *session) planGrant(gs *pg.GrantStmt) (*stmt, error) {
	tag := "GRANT"
	if !gs.IsGrant {
		tag = "REVOKE"
	}
	switch gs.Objtype {
	case pg.ObjectType_OBJECT_TABLE:
	case pg.ObjectType_OBJECT_SCHEMA, pg.ObjectType_OBJECT_DATABASE:
		return s.tagWithNotices(tag, func(context.Context) ([]*pgwire.Error, error) {
			if gs.Objtype == pg.ObjectType_OBJECT_SCHEMA {
				if err := s.schemasExist(gs.Objects); err != nil {
					return nil, err
				}
			}
			return []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion,
				"mink keeps no schema or database privileges: every role may use and create in every schema and connect to database mink")}, nil
		}), nil
	default:
		return nil, unsupported("%s ON %s is not supported by mink: privileges are kept on tables", tag, strings.TrimPrefix(gs.Objtype.String(), "OBJECT_"))
	}
	if gs.GrantOption && gs.IsGrant {
		return nil, unsupported("WITH GRANT OPTION is not supported by mink: owners and superusers grant privileges")
	}
	var privs catalog.Privileges
	if len(gs.Privileges) == 0 {
		privs = catalog.PrivAll
	}
	for _, p := range gs.Privileges {
		ap := p.GetAccessPriv()
		if len(ap.GetCols()) > 0 {
			return nil, unsupported("column privileges are not supported by mink: grant on the table")
		}
		priv, ok := catalog.PrivilegeByName(ap.GetPrivName())
		if !ok {
			return nil, errorf(codeInvalidGrantOperation, "invalid privilege type %s for table", strings.ToUpper(ap.GetPrivName()))
		}
		privs |= priv
	}
	var names []string
	allInSchema := gs.Targtype == pg.GrantTargetType_ACL_TARGET_ALL_IN_SCHEMA
	if allInSchema {
		if err := s.schemasExist(gs.Objects); err != nil {
			return nil, err
		}
	} else {
		for _, o := range gs.Objects {
			name, err := s.relName(o.GetRangeVar())
			if err != nil {
				return nil, err
			}
			names = append(names, name)
		}
	}
	return s.tagOnly(tag, func(ctx context.Context) error {
		rec := catalog.GrantTable{Privileges: privs, Revoke: !gs.IsGrant}
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			super := s.superuserIn(v)
			if allInSchema {
				for _, o := range gs.Objects {
					id, _ := v.SchemaByName(o.GetString_().GetSval())
					for _, rel := range v.RelationsIn(id) { // ALL TABLES takes in views, as in PostgreSQL
						name, _ := v.QualifiedName(rel)
						names = append(names, name)
					}
				}
				slices.Sort(names)
			}
			for _, name := range names {
				id, owner, kind, ok := relationOwner(v, name)
				if !ok {
					err = undefinedTable(name)
					return
				}
				if !super && (owner == 0 || !v.IsMember(s.identity.Role, owner)) {
					err = permissionDenied("permission denied for %s %s", kind, name)
					return
				}
				rec.Tables = append(rec.Tables, id)
			}
		})
		if err != nil || len(rec.Tables) == 0 {
			return err
		}
		for _, g := range gs.Grantees {
			if rec.Grantee, _, err = s.lookupRole(g.GetRoleSpec()); err != nil {
				return err
			}
			if _, err := s.f.cfg.Meta.Propose(ctx, rec); err != nil {
				if errors.Is(err, catalog.ErrNotFound) {
					return errorf(pgwire.CodeUndefinedTable, "a table of the %s was dropped meanwhile", tag)
				}
				return err
			}
		}
		return nil
	}), nil
}

// planChangeOwner runs ALTER TABLE t OWNER TO role: a superuser may give
// any table to any role; an owner may give its table to a role it is a
// member of, as in PostgreSQL.
func (s *session) planChangeOwner(at *pg.AlterTableStmt) (*stmt, error) {
	name, err := s.relName(at.Relation)
	if err != nil {
		return nil, err
	}
	newOwner := at.Cmds[len(at.Cmds)-1].GetAlterTableCmd().GetNewowner()
	tag := "ALTER TABLE"
	if at.Objtype == pg.ObjectType_OBJECT_VIEW {
		tag = "ALTER VIEW"
	}
	return s.tagOnly(tag, func(ctx context.Context) error {
		var rec catalog.SetTableOwner
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			id, owner, kind, ok := relationOwner(v, name)
			if !ok {
				err = undefinedTable(name)
				return
			}
			var ownerName string
			if rec.Owner, ownerName, err = s.roleID(v, newOwner); err != nil {
				return
			}
			if rec.Owner == catalog.Public {
				err = undefinedRole("public")
				return
			}
			rec.Table = id
			if s.superuserIn(v) {
				return
			}
			switch {
			case owner == 0 || !v.IsMember(s.identity.Role, owner):
				err = permissionDenied("must be owner of %s %s", kind, name)
			case !v.IsMember(s.identity.Role, rec.Owner):
				err = permissionDenied("must be able to SET ROLE %q", ownerName)
			}
		})
		if err != nil {
			return err
		}
		_, err = s.f.cfg.Meta.Propose(ctx, rec)
		return err
	}), nil
}

// relationOwner returns the id and owner of the table or view called name,
// and which of the two it is ("table", "view").
func relationOwner(v *catalog.View, name string) (catalog.TableID, catalog.RoleID, string, bool) {
	if t, ok := v.TableNamed(name); ok {
		return t.ID, t.Owner, "table", true
	}
	if sv, ok := v.ViewNamed(name); ok {
		return sv.ID, sv.Owner, "view", true
	}
	return 0, 0, "", false
}
