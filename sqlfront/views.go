package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/sqlfront/translate"
)

// Views. A view is a catalog.SQLView: its query as SQL text, its columns,
// and the relations the query reads, by id. A statement that reads a view
// reads its query instead (translate.ExpandViews), planned from the
// catalog view of the statement's Prepare, on every node alike. The
// session's role needs SELECT on the view; the view's relations are
// checked against the view's owner (privileges.go), as in PostgreSQL.
//
// View DDL takes effect at once, also in a transaction block (mink's
// catalog has no transactions). As for CREATE TABLE and RENAME (ddl_tx.go),
// ROLLBACK drops the views the block created, renames back the views it
// renamed and creates again (under new ids) the views it dropped; it does
// not bring back the old query of a view it replaced.

// planCreateView plans CREATE [OR REPLACE] VIEW v [(cols)] AS query.
func (s *session) planCreateView(ctx context.Context, vs *pg.ViewStmt) (*stmt, error) {
	if vs.View.Relpersistence == "t" {
		return nil, unsupported("temporary views are not supported by mink")
	}
	schema, bare, name, err := s.createdName(vs.View)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(name, changelogSuffix):
		return nil, errorf(codeReservedName, "relation names ending in %q are reserved for changelogs", changelogSuffix)
	case len(vs.Options) > 0:
		return nil, unsupported("CREATE VIEW … WITH (options) is not supported by mink")
	case vs.WithCheckOption != pg.ViewCheckOption_NO_CHECK_OPTION && vs.WithCheckOption != 0:
		return nil, unsupported("WITH CHECK OPTION is not supported by mink: its views are not updatable")
	case vs.Query.GetSelectStmt() == nil:
		return nil, unsupported("CREATE VIEW … AS %s is not supported", statementName(vs.Query))
	}
	query := proto.Clone(vs.Query).(*pg.Node)
	s.f.cfg.Meta.Read(func(v *catalog.View) { expandStars(v, query.GetSelectStmt()) })
	// The query is planned from its own text (views in it expanded), which
	// checks it and describes its columns.
	text, parsed, q, err := s.planOwnText(ctx, query)
	if err != nil {
		return nil, err
	}
	if len(vs.Aliases) > len(q.columns) {
		return nil, errorf(pgwire.CodeSyntaxError, "CREATE VIEW specifies more column names than columns")
	}
	spec := catalog.ViewSpec{Name: bare, Schema: schema, Query: text}
	seen := map[string]bool{}
	for i, c := range q.columns {
		col := c.Name
		if i < len(vs.Aliases) {
			col = vs.Aliases[i].GetString_().GetSval()
		}
		if seen[col] {
			return nil, errorf(pgwire.CodeDuplicateColumn, "column %q specified more than once", col)
		}
		seen[col] = true
		typ, ok := sqltypes.FromOID(c.TypeOID, c.TypeMod)
		if !ok {
			return nil, unsupported("column %q of the view's query has a type mink does not store (type OID %d)", col, c.TypeOID)
		}
		spec.Columns = append(spec.Columns, catalog.ViewColumn{Name: col, Type: typ.Name()})
	}
	return s.tagOnly("CREATE VIEW", func(ctx context.Context) error {
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			spec.Relations, err = viewRelations(v, parsed)
			if err == nil {
				err = s.checkCreateView(v, name, spec, vs.Replace)
			}
		})
		if err != nil {
			return err
		}
		var replacing bool
		s.f.cfg.Meta.Read(func(v *catalog.View) { _, replacing = v.ViewNamed(name) })
		out, err := s.f.cfg.Meta.Propose(ctx, catalog.CreateView{Spec: spec, Owner: s.ownerRole(), Replace: vs.Replace})
		if err == nil && !replacing && s.tx.status == pgwire.TxInBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{table: out.Table, view: true})
		}
		switch {
		case errors.Is(err, catalog.ErrExists):
			return errorf(pgwire.CodeDuplicateTable, "relation %q already exists", name)
		case errors.Is(err, catalog.ErrNotFound):
			return errorf(pgwire.CodeUndefinedTable, "a relation the view reads was dropped meanwhile")
		case errors.Is(err, catalog.ErrInvalid):
			return errorf(codeInvalidTableDefinition, "cannot replace view %q: %v", name, err)
		}
		return err
	}), nil
}

