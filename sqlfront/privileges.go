package sqlfront

import (
	"context"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Privilege checks. Every statement names the tables it reads and writes;
// before each execution (not at Prepare, so that a GRANT or REVOKE holds
// from the next execution of a prepared statement too) the session's role
// must hold the privileges PostgreSQL would ask for:
//
//	SELECT, COPY … TO, EXPLAIN      SELECT on every table named
//	INSERT, COPY … FROM             INSERT on the target; UPDATE too for ON
//	                                CONFLICT DO UPDATE; SELECT for RETURNING
//	UPDATE                          UPDATE on the target; SELECT when it
//	                                reads columns (WHERE, SET a = a + 1,
//	                                FROM, RETURNING)
//	DELETE                          DELETE on the target; SELECT when it has
//	                                a WHERE, USING or RETURNING
//	TRUNCATE                        TRUNCATE
//	DROP, ALTER TABLE               ownership (or membership in the owning
//	                                role), or SUPERUSER
//
// A view needs what a table would; what the view reads is checked against
// the view's owner (views.go), through views of views, as PostgreSQL
// does. Tables named in subqueries, CTEs and joins need SELECT. A table's
// changelog (t$changelog) follows its table. Names that are no table (CTE
// names, pg_catalog relations) are left to the statement, which reports
// 42P01 for a missing table as before.

// tableNeed is a privilege a statement needs on a table (by name).
type tableNeed struct {
	table string
	priv  catalog.Privileges
	owner bool // ownership, not a privilege
}

// needs collects what a statement needs.
type needs struct {
	list []tableNeed
	ctes map[string]bool
}

func (n *needs) add(rv *pg.RangeVar, priv catalog.Privileges) {
	if rv == nil || rv.Schemaname == "pg_catalog" || rv.Schemaname == "information_schema" {
		return
	}
	name := rv.Relname
	if base, ok := strings.CutSuffix(name, "$changelog"); ok {
		name = base
	}
	if rv.Schemaname == "" && n.ctes[name] {
		return
	}
	n.list = append(n.list, tableNeed{table: name, priv: priv})
}

func (n *needs) owner(rv *pg.RangeVar) {
	if rv != nil {
		n.list = append(n.list, tableNeed{table: rv.Relname, owner: true})
	}
}

// reads adds SELECT on every table named anywhere in m, and remembers the
// names of CTEs defined in it.
func (n *needs) reads(m protoreflect.ProtoMessage) {
	if m == nil {
		return
	}
	pg.Walk(m, func(msg protoreflect.Message) {
		if cte, ok := msg.Interface().(*pg.CommonTableExpr); ok {
			if n.ctes == nil {
				n.ctes = map[string]bool{}
			}
			n.ctes[cte.Ctename] = true
		}
	})
	pg.Walk(m, func(msg protoreflect.Message) {
		if rv, ok := msg.Interface().(*pg.RangeVar); ok {
			n.add(rv, catalog.PrivSelect)
		}
	})
}

// readsColumns reports whether any of nodes refers to a column.
func readsColumns(nodes ...protoreflect.ProtoMessage) bool {
	found := false
	for _, m := range nodes {
		if m == nil || !m.ProtoReflect().IsValid() {
			continue
		}
		pg.Walk(m, func(msg protoreflect.Message) {
			if _, ok := msg.Interface().(*pg.ColumnRef); ok {
				found = true
			}
		})
	}
	return found
}

// statementNeeds returns what node needs.
func statementNeeds(node *pg.Node) []tableNeed {
	var n needs
	switch x := node.Node.(type) {
	case *pg.Node_SelectStmt:
		n.reads(x.SelectStmt)
	case *pg.Node_ExplainStmt:
		if q := x.ExplainStmt.Query; q != nil {
			return statementNeeds(q)
		}
	case *pg.Node_CreateTableAsStmt:
		n.reads(x.CreateTableAsStmt.Query)
	case *pg.Node_InsertStmt:
		in := x.InsertStmt
		n.reads(in.SelectStmt)
		n.reads(in.WithClause)
		need := catalog.PrivInsert
		if oc := in.OnConflictClause; oc != nil && oc.Action == pg.OnConflictAction_ONCONFLICT_UPDATE {
			need |= catalog.PrivUpdate
		}
		if len(in.ReturningList) > 0 || (in.OnConflictClause != nil && in.OnConflictClause.WhereClause != nil) {
			need |= catalog.PrivSelect
		}
		n.add(in.Relation, need)
	case *pg.Node_UpdateStmt:
		up := x.UpdateStmt
		n.reads(up.WithClause)
		for _, f := range up.FromClause {
			n.reads(f)
		}
		n.reads(up.WhereClause)
		for _, t := range up.TargetList {
			n.reads(t)
		}
		need := catalog.PrivUpdate
		if up.WhereClause != nil || len(up.ReturningList) > 0 || len(up.FromClause) > 0 || readsColumns(nodeMessages(up.TargetList)...) {
			need |= catalog.PrivSelect
		}
		n.add(up.Relation, need)
	case *pg.Node_DeleteStmt:
		del := x.DeleteStmt
		n.reads(del.WithClause)
		for _, u := range del.UsingClause {
			n.reads(u)
		}
		n.reads(del.WhereClause)
		need := catalog.PrivDelete
		if del.WhereClause != nil || len(del.ReturningList) > 0 || len(del.UsingClause) > 0 {
			need |= catalog.PrivSelect
		}
		n.add(del.Relation, need)
	case *pg.Node_CopyStmt:
		cp := x.CopyStmt
		switch {
		case cp.Query != nil:
			n.reads(cp.Query)
		case cp.IsFrom:
			n.add(cp.Relation, catalog.PrivInsert)
		default:
			n.add(cp.Relation, catalog.PrivSelect)
		}
	case *pg.Node_TruncateStmt:
		for _, r := range x.TruncateStmt.Relations {
			n.add(r.GetRangeVar(), catalog.PrivTruncate)
		}
	case *pg.Node_DropStmt:
		if x.DropStmt.RemoveType == pg.ObjectType_OBJECT_TABLE || x.DropStmt.RemoveType == pg.ObjectType_OBJECT_VIEW {
			for _, obj := range x.DropStmt.Objects {
				if rv := rangeVarOfName(obj); rv != nil {
					n.owner(rv)
				}
			}
		}
	case *pg.Node_AlterTableStmt:
		if !isOwnerChange(x.AlterTableStmt) {
			n.owner(x.AlterTableStmt.Relation)
		}
	case *pg.Node_IndexStmt:
		n.owner(x.IndexStmt.Relation)
	case *pg.Node_CreateStmt:
		for _, parent := range x.CreateStmt.InhRelations {
			n.owner(parent.GetRangeVar())
		}
	}
	return n.list
}

func nodeMessages(nodes []*pg.Node) []protoreflect.ProtoMessage {
	out := make([]protoreflect.ProtoMessage, len(nodes))
	for i, nd := range nodes {
		out[i] = nd
	}
	return out
}

// rangeVarOfName turns the name list of a DROP object into a RangeVar.
func rangeVarOfName(obj *pg.Node) *pg.RangeVar {
	l := obj.GetList()
	if l == nil || len(l.Items) == 0 {
		return nil
	}
	rv := &pg.RangeVar{Relname: l.Items[len(l.Items)-1].GetString_().GetSval()}
	if len(l.Items) > 1 {
		rv.Schemaname = l.Items[len(l.Items)-2].GetString_().GetSval()
	}
	return rv
}

// isOwnerChange reports whether an ALTER TABLE is OWNER TO alone (checked
// by its own planner: the new owner matters too).
func isOwnerChange(at *pg.AlterTableStmt) bool {
	for _, c := range at.Cmds {
		if cmd := c.GetAlterTableCmd(); cmd == nil || cmd.Subtype != pg.AlterTableType_AT_ChangeOwner {
			return false
		}
	}
	return len(at.Cmds) > 0
}

// checkPrivileges checks the session's role against what a statement
// needs. A refusal on this node's view is checked again once the view has
// caught up with the metadata log's head: a GRANT committed through another
// node holds here from the next statement, as it does in PostgreSQL.
func (s *session) checkPrivileges(ctx context.Context, list []tableNeed) error {
	if len(list) == 0 {
		return nil
	}
	err := s.privilegesIn(list)
	if err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if serr := s.f.cfg.Meta.Sync(ctx); serr != nil {
		return err // the refusal on this node's view stands
	}
	return s.privilegesIn(list)
}

// syncTimeout bounds the catch-up of a refused privilege check: with the
// metadata log out of reach the refusal stands after it.
const syncTimeout = 5 * time.Second

// privilegesIn is checkPrivileges on the current view.
func (s *session) privilegesIn(list []tableNeed) error {
	var err error
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		role := v.Roles[s.identity.Role]
		if s.superuserIn(v) {
			return
		}
		for _, nd := range list {
			if sv, ok := v.ViewNamed(nd.table); ok {
				switch {
				case nd.owner && (role == nil || sv.Owner == 0 || !v.IsMember(role.ID, sv.Owner)):
					err = errorf(pgwire.CodeInsufficientPrivilege, "must be owner of view %s", sv.Spec.Name)
				case nd.owner:
				case v.ViewPrivileges(s.identity.Role, sv)&nd.priv != nd.priv:
					err = errorf(pgwire.CodeInsufficientPrivilege, "permission denied for view %s", sv.Spec.Name)
				default:
					err = viewReadsAllowed(v, sv, 0)
				}
				if err != nil {
					return
				}
				continue
			}
			t, ok := v.TableNamed(nd.table)
			if !ok {
				continue
			}
			if nd.owner {
				if role == nil || t.Owner == 0 || !v.IsMember(role.ID, t.Owner) {
					err = errorf(pgwire.CodeInsufficientPrivilege, "must be owner of table %s", t.Spec.Name)
					return
				}
				continue
			}
			if v.TablePrivileges(s.identity.Role, t)&nd.priv != nd.priv {
				err = errorf(pgwire.CodeInsufficientPrivilege, "permission denied for table %s", t.Spec.Name)
				return
			}
		}
	})
	return err
}

