package sqlfront

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// DDL in a transaction block. Clients that open a block for everything
// (psycopg2, JDBC without autocommit, ORMs' schema tools) send CREATE and
// DROP TABLE inside one, and PostgreSQL's DDL is transactional. mink's
// catalog is the metadata log, which has no transactions, so a block's DDL
// is made to look transactional to the block:
//
//   - CREATE TABLE runs at once (other sessions see the table right away)
//     and is undone by ROLLBACK (or ROLLBACK TO a savepoint before it) by
//     dropping the table again; ALTER TABLE … RENAME runs at once too and
//     is undone by renaming the table back;
//   - DROP TABLE is applied at COMMIT; until then the block's writes to
//     the table fail with 42P01 and ROLLBACK keeps the table. A CREATE
//     TABLE of a name the block dropped applies that drop at once, which
//     ROLLBACK then cannot undo.

// droppedTable is a DROP TABLE, or a TRUNCATE (truncate.go), waiting for
// its block's COMMIT.
type droppedTable struct {
	id       catalog.TableID
	name     string
	truncate bool
	restart  bool // TRUNCATE … RESTART IDENTITY
	// pendingAt is, for a TRUNCATE, len(tx.pending) when it ran: the
	// block's writes to the table before it are discarded, those after it
	// are applied after it at COMMIT.
	pendingAt int
	// schema, when set, makes the entry a DROP SCHEMA of the schema (with
	// its relations, cascade), which COMMIT applies; id and name are then
	// unset (schema.go).
	schema  catalog.SchemaID
	cascade bool
}

// droppedInTx reports whether the open block dropped the table called name.
func (s *session) droppedInTx(name string) bool {
	return slices.ContainsFunc(s.tx.dropped, func(d droppedTable) bool { return d.name == name && !d.truncate && d.schema == 0 })
}

// dropNow drops a table at once.
func (s *session) dropNow(ctx context.Context, id catalog.TableID) error {
	if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropTable{Table: id}); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	return nil
}

// applyCreateDrop runs before CREATE TABLE name in a block: a pending DROP
// of the same name is applied now, so the name is free.
func (s *session) applyPendingDrop(ctx context.Context, name string) error {
	for i, d := range s.tx.dropped {
		if d.name == name && !d.truncate {
			if err := s.dropNow(ctx, d.id); err != nil {
				return err
			}
			s.tx.dropped = slices.Delete(s.tx.dropped, i, i+1)
			return nil
		}
	}
	return nil
}

// undoDDL is how ROLLBACK undoes one statement of the block that took
// effect at once: a CREATE TABLE by dropping the table, an ALTER TABLE …
// RENAME [COLUMN] by renaming it back.
type undoDDL struct {
	table catalog.TableID
	// renamedFrom is the name a RENAME took from the table; "" for a
	// CREATE TABLE.
	renamedFrom string
	// view: table is a view's id, and the statement a CREATE VIEW (not
	// OR REPLACE of an existing view), with renamedFrom a RENAME, or with
	// dropped the drop of the view dropped was (views.go).
	view    bool
	dropped *catalog.SQLView
	// column: the statement an ALTER TABLE … RENAME COLUMN of the table's
	// column renamedFrom to column (rename.go).
	column string
	// revert: the statement an ALTER COLUMN, ADD COLUMN or DROP COLUMN,
	// which this record takes back (alter.go).
	revert catalog.Record
	// createdSchema: the statement a CREATE SCHEMA of the schema so named;
	// renamedSchema: an ALTER SCHEMA … RENAME of that schema from
	// renamedFrom (schema.go).
	createdSchema string
	renamedSchema catalog.SchemaID
}

// dropInTx records DROP TABLE of t in the open block: a table the block
// created is dropped at once (with its renames: nothing to undo), any
// other at COMMIT.
func (s *session) dropInTx(ctx context.Context, t *tableInfo) error {
	if slices.Contains(s.tx.undo, undoDDL{table: t.id}) {
		s.tx.undo = slices.DeleteFunc(s.tx.undo, func(u undoDDL) bool { return u.table == t.id })
		return s.dropNow(ctx, t.id)
	}
	s.tx.dropped = append(s.tx.dropped, droppedTable{id: t.id, name: t.name})
	return nil
}

// commitDDL applies the committed block's DROP TABLEs and TRUNCATEs.
func (s *session) commitDDL(ctx context.Context, dropped []droppedTable) error {
	truncated := map[catalog.TableID]bool{}
	for _, d := range dropped {
		if d.schema != 0 {
			if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropSchema{Schema: d.schema, Cascade: d.cascade}); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				return dropSchemaError(err)
			}
			continue
		}
		if d.truncate {
			if truncated[d.id] || slices.ContainsFunc(dropped, func(o droppedTable) bool { return o.id == d.id && !o.truncate }) {
				continue // truncated once already, or dropped anyway
			}
			truncated[d.id] = true
			restart := slices.ContainsFunc(dropped, func(o droppedTable) bool { return o.id == d.id && o.truncate && o.restart })
			if err := s.truncateNow(ctx, d.id, d.name, restart); err != nil {
				return err
			}
			continue
		}
		if err := s.dropNow(ctx, d.id); err != nil {
			return err
		}
	}
	return nil
}