// checkCreateView refuses, with PostgreSQL's errors, a CREATE VIEW that the
// catalog would reject: a name taken, a replacement that changes the view's
// columns, or one that would make the view read itself.
func (s *session) checkCreateView(v *catalog.View, name string, spec catalog.ViewSpec, replace bool) error {
	if _, ok := v.TableNamed(name); ok {
		if replace {
			return errorf(pgwire.CodeWrongObjectType, "%q is not a view", name)
		}
		return errorf(pgwire.CodeDuplicateTable, "relation %q already exists", name)
	}
	old, ok := v.ViewNamed(name)
	if !ok {
		return nil
	}
	if !replace {
		return errorf(pgwire.CodeDuplicateTable, "relation %q already exists", name)
	}
	if !s.superuserIn(v) && (old.Owner == 0 || !v.IsMember(s.identity.Role, old.Owner)) {
		return permissionDenied("must be owner of view %s", name)
	}
	if len(spec.Columns) < len(old.Spec.Columns) {
		return errorf(codeInvalidTableDefinition, "cannot drop columns from view")
	}
	for i, c := range old.Spec.Columns {
		n := spec.Columns[i]
		if n.Name != c.Name {
			return &pgwire.Error{Code: codeInvalidTableDefinition,
				Message: fmt.Sprintf("cannot change name of view column %q to %q", c.Name, n.Name),
				Hint:    "Use ALTER VIEW ... RENAME COLUMN ... to change name of view column instead."}
		}
		if n.Type != c.Type {
			return errorf(codeInvalidTableDefinition, "cannot change data type of view column %q from %s to %s", c.Name, c.Type, n.Type)
		}
	}
	readers := v.DependentViews(old.ID)
	for _, r := range spec.Relations {
		if r.ID == old.ID || slices.Contains(readers, r.ID) {
			// PostgreSQL accepts the view and fails every read of it.
			return errorf(codeInvalidObjectDefinition, "infinite recursion detected in rules for relation %q", name)
		}
	}
	return nil
}

// viewRelations returns the tables and views query reads, as a view
// stores them; 42P01 for a name that is neither.
func viewRelations(v *catalog.View, query *pg.Node) ([]catalog.ViewRelation, error) {
	ctes := cteNames(query)
	var rels []catalog.ViewRelation
	seen := map[string]bool{}
	for _, rv := range pg.RangeVars(query) {
		if !readsRelation(rv, ctes) || seen[rv.Relname] {
			continue
		}
		seen[rv.Relname] = true
		var id catalog.TableID
		if t, ok := v.TableNamed(rv.Relname); ok {
			id = t.ID
		} else if sv, ok := v.ViewNamed(rv.Relname); ok {
			id = sv.ID
		} else {
			return nil, undefinedTable(rv.Relname)
		}
		rels = append(rels, catalog.ViewRelation{Name: rv.Relname, ID: id})
	}
	return rels, nil
}

// readsRelation reports whether rv, in a query with CTEs ctes, names one
// of the database's tables or views (not a CTE, not a catalog relation:
// pg_catalog comes first in PostgreSQL's search path).
func readsRelation(rv *pg.RangeVar, ctes map[string]bool) bool {
	switch {
	case !inPublic(rv):
		return false
	case rv.Schemaname == "" && ctes[rv.Relname]:
		return false
	}
	if _, isCatalog := pgcatalog.Key("", rv.Relname); isCatalog && rv.Schemaname == "" {
		return false
	}
	return true
}

// inPublic reports whether rv names a relation of mink's one schema:
// unqualified, or qualified with public and perhaps the database, as
// dbt writes "mink"."public"."t" (relName's rule).
func inPublic(rv *pg.RangeVar) bool {
	return (rv.Catalogname == "" || rv.Catalogname == "mink") && (rv.Schemaname == "" || rv.Schemaname == "public")
}

func cteNames(node *pg.Node) map[string]bool {
	ctes := map[string]bool{}
	pg.Visit(node, func(n *pg.Node) bool {
		if cte := n.GetCommonTableExpr(); cte != nil {
			ctes[cte.Ctename] = true
		}
		return true
	})
	return ctes
}

