package translate

import (
	"strings"

	"github.com/minkdb/mink/sqlfront/pgcatalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// The privilege functions of the catalogs.

// privilegeCall rewrites has_table_privilege([role,] table, privileges),
// has_any_column_privilege([role,] table, privileges) and
// has_column_privilege([role,] table, column, privileges). Columns have
// the privileges of their table (mink grants none on columns), so the
// column is not looked at.
func (rw *catalogRewriter) privilegeCall(name string, fc *pg.FuncCall) *pg.Node {
	args := fc.Args
	want := 2
	names := pgcatalog.TablePrivilegeNames
	if name != "has_table_privilege" {
		names = pgcatalog.ColumnPrivilegeNames
	}
	if name == "has_column_privilege" {
		want = 3
	}
	role := pg.Cast(pg.IntConst(int64(rw.consts.Role)), "uinteger")
	switch len(args) {
	case want:
	case want + 1:
		role, args = rw.roleArg(args[0], true), args[1:]
	default:
		rw.fail(pgwire.Errorf(pgwire.CodeUndefinedFunction, "function %s with %d arguments does not exist", name, len(args)))
		return pg.NullConst()
	}
	pattern, ok := rw.privilegePattern(name, args[len(args)-1], names)
	if !ok {
		return pg.NullConst()
	}
	return rw.macroCall("mink_has_privilege", role, rw.relationArg(args[0]), pg.StringConst(pattern))
}

// privilegePattern is the regular expression that matches the letters of
// mink.privileges of a role holding one of the privileges listed by arg.
func (rw *catalogRewriter) privilegePattern(fn string, arg *pg.Node, names []pgcatalog.PrivilegeName) (string, bool) {
	lit := arg.GetAConst().GetSval()
	if lit == nil {
		rw.fail(pgwire.Errorf(pgwire.CodeFeatureNotSupported, "%s with a privilege list that is not a constant is not supported by mink", fn))
		return "", false
	}
	privs, _, grant, err := pgcatalog.ParsePrivileges(lit.Sval, names)
	if err != nil {
		rw.fail(err)
		return "", false
	}
	class := privs.Letters()
	if grant {
		class += "*" // the grant option: only owners and superusers hold it
	}
	if class == "" {
		return "x^", true // RULE: nobody has it
	}
	return "[" + class + "]", true
}

// hasRoleCall rewrites pg_has_role([member,] role, privileges): whether
// member (the session's role) has role. Every role inherits in mink, so
// USAGE is MEMBER; only superusers have the ADMIN OPTION of a role.
func (rw *catalogRewriter) hasRoleCall(fc *pg.FuncCall) *pg.Node {
	args := fc.Args
	member := pg.Cast(pg.IntConst(int64(rw.consts.Role)), "uinteger")
	switch len(args) {
	case 2:
	case 3:
		member, args = rw.roleArg(args[0], false), args[1:]
	default:
		rw.fail(pgwire.Errorf(pgwire.CodeUndefinedFunction, "function pg_has_role with %d arguments does not exist", len(args)))
		return pg.NullConst()
	}
	lit := args[1].GetAConst().GetSval()
	if lit == nil {
		rw.fail(pgwire.Errorf(pgwire.CodeFeatureNotSupported, "pg_has_role with a privilege list that is not a constant is not supported by mink"))
		return pg.NullConst()
	}
	_, plain, _, err := pgcatalog.ParsePrivileges(lit.Sval, pgcatalog.RolePrivilegeNames)
	if err != nil {
		rw.fail(err)
		return pg.NullConst()
	}
	return rw.macroCall("mink_has_role", member, rw.roleArg(args[0], false), pg.BoolConst(!plain))
}

// roleArg resolves a role argument: a name (public: PUBLIC, where the
// function takes it), an oid, or current_user and its synonyms.
func (rw *catalogRewriter) roleArg(n *pg.Node, public bool) *pg.Node {
	if f := n.GetSqlvalueFunction(); f != nil {
		switch f.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_USER,
			pg.SQLValueFunctionOp_SVFOP_SESSION_USER, pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:
			return pg.Cast(pg.IntConst(int64(rw.consts.Role)), "uinteger")
		}
	}
	switch objectArgKind(n) {
	case argName:
		return rw.macroCall("mink_role_oid", n, pg.BoolConst(public))
	case argOID:
		return pg.Cast(n, "uinteger")
	}
	return rw.macroCall("mink_role_any", n, pg.BoolConst(public))
}

// relationArg resolves a table argument: a name, or an oid.
func (rw *catalogRewriter) relationArg(n *pg.Node) *pg.Node {
	if c := n.GetAConst().GetSval(); c != nil {
		if lookup := rw.regLiteral("regclass", c.Sval); lookup != nil {
			return lookup
		}
		return pg.NullConst()
	}
	switch objectArgKind(n) {
	case argName:
		return rw.macroCall("mink_to_regclass", n)
	case argOID:
		return pg.Cast(n, "uinteger")
	}
	return rw.macroCall("mink_rel_any", n)
}

// An argument that names an object is a name, an oid, or either (a column
// or an expression, told apart by its type when the statement runs).
const (
	argEither = iota
	argName
	argOID
)

// objectArgKind tells what the argument of a privilege function is, from
// its form: a string or a parameter is a name (PostgreSQL resolves an
// unknown argument to the text form), a number or a cast to an oid type
// an oid.
func objectArgKind(n *pg.Node) int {
	if c := n.GetAConst(); c != nil {
		switch {
		case c.GetSval() != nil:
			return argName
		case c.GetIval() != nil:
			return argOID
		}
	}
	if n.GetParamRef() != nil {
		return argName
	}
	if tc := n.GetTypeCast(); tc != nil && len(tc.TypeName.ArrayBounds) == 0 {
		names := tc.TypeName.Names
		switch strings.ToLower(names[len(names)-1].GetString_().GetSval()) {
		case "text", "varchar", "name", "bpchar":
			return argName
		case "oid", "regclass", "regrole", "int2", "int4", "int8":
			return argOID
		}
	}
	return argEither
}
