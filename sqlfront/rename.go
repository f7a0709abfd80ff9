package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// planRenameTable plans ALTER TABLE [IF EXISTS] t RENAME TO u: one
// catalog.RenameTable record, so every node reads the old name or the new
// one, never neither. The table keeps its data, buckets, sequences, grants
// and lake; its Kafka topic and Flight descriptor take the new name. In a
// transaction block the rename takes effect at once, for other sessions
// too, and ROLLBACK renames the table back (ddl_tx.go).
func (s *session) planRenameTable(ctx context.Context, rs *pg.RenameStmt) (*stmt, error) {
	name, err := s.relName(rs.Relation)
	if err != nil {
		return nil, err
	}
	to := rs.Newname
	if strings.HasSuffix(to, changelogSuffix) {
		return nil, errorf(codeReservedName, "table names ending in %q are reserved for changelogs", changelogSuffix)
	}
	return s.tagWithNotices("ALTER TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		t, skipped, err := s.renamedTable(ctx, rs, name)
		if t == nil {
			return skipped, err
		}
		if to == t.spec.Name {
			return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", to)
		}
		inBlock := s.tx.status == pgwire.TxInBlock
		if inBlock {
			var qualified string
			s.f.cfg.Meta.Read(func(v *catalog.View) { qualified = v.QualifyIn(t.spec.Schema, to) })
			if err := s.applyPendingDrop(ctx, qualified); err != nil {
				return nil, err
			}
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.RenameTable{Table: t.id, Name: to}); err != nil {
			if errors.Is(err, catalog.ErrExists) {
				return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", to)
			}
			return nil, err
		}
		if inBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{table: t.id, renamedFrom: t.spec.Name})
		}
		return nil, nil
	}), nil
}

// renamedTable looks up the table ALTER TABLE [IF EXISTS] name RENAME …
// renames and checks that the session's role owns it; with IF EXISTS, a
// missing table is nil and the notice that the statement skipped it.
func (s *session) renamedTable(ctx context.Context, rs *pg.RenameStmt, name string) (*tableInfo, []*pgwire.Error, error) {
	t, err := s.lookupTable(rs.Relation)
	if err != nil {
		var we *pgwire.Error
		if rs.MissingOk && errors.As(err, &we) && we.Code == pgwire.CodeUndefinedTable {
			return nil, []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion, "relation %q does not exist, skipping", name)}, nil
		}
		return nil, nil, err
	}
	if err := s.checkPrivileges(ctx, []tableNeed{{table: t.name, owner: true}}); err != nil {
		return nil, nil, err
	}
	return t, nil, nil
}

// planRenameColumn plans ALTER TABLE [IF EXISTS] t RENAME [COLUMN] a TO b:
// one catalog.RenameColumn record, so every node reads the old name or the
// new one, never neither. Stored rows are not rewritten: stream batches
// and KV rows hold the table's columns by position, and the lake maps its
// files to the table's columns by Iceberg field id (the tiering round
// renames the lake schema's column, tiering/lake.go). A view stored as
// SQL that names the column (or reads the table with a *) cannot be
// rewritten by mink, so the rename is refused with 2BP01 while one reads
// the table. In a transaction block the rename takes effect at once and
// ROLLBACK renames the column back (ddl_tx.go).
func (s *session) planRenameColumn(rs *pg.RenameStmt) (*stmt, error) {
	name, err := s.relName(rs.Relation)
	if err != nil {
		return nil, err
	}
	from, to := rs.Subname, rs.Newname
	return s.tagWithNotices("ALTER TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		t, skipped, err := s.renamedTable(ctx, rs, name)
		if t == nil {
			return skipped, err
		}
		if _, ok := t.colIdx[from]; !ok {
			return nil, errorf(pgwire.CodeUndefinedColumn, "column %q does not exist", from)
		}
		if _, ok := t.colIdx[to]; ok {
			return nil, errorf(pgwire.CodeDuplicateColumn, "column %q of relation %q already exists", to, t.name)
		}
		if t.isPK() && to == kvcodec.ChangeTypeColumn {
			return nil, errorf(codeReservedName, "column name %q is reserved in primary-key tables (it is the change type of the table's changelog)", to)
		}
		if err := s.columnViews(t, from); err != nil {
			return nil, err
		}
		_, err = s.f.cfg.Meta.Propose(ctx, catalog.RenameColumn{Table: t.id, From: from, To: to})
		switch {
		case errors.Is(err, catalog.ErrExists):
			return nil, errorf(pgwire.CodeDuplicateColumn, "column %q of relation %q already exists", to, t.name)
		case errors.Is(err, catalog.ErrNotFound):
			// Dropped or renamed by another session meanwhile.
			if _, terr := s.f.lookupTableByName(t.name); terr != nil {
				return nil, terr
			}
			return nil, errorf(pgwire.CodeUndefinedColumn, "column %q does not exist", from)
		case err != nil:
			return nil, err
		}
		if s.tx.status == pgwire.TxInBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{table: t.id, renamedFrom: from, column: to})
		}
		return nil, nil
	}), nil
}

// columnViews returns PostgreSQL's 2BP01 error when a view reads table t
// and its stored query names column col, or uses a * (whose columns
// mink expanded by name, or left to expand at read time): mink cannot
// rewrite a view's SQL, so the view would break. "Names" is any
// identifier or string of the query equal to col, which may refuse a
// rename PostgreSQL would not need to think about, never the other way.
func (s *session) columnViews(t *tableInfo, col string) error {
	depends := s.viewsNaming(t, col)
	if len(depends) == 0 {
		return nil
	}
	return &pgwire.Error{Code: codeDependentObjects,
		Message: fmt.Sprintf("cannot rename column %s of table %s because other objects depend on it", col, t.name),
		Detail:  strings.Join(depends, "\n"),
		Hint:    "mink cannot rewrite the SQL of a view: drop the views, rename the column, and create them again."}
}

// viewsNaming says which views that read table t name its column col
// (or use a *), a line for each, as PostgreSQL's DETAIL does.
func (s *session) viewsNaming(t *tableInfo, col string) []string {
	var depends []string
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, id := range v.ViewsReading(t.id) {
			sv := v.Views[id]
			if queryMentions(sv.Spec.Query, col) {
				depends = append(depends, fmt.Sprintf("view %s depends on column %s of table %s", sv.Spec.Name, col, t.name))
			}
		}
	})
	return depends
}

// queryMentions reports whether the SQL query names col (an identifier or
// a string equal to it) or holds a *; true for a query that does not
// parse.
func queryMentions(query, col string) bool {
	tree, err := pg.Parse(query)
	if err != nil {
		return true
	}
	found := false
	pg.Walk(tree, func(m protoreflect.Message) {
		switch n := m.Interface().(type) {
		case *pg.String:
			found = found || n.Sval == col
		case *pg.A_Star:
			found = true
		}
	})
	return found
}