// viewQuery parses sv's query and names the relations it reads by their
// current names.
func viewQuery(v *catalog.View, sv *catalog.SQLView) (*pg.Node, error) {
	tree, err := pg.Parse(sv.Spec.Query)
	if err != nil || len(tree.Stmts) != 1 {
		return nil, fmt.Errorf("view %q: its stored query does not parse: %v", sv.Spec.Name, err)
	}
	node := tree.Stmts[0].Stmt
	current := map[string]string{}
	for _, r := range sv.Spec.Relations {
		if name, ok := v.QualifiedName(r.ID); ok {
			current[r.Name] = name
		}
	}
	ctes := cteNames(node)
	for _, rv := range pg.RangeVars(node) {
		if readsRelation(rv, ctes) {
			if name, ok := current[rv.Relname]; ok {
				rv.Relname = name
			}
		}
	}
	return node, nil
}

// viewLookup looks views up in v for translate.ExpandViews.
func viewLookup(v *catalog.View) translate.ViewLookup {
	return func(rv *pg.RangeVar) (translate.View, bool, error) {
		if !inPublic(rv) {
			return translate.View{}, false, nil
		}
		sv, ok := v.ViewNamed(rv.Relname)
		if !ok {
			return translate.View{}, false, nil
		}
		q, err := viewQuery(v, sv)
		if err != nil {
			return translate.View{}, false, err
		}
		cols := make([]string, len(sv.Spec.Columns))
		for i, c := range sv.Spec.Columns {
			cols[i] = c.Name
		}
		return translate.View{Query: q, Columns: cols}, true, nil
	}
}

// expandViews returns node with the views it reads replaced by their
// queries, the SQL text of the result (parsed again, so positions in the
// tree point into it), and the fingerprint of the views it was expanded
// from; node, sql and "" when it reads none. node is not modified.
func (s *session) expandViews(node *pg.Node, sql string) (*pg.Node, string, string, error) {
	if !s.hasViews() {
		return node, sql, "", nil
	}
	out := proto.Clone(node).(*pg.Node)
	var changed bool
	var fingerprint string
	var err error
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		changed, err = translate.ExpandViews(out, viewLookup(v))
		fingerprint = viewsFingerprint(v)
	})
	var rec *translate.ErrViewRecursion
	if errors.As(err, &rec) {
		return nil, "", "", errorf(codeInvalidObjectDefinition, "%s", rec.Error())
	}
	if err != nil || !changed {
		return node, sql, "", err
	}
	text, err := pg.Deparse(out)
	if err != nil {
		return nil, "", "", err
	}
	tree, err := pg.Parse(text)
	if err != nil {
		return nil, "", "", err
	}
	return tree.Stmts[0].Stmt, text, fingerprint, nil
}

// viewsFingerprint identifies what the views of v read: their names,
// queries (with the current names of their relations) and columns. A
// statement planned from the views of one fingerprint is planned again
// when it changes.
func viewsFingerprint(v *catalog.View) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(v.Views)) {
		sv := v.Views[id]
		fmt.Fprintf(&b, "%d %q %q %v", id, sv.Spec.Name, sv.Spec.Query, sv.Spec.Columns)
		for _, r := range sv.Spec.Relations {
			name, _ := v.RelationName(r.ID)
			fmt.Fprintf(&b, " %q=%q", r.Name, name)
		}
		b.WriteString(";")
	}
	return b.String()
}