// guarded makes st check the privileges node needs before each execution.
func (s *session) guarded(st *stmt, node *pg.Node) *stmt {
	list := statementNeeds(node)
	if len(list) == 0 || st == nil {
		return st
	}
	run := st.run
	st.run = func(ctx context.Context, params []any) (pgwire.Result, error) {
		if err := s.checkPrivileges(ctx, list); err != nil {
			return pgwire.Result{}, err
		}
		return run(ctx, params)
	}
	return st
}

// isSuperuser reports whether the session's role is a superuser now.
func (s *session) isSuperuser() bool {
	super := false
	s.f.cfg.Meta.Read(func(v *catalog.View) { super = s.superuserIn(v) })
	return super
}

// superuserIn reports whether the session's role is a superuser in v. The
// bootstrap superuser is one even before its role is in the view (a front
// end that runs without roles: the bootstrap creates it at a node's start).
func (s *session) superuserIn(v *catalog.View) bool {
	if r := v.Roles[s.identity.Role]; r != nil {
		return r.Superuser
	}
	return s.identity.Role == catalog.BootstrapRole
}

// ownerRole is the owner of a table the session creates: its role, or none
// (0) when the role is not in the view (a front end without roles).
func (s *session) ownerRole() catalog.RoleID {
	var owner catalog.RoleID
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		if v.Roles[s.identity.Role] != nil {
			owner = s.identity.Role
		}
	})
	return owner
}