// splitTruncated sorts the block's writes for COMMIT around its
// TRUNCATEs: before are the writes to tables it did not truncate, after
// the writes made to a table after the table's last TRUNCATE, which COMMIT
// applies after the TRUNCATE; the writes before a TRUNCATE are discarded
// (released). Primary-key changes to truncated tables are dropped.
func splitTruncated(pending []*pendingWrite, kvs map[catalog.BucketID]*txBucket, kvTables map[catalog.BucketID]*tableInfo, dropped []droppedTable) (before, after []*pendingWrite, kept map[catalog.BucketID]*txBucket) {
	for i, w := range pending {
		at, truncated := truncatedAt(dropped, w.table.id)
		switch {
		case !truncated:
			before = append(before, w)
		case i >= at:
			after = append(after, w)
		default:
			for _, r := range w.records {
				r.Release()
			}
		}
	}
	kept = make(map[catalog.BucketID]*txBucket, len(kvs))
	for id, b := range kvs {
		if t := kvTables[id]; t == nil {
			kept[id] = b
		} else if _, truncated := truncatedAt(dropped, t.id); !truncated {
			kept[id] = b
		}
	}
	return before, after, kept
}

// truncatedAt returns the pendingAt of the block's last TRUNCATE of table
// id, and whether it truncated the table.
func truncatedAt(dropped []droppedTable, id catalog.TableID) (int, bool) {
	at, truncated := 0, false
	for _, d := range dropped {
		if d.truncate && d.id == id {
			at, truncated = max(at, d.pendingAt), true
		}
	}
	return at, truncated
}

// rollbackDDL undoes the CREATE TABLEs and renames of a block that rolled
// back (from the savepoint's count on), newest first. A failure is
// logged: the table stays as it is, as if the statement had run outside
// the block.
func (s *session) rollbackDDL(ctx context.Context, keep int) {
	remap := map[catalog.TableID]catalog.TableID{} // views created again (views.go)
	for len(s.tx.undo) > keep {
		u := s.tx.undo[len(s.tx.undo)-1]
		s.tx.undo = s.tx.undo[:len(s.tx.undo)-1]
		if u.view {
			s.rollbackViewDDL(ctx, u, remap)
			continue
		}
		if u.createdSchema != "" || u.renamedSchema != 0 {
			s.rollbackSchemaDDL(ctx, u)
			continue
		}
		if u.revert != nil {
			if _, err := s.f.cfg.Meta.Propose(ctx, u.revert); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				s.f.cfg.Logger.Warn("rollback: could not take an ALTER TABLE back", "table", u.table, "record", u.revert.Kind(), "err", err)
			}
			continue
		}
		if u.column != "" {
			rc := catalog.RenameColumn{Table: u.table, From: u.column, To: u.renamedFrom}
			if _, err := s.f.cfg.Meta.Propose(ctx, rc); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				s.f.cfg.Logger.Warn("rollback: could not rename a column back", "table", u.table, "column", u.column, "name", u.renamedFrom, "err", err)
			}
			continue
		}
		if u.renamedFrom == "" {
			// Views created on the table since go with it.
			var views []catalog.TableID
			s.f.cfg.Meta.Read(func(v *catalog.View) { views = v.DependentViews(u.table) })
			if len(views) > 0 {
				if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropView{Views: views}); err != nil {
					s.f.cfg.Logger.Warn("rollback: could not drop the views of a table the block created", "table", u.table, "err", err)
				}
			}
			if err := s.dropNow(ctx, u.table); err != nil {
				s.f.cfg.Logger.Warn("rollback: could not drop a table the block created", "table", u.table, "err", err)
			}
			continue
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.RenameTable{Table: u.table, Name: u.renamedFrom}); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			s.f.cfg.Logger.Warn("rollback: could not rename a table back", "table", u.table, "name", u.renamedFrom, "err", err)
		}
	}
}

// rollbackDDLOnClose undoes the DDL of a block left open by a closing
// connection.
func (s *session) rollbackDDLOnClose() {
	if len(s.tx.undo) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.rollbackDDL(ctx, 0)
}

// errDroppedInTx is the error for a table the block dropped.
func errDroppedInTx(name string) error {
	return errorf(pgwire.CodeUndefinedTable, "relation %q does not exist", name)
}