// replanOnViewChange makes st, planned from sql and node, plan itself
// again before an execution at which the views have changed since it was
// planned (replaced, renamed, dropped, or their relations renamed), as
// PostgreSQL invalidates a cached plan: a prepared statement that reads a
// dropped view then fails with 42P01, and one whose result columns would
// change with PostgreSQL's 0A000.
func (s *session) replanOnViewChange(st *stmt, sql string, node *pg.Node, paramOIDs []uint32) *stmt {
	if st == nil || st.views == "" {
		return st
	}
	orig := proto.Clone(node).(*pg.Node)
	planned, run := st.views, st.run
	var replanned *stmt
	st.run = func(ctx context.Context, params []any) (pgwire.Result, error) {
		var now string
		s.f.cfg.Meta.Read(func(v *catalog.View) { now = viewsFingerprint(v) })
		if now != planned {
			next, err := s.plan(ctx, sql, proto.Clone(orig).(*pg.Node), paramOIDs)
			if err != nil {
				return pgwire.Result{}, err
			}
			if !sameColumns(next.columns, st.columns) || len(next.params) != len(st.params) {
				next.Close()
				return pgwire.Result{}, errorf(pgwire.CodeFeatureNotSupported, "cached plan must not change result type")
			}
			if replanned != nil {
				replanned.Close()
			}
			replanned, run, planned = next, next.run, now
		}
		return run(ctx, params)
	}
	closePlanned := st.close
	st.close = func() {
		if closePlanned != nil {
			closePlanned()
		}
		if replanned != nil {
			replanned.Close()
		}
	}
	return st
}

// sameColumns reports whether two statements' results have the same
// column names and types.
func sameColumns(a, b []pgwire.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].TypeOID != b[i].TypeOID || a[i].TypeMod != b[i].TypeMod {
			return false
		}
	}
	return true
}

// hasViews reports whether the catalog has a view: most have none, and
// their statements skip the expansion.
func (s *session) hasViews() bool {
	has := false
	s.f.cfg.Meta.Read(func(v *catalog.View) { has = len(v.Views) > 0 })
	return has
}

// isView reports whether rv names a view.
func (s *session) isView(rv *pg.RangeVar) bool {
	if rv == nil || !inPublic(rv) {
		return false
	}
	is := false
	s.f.cfg.Meta.Read(func(v *catalog.View) { _, is = v.ViewNamed(rv.Relname) })
	return is
}

// refuseViewTarget returns PostgreSQL's error for a statement that writes
// to a view (mink's views are not updatable), or nil.
func (s *session) refuseViewTarget(node *pg.Node) error {
	notUpdatable := func(verb, to string, rv *pg.RangeVar) error {
		return &pgwire.Error{Code: pgwire.CodeObjectNotInPrerequisiteState,
			Message: fmt.Sprintf("cannot %s view %q", verb, rv.Relname),
			Detail:  "mink's views are not updatable.",
			Hint:    fmt.Sprintf("%s the view's table instead.", to)}
	}
	switch n := node.Node.(type) {
	case *pg.Node_InsertStmt:
		if rv := n.InsertStmt.Relation; s.isView(rv) {
			return notUpdatable("insert into", "Insert into", rv)
		}
	case *pg.Node_UpdateStmt:
		if rv := n.UpdateStmt.Relation; s.isView(rv) {
			return notUpdatable("update", "Update", rv)
		}
	case *pg.Node_DeleteStmt:
		if rv := n.DeleteStmt.Relation; s.isView(rv) {
			return notUpdatable("delete from", "Delete from", rv)
		}
	case *pg.Node_CopyStmt:
		cp := n.CopyStmt
		if cp.Query == nil && s.isView(cp.Relation) {
			if cp.IsFrom {
				return &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("cannot copy to view %q", cp.Relation.Relname)}
			}
			return &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("cannot copy from view %q", cp.Relation.Relname),
				Hint: "Try the COPY (SELECT ...) TO variant."}
		}
	case *pg.Node_TruncateStmt:
		for _, r := range n.TruncateStmt.Relations {
			if rv := r.GetRangeVar(); s.isView(rv) {
				return errorf(pgwire.CodeWrongObjectType, "%q is not a table", rv.Relname)
			}
		}
	case *pg.Node_AlterTableStmt:
		if at := n.AlterTableStmt; s.isView(at.Relation) && !isOwnerChange(at) {
			return &pgwire.Error{Code: pgwire.CodeWrongObjectType,
				Message: fmt.Sprintf("ALTER action %s cannot be performed on relation %q", alterActionName(at), at.Relation.Relname),
				Detail:  "This operation is not supported for views."}
		}
	}
	return nil
}

// alterActionName names an ALTER TABLE's first action as PostgreSQL's
// errors do ("ADD COLUMN").
func alterActionName(at *pg.AlterTableStmt) string {
	if len(at.Cmds) == 0 {
		return "ALTER"
	}
	switch at.Cmds[0].GetAlterTableCmd().GetSubtype() {
	case pg.AlterTableType_AT_AddColumn:
		return "ADD COLUMN"
	case pg.AlterTableType_AT_DropColumn:
		return "DROP COLUMN"
	case pg.AlterTableType_AT_ColumnDefault:
		return "ALTER COLUMN ... SET DEFAULT"
	case pg.AlterTableType_AT_AlterColumnType:
		return "ALTER COLUMN ... SET DATA TYPE"
	case pg.AlterTableType_AT_AddConstraint:
		return "ADD CONSTRAINT"
	}
	return strings.TrimPrefix(at.Cmds[0].GetAlterTableCmd().GetSubtype().String(), "AT_")
}

// viewsReadsAllowed checks, for a read of view sv, that the view's owner
// may read what the view reads, through views of views (PostgreSQL checks a
// view's relations as its owner). An owner that is a superuser, or none
// (0), may read everything.
func viewReadsAllowed(v *catalog.View, sv *catalog.SQLView, depth int) error {
	owner := v.Roles[sv.Owner]
	if sv.Owner == 0 || (owner != nil && owner.Superuser) || depth > 64 {
		return nil
	}
	for _, r := range sv.Spec.Relations {
		if t := v.Tables[r.ID]; t != nil {
			if v.TablePrivileges(sv.Owner, t)&catalog.PrivSelect == 0 {
				return permissionDenied("permission denied for table %s", t.Spec.Name)
			}
			continue
		}
		inner := v.Views[r.ID]
		if inner == nil {
			continue
		}
		if v.ViewPrivileges(sv.Owner, inner)&catalog.PrivSelect == 0 {
			return permissionDenied("permission denied for view %s", inner.Spec.Name)
		}
		if err := viewReadsAllowed(v, inner, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// planDropView plans DROP VIEW [IF EXISTS] v, … [CASCADE | RESTRICT]: one
// catalog.DropView of the views named and, with CASCADE, of the views that
// read them.
func (s *session) planDropView(d *pg.DropStmt) (*stmt, error) {
	var names []string
	for _, obj := range d.Objects {
		name, err := s.relName(rangeVarOfName(obj))
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	cascade := d.Behavior == pg.DropBehavior_DROP_CASCADE
	return s.tagWithNotices("DROP VIEW", func(ctx context.Context) ([]*pgwire.Error, error) {
		var notices []*pgwire.Error
		var ids []catalog.TableID
		var undo []undoDDL
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			for _, name := range names {
				if _, ok := v.TableNamed(name); ok {
					err = &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("%q is not a view", name),
						Hint: "Use DROP TABLE to remove a table."}
					return
				}
				sv, ok := v.ViewNamed(name)
				if !ok {
					if !d.MissingOk {
						err = errorf(pgwire.CodeUndefinedTable, "view %q does not exist", name)
						return
					}
					notices = append(notices, notice(pgwire.CodeSuccessfulCompletion, "view %q does not exist, skipping", name))
					continue
				}
				if !slices.Contains(ids, sv.ID) {
					ids = append(ids, sv.ID)
				}
			}
			var more []*pgwire.Error
			ids, more, err = cascadeViews(v, "view", ids, cascade)
			notices = append(notices, more...)
			if err == nil && len(ids) > 0 {
				undo = s.dropUndo(v, ids)
			}
		})
		if err != nil || len(ids) == 0 {
			return notices, err
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropView{Views: ids}); err != nil {
			return nil, dropViewError(err)
		}
		s.tx.undo = append(s.tx.undo, undo...)
		return notices, nil
	}), nil
}

func viewOwnerNeeds(names []string) []tableNeed {
	var list []tableNeed
	for _, n := range names {
		list = append(list, tableNeed{table: n, owner: true})
	}
	return list
}

func dropViewError(err error) error {
	switch {
	case errors.Is(err, catalog.ErrInUse):
		return errorf(codeDependentObjects, "a view was created meanwhile that reads what the statement drops: %v", err)
	case errors.Is(err, catalog.ErrNotFound):
		return errorf(pgwire.CodeUndefinedTable, "a view was dropped meanwhile: %v", err)
	}
	return err
}

// cascadeViews returns ids (the tables or views a DROP names, of kind
// "table" or "view") followed by the views that read them, directly or
// through other views, in the order PostgreSQL reports them. Without
// cascade a reader is PostgreSQL's 2BP01 error, whose DETAIL lists them;
// with it, the readers are PostgreSQL's "drop cascades to …" notice.
// For a DROP TABLE the tables are left out of the result.
func cascadeViews(v *catalog.View, kind string, ids []catalog.TableID, cascade bool) ([]catalog.TableID, []*pgwire.Error, error) {
	dropped := map[catalog.TableID]bool{}
	for _, id := range ids {
		dropped[id] = true
	}
	var readers []catalog.TableID
	var depends, cascades []string
	var visit func(id catalog.TableID)
	visit = func(id catalog.TableID) {
		for _, r := range v.ViewsReading(id) {
			if dropped[r] {
				continue
			}
			dropped[r] = true
			readers = append(readers, r)
			name, _ := v.RelationName(id)
			what := "view"
			if v.Tables[id] != nil {
				what = "table"
			}
			depends = append(depends, fmt.Sprintf("view %s depends on %s %s", v.Views[r].Spec.Name, what, name))
			cascades = append(cascades, "drop cascades to view "+v.Views[r].Spec.Name)
			visit(r)
		}
	}
	var blocked catalog.TableID // the first named relation a view reads
	for _, id := range ids {
		before := len(readers)
		visit(id)
		if blocked == 0 && len(readers) > before {
			blocked = id
		}
	}
	out := readers
	if kind == "view" {
		out = append(append([]catalog.TableID(nil), ids...), readers...)
	}
	if len(readers) == 0 {
		return out, nil, nil
	}
	if !cascade {
		name, _ := v.RelationName(blocked)
		return nil, nil, &pgwire.Error{Code: codeDependentObjects,
			Message: fmt.Sprintf("cannot drop %s %s because other objects depend on it", kind, name),
			Detail:  strings.Join(depends, "\n"),
			Hint:    "Use DROP ... CASCADE to drop the dependent objects too."}
	}
	if len(cascades) == 1 {
		return out, []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion, "%s", cascades[0])}, nil
	}
	n := notice(pgwire.CodeSuccessfulCompletion, "drop cascades to %d other objects", len(cascades))
	n.Detail = strings.Join(cascades, "\n")
	return out, []*pgwire.Error{n}, nil
}

// planRenameView plans ALTER VIEW [IF EXISTS] v RENAME TO w, and ALTER
// TABLE … RENAME of a view (PostgreSQL takes either for either, except
// that ALTER VIEW of a table is 42809): one catalog.RenameView. Views that
// read it follow it.
func (s *session) planRenameView(rs *pg.RenameStmt, tag string) (*stmt, error) {
	name, err := s.relName(rs.Relation)
	if err != nil {
		return nil, err
	}
	to := rs.Newname
	if strings.HasSuffix(to, changelogSuffix) {
		return nil, errorf(codeReservedName, "relation names ending in %q are reserved for changelogs", changelogSuffix)
	}
	return s.tagWithNotices(tag, func(ctx context.Context) ([]*pgwire.Error, error) {
		var sv *catalog.SQLView
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			var ok bool
			if sv, ok = v.ViewNamed(name); ok {
				if _, taken := v.RelationNamedIn(sv.Spec.Schema, to); taken || to == sv.Spec.Name {
					err = errorf(pgwire.CodeDuplicateTable, "relation %q already exists", to)
				}
				return
			}
			if _, ok := v.TableNamed(name); ok {
				err = errorf(pgwire.CodeWrongObjectType, "%q is not a view", name)
			}
		})
		if err != nil {
			return nil, err
		}
		if sv == nil {
			if rs.MissingOk {
				return []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion, "relation %q does not exist, skipping", name)}, nil
			}
			return nil, undefinedTable(name)
		}
		if err := s.checkPrivileges(ctx, viewOwnerNeeds([]string{name})); err != nil {
			return nil, err
		}
		from := sv.Spec.Name // before the rename: sv is the catalog's
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.RenameView{View: sv.ID, Name: to}); err != nil {
			if errors.Is(err, catalog.ErrExists) {
				return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", to)
			}
			return nil, err
		}
		if s.tx.status == pgwire.TxInBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{table: sv.ID, renamedFrom: from, view: true})
		}
		return nil, nil
	}), nil
}

// readsRelations reports whether node is a statement whose relations may
// be views to expand (queries and DML; not DDL, whose relations are the
// objects it acts on).
func readsRelations(node *pg.Node) bool {
	switch node.Node.(type) {
	case *pg.Node_SelectStmt, *pg.Node_ExplainStmt, *pg.Node_InsertStmt, *pg.Node_UpdateStmt,
		*pg.Node_DeleteStmt, *pg.Node_CopyStmt, *pg.Node_CreateTableAsStmt:
		return true
	}
	return false
}

// viewDefinition is what pg_get_viewdef and pg_views show of a view: its
// query, with the current names of the relations it reads, as mink
// deparses it (one line, unlike PostgreSQL's pretty-printed form), with
// PostgreSQL's leading space and trailing semicolon.
func viewDefinition(v *catalog.View, sv *catalog.SQLView) string {
	q, err := viewQuery(v, sv)
	if err != nil {
		return " " + sv.Spec.Query + ";"
	}
	text, err := pg.Deparse(q)
	if err != nil {
		return " " + sv.Spec.Query + ";"
	}
	return " " + text + ";"
}

// rollbackViewDDL undoes, for a block that rolled back, a CREATE VIEW
// (with the views created on it since), an ALTER VIEW … RENAME, or the
// drop of a view (DROP VIEW, DROP … CASCADE), which creates the view again
// with its query, owner and grants under a new id. remap maps the ids of
// views created again in this rollback to their new ids, for the undo
// entries older than theirs. A failure is logged, as rollbackDDL's.
func (s *session) rollbackViewDDL(ctx context.Context, u undoDDL, remap map[catalog.TableID]catalog.TableID) {
	id := u.table
	if n, ok := remap[id]; ok {
		id = n
	}
	switch {
	case u.dropped != nil:
		s.recreateView(ctx, u.dropped, remap)
	case u.renamedFrom != "":
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.RenameView{View: id, Name: u.renamedFrom}); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			s.f.cfg.Logger.Warn("rollback: could not rename a view back", "view", id, "name", u.renamedFrom, "err", err)
		}
	default:
		var ids []catalog.TableID
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			if v.Views[id] != nil {
				ids = append([]catalog.TableID{id}, v.DependentViews(id)...)
			}
		})
		if len(ids) == 0 {
			return
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropView{Views: ids}); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			s.f.cfg.Logger.Warn("rollback: could not drop a view the block created", "view", id, "err", err)
		}
	}
}

// recreateView creates a dropped view again, its relations' ids mapped
// through remap, and records its new id there.
func (s *session) recreateView(ctx context.Context, sv *catalog.SQLView, remap map[catalog.TableID]catalog.TableID) {
	spec := sv.Spec
	spec.Relations = slices.Clone(spec.Relations)
	for i, r := range spec.Relations {
		if n, ok := remap[r.ID]; ok {
			spec.Relations[i].ID = n
		}
	}
	out, err := s.f.cfg.Meta.Propose(ctx, catalog.CreateView{Spec: spec, Owner: sv.Owner})
	if err != nil {
		s.f.cfg.Logger.Warn("rollback: could not create a dropped view again", "view", sv.Spec.Name, "err", err)
		return
	}
	remap[sv.ID] = out.Table
	for _, a := range sv.ACL {
		rec := catalog.GrantTable{Tables: []catalog.TableID{out.Table}, Grantee: a.Grantee, Privileges: a.Privileges}
		if _, err := s.f.cfg.Meta.Propose(ctx, rec); err != nil {
			s.f.cfg.Logger.Warn("rollback: could not grant on a view created again", "view", sv.Spec.Name, "err", err)
		}
	}
}

// dropUndo returns, in an open block, the undo entries that create the
// views ids of v again on ROLLBACK, in the order to append them:
// ROLLBACK, newest first, then creates a view before the views that read
// it. Outside a block it returns nil.
func (s *session) dropUndo(v *catalog.View, ids []catalog.TableID) []undoDDL {
	if s.tx.status != pgwire.TxInBlock {
		return nil
	}
	order := creationOrder(v, ids)
	out := make([]undoDDL, 0, len(order))
	for i := len(order) - 1; i >= 0; i-- {
		sv := cloneView(v.Views[order[i]])
		out = append(out, undoDDL{table: sv.ID, view: true, dropped: sv})
	}
	return out
}

// creationOrder orders ids (views) so that each comes after the views of
// ids it reads.
func creationOrder(v *catalog.View, ids []catalog.TableID) []catalog.TableID {
	var out []catalog.TableID
	done := map[catalog.TableID]bool{}
	var visit func(id catalog.TableID)
	visit = func(id catalog.TableID) {
		if done[id] || !slices.Contains(ids, id) {
			return
		}
		done[id] = true
		for _, r := range v.Views[id].Spec.Relations {
			visit(r.ID)
		}
		out = append(out, id)
	}
	for _, id := range ids {
		visit(id)
	}
	return out
}

func cloneView(sv *catalog.SQLView) *catalog.SQLView {
	c := *sv
	c.Spec.Columns = slices.Clone(sv.Spec.Columns)
	c.Spec.Relations = slices.Clone(sv.Spec.Relations)
	c.ACL = slices.Clone(sv.ACL)
	return &c
}

// expandStars replaces, in the target list of a plain SELECT (no set
// operation), `*` and `rel.*` with the columns they stand for in v, as
// PostgreSQL binds a view's columns when it creates the view: a table
// column added later does not appear in the view, nor shift the columns of
// a join. FROM items other than tables, views and joins of them without
// USING or NATURAL (subqueries, functions, catalogs) leave the query as it
// is; it reports whether it expanded the stars.
func expandStars(v *catalog.View, sel *pg.SelectStmt) bool {
	if sel == nil || sel.Op != pg.SetOperation_SETOP_NONE || len(sel.ValuesLists) > 0 {
		return false
	}
	type rel struct {
		alias string
		cols  []string
	}
	var rels []rel
	var from func(n *pg.Node) bool
	from = func(n *pg.Node) bool {
		if j := n.GetJoinExpr(); j != nil {
			if j.IsNatural || len(j.UsingClause) > 0 || j.Alias != nil {
				return false
			}
			return from(j.Larg) && from(j.Rarg)
		}
		rv := n.GetRangeVar()
		if rv == nil || !inPublic(rv) {
			return false
		}
		alias := rv.Relname
		if rv.Alias != nil {
			if len(rv.Alias.Colnames) > 0 {
				return false
			}
			alias = rv.Alias.Aliasname
		}
		var cols []string
		if t, ok := v.TableNamed(rv.Relname); ok {
			for _, c := range t.Spec.Columns {
				cols = append(cols, c.Name)
			}
		} else if sv, ok := v.ViewNamed(rv.Relname); ok {
			for _, c := range sv.Spec.Columns {
				cols = append(cols, c.Name)
			}
		} else {
			return false
		}
		rels = append(rels, rel{alias: alias, cols: cols})
		return true
	}
	for _, n := range sel.FromClause {
		if !from(n) {
			return false
		}
	}
	var out []*pg.Node
	stars := false
	for _, target := range sel.TargetList {
		ref := target.GetResTarget().GetVal().GetColumnRef()
		if ref == nil || len(ref.Fields) == 0 || ref.Fields[len(ref.Fields)-1].GetAStar() == nil {
			out = append(out, target)
			continue
		}
		stars = true
		var qualifier string
		if len(ref.Fields) == 2 {
			qualifier = ref.Fields[0].GetString_().GetSval()
		} else if len(ref.Fields) > 2 {
			return false
		}
		found := false
		for _, r := range rels {
			if qualifier != "" && r.alias != qualifier {
				continue
			}
			found = true
			for _, c := range r.cols {
				out = append(out, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{
					Val: &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: pg.Names(r.alias, c)}}},
				}}})
			}
		}
		if !found {
			return false
		}
	}
	if stars {
		sel.TargetList = out
	}
	return stars
}
