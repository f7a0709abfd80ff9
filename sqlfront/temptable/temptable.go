// Package temptable keeps a session's temporary tables (CREATE TEMP
// TABLE): tables of the session's own engine connection, never in the
// metadata log, gone when the session ends. Set is their bookkeeping:
// which exist, with which columns, what ROLLBACK (or ROLLBACK TO a
// savepoint) must undo, and what ON COMMIT does at the end of each
// transaction.
//
// Writes to a temporary table run in the engine at once, so a transaction
// block keeps an undo log: a table created in the block is dropped by its
// rollback; a table dropped in it is renamed to a hidden name until
// COMMIT, and renamed back by its rollback; before the first write to a
// table that existed when the block (or its newest savepoint) began, the
// table's rows are copied to a hidden table, and a rollback puts them
// back. The copy costs one scan of the table, once per table per block or
// savepoint.
package temptable

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Conn is what a Set needs of the session's engine connection.
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) error
	QueryArrow(ctx context.Context, query string, args ...any) (array.RecordReader, error)
	RegisterRecords(ctx context.Context, name string, schema *arrow.Schema, batches []arrow.RecordBatch) (release func(), err error)
}

// OnCommit is what the end of a transaction does to a table (CREATE TEMP
// TABLE … ON COMMIT).
type OnCommit int

const (
	PreserveRows OnCommit = iota // the default
	DeleteRows
	Drop
)

// Table is one temporary table.
type Table struct {
	Name     string
	Columns  []sqltypes.Column
	OnCommit OnCommit
}

// Schema is the Arrow schema of the table's rows.
func (t *Table) Schema() *arrow.Schema { return sqltypes.Schema(t.Columns) }

// ColumnIndex returns the index of column name, or -1.
func (t *Table) ColumnIndex(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Set is a session's temporary tables. It is not safe for concurrent use
// (a session runs one statement at a time).
type Set struct {
	conn   Conn
	tables map[string]*Table

	// inBlock: a transaction block is open; undo is its log.
	inBlock bool
	undo    []undo
	// mark is the undo position of the block's newest savepoint (0: the
	// block's start); saved are the tables copied since it.
	mark  int
	saved map[string]bool
	// seq names hidden tables.
	seq int
	// gen counts the changes of which tables exist.
	gen uint64
}

type undoKind int

const (
	undoCreate undoKind = iota // drop the table
	undoDrop                   // rename hidden back to the table
	undoWrite                  // put hidden's rows back into the table
)

type undo struct {
	kind   undoKind
	table  *Table
	hidden string
}

// NewSet returns an empty Set over conn.
func NewSet(conn Conn) *Set { return &Set{conn: conn, tables: map[string]*Table{}} }

// Lookup returns the temporary table called name.
func (s *Set) Lookup(name string) (*Table, bool) {
	t, ok := s.tables[name]
	return t, ok
}

// Generation changes whenever a table is made or dropped (also by a
// rollback or ON COMMIT DROP).
func (s *Set) Generation() uint64 { return s.gen }

// Len is the number of temporary tables.
func (s *Set) Len() int { return len(s.tables) }

// Create makes the empty table t in the engine: its columns of exactly
// the engine types mink's tables read as (those of sqltypes' Arrow
// types), NOT NULL where a column says so, defaults (DEFAULT expressions
// in the engine's SQL, by column, "" for none) and the primary key (column
// names; none if empty), which the engine enforces.
func (s *Set) Create(ctx context.Context, t *Table, defaults []string, primaryKey []string) error {
	if _, ok := s.tables[t.Name]; ok {
		return fmt.Errorf("temporary table %q exists", t.Name)
	}
	types, err := s.engineTypes(ctx, t.Schema())
	if err != nil {
		return err
	}
	var q strings.Builder
	fmt.Fprintf(&q, "CREATE TEMPORARY TABLE %s (", quote(t.Name))
	for i, c := range t.Columns {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(quote(c.Name) + " " + types[i])
		if c.NotNull {
			q.WriteString(" NOT NULL")
		}
		if i < len(defaults) && defaults[i] != "" {
			q.WriteString(" DEFAULT " + defaults[i])
		}
	}
	if len(primaryKey) > 0 {
		keys := make([]string, len(primaryKey))
		for i, k := range primaryKey {
			keys[i] = quote(k)
		}
		q.WriteString(", PRIMARY KEY (" + strings.Join(keys, ", ") + ")")
	}
	q.WriteString(")")
	if err := s.conn.Exec(ctx, q.String()); err != nil {
		return err
	}
	s.tables[t.Name] = t
	s.gen++
	if s.inBlock {
		s.undo = append(s.undo, undo{kind: undoCreate, table: t})
	}
	return nil
}

// engineTypes are the engine's names of the types of schema's fields, as
// the engine reads batches of that schema.
func (s *Set) engineTypes(ctx context.Context, schema *arrow.Schema) ([]string, error) {
	src := s.hiddenName("source")
	release, err := s.conn.RegisterRecords(ctx, src, schema, nil)
	if err != nil {
		return nil, err
	}
	defer release()
	rdr, err := s.conn.QueryArrow(ctx, "SELECT column_type FROM (DESCRIBE SELECT * FROM "+quote(src)+")")
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var types []string
	for rdr.Next() {
		col, ok := rdr.RecordBatch().Column(0).(*array.String)
		if !ok {
			return nil, fmt.Errorf("describe: column_type is %s", rdr.RecordBatch().Column(0).DataType())
		}
		for i := range col.Len() {
			types = append(types, strings.Clone(col.Value(i))) // the batch is released
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	if len(types) != schema.NumFields() {
		return nil, fmt.Errorf("describe: %d column types for %d columns", len(types), schema.NumFields())
	}
	return types, nil
}

// Drop drops the temporary table called name (it must exist).
func (s *Set) Drop(ctx context.Context, name string) error {
	t := s.tables[name]
	if !s.inBlock {
		if err := s.conn.Exec(ctx, "DROP TABLE "+quote(name)); err != nil {
			return err
		}
		delete(s.tables, name)
		s.gen++
		return nil
	}
	hidden := s.hiddenName("dropped")
	if err := s.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s RENAME TO %s", quote(name), quote(hidden))); err != nil {
		return err
	}
	delete(s.tables, name)
	s.gen++
	delete(s.saved, name)
	s.undo = append(s.undo, undo{kind: undoDrop, table: t, hidden: hidden})
	return nil
}

// BeforeWrite is called before a statement writes to the table called
// name: in a block, the first write since the block or its newest
// savepoint began copies the table's rows, unless the table was created
// since.
func (s *Set) BeforeWrite(ctx context.Context, name string) error {
	t := s.tables[name]
	if !s.inBlock || t == nil || s.saved[name] {
		return nil
	}
	for _, u := range s.undo[s.mark:] {
		if u.kind == undoCreate && u.table == t {
			return nil
		}
	}
	hidden := s.hiddenName("saved")
	if err := s.conn.Exec(ctx, fmt.Sprintf("CREATE TEMPORARY TABLE %s AS SELECT * FROM %s", quote(hidden), quote(name))); err != nil {
		return fmt.Errorf("keep the rows of temporary table %q for a rollback: %w", name, err)
	}
	if s.saved == nil {
		s.saved = map[string]bool{}
	}
	s.saved[name] = true
	s.undo = append(s.undo, undo{kind: undoWrite, table: t, hidden: hidden})
	return nil
}

// Begin starts a transaction block.
func (s *Set) Begin() {
	s.inBlock, s.undo, s.mark, s.saved = true, nil, 0, nil
}

// Savepoint returns the undo position SAVEPOINT keeps.
func (s *Set) Savepoint() int {
	s.mark, s.saved = len(s.undo), nil
	return s.mark
}

// RollbackTo undoes what the block did since the savepoint at position
// pos (ROLLBACK TO).
func (s *Set) RollbackTo(ctx context.Context, pos int) error {
	err := s.undoTo(ctx, pos)
	s.mark, s.saved = pos, nil
	return err
}

// Commit ends the block, keeping what it did, and applies ON COMMIT.
// Outside a block (autocommit) it only applies ON COMMIT: the caller
// calls it after each statement that wrote.
func (s *Set) Commit(ctx context.Context) error {
	var errs []error
	for _, u := range s.undo {
		if u.kind != undoCreate {
			if err := s.conn.Exec(ctx, "DROP TABLE IF EXISTS "+quote(u.hidden)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.inBlock, s.undo, s.mark, s.saved = false, nil, 0, nil
	if err := s.onCommit(ctx); err != nil {
		errs = append(errs, err)
	}
	return join(errs)
}

// Rollback undoes what the block did and ends it (ROLLBACK); ON COMMIT
// DELETE ROWS empties its tables as at a commit.
func (s *Set) Rollback(ctx context.Context) error {
	err := s.undoTo(ctx, 0)
	s.inBlock, s.undo, s.mark, s.saved = false, nil, 0, nil
	if cerr := s.onCommit(ctx); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// DropAll drops every temporary table (DISCARD TEMP, DISCARD ALL; outside
// a block).
func (s *Set) DropAll(ctx context.Context) error {
	var errs []error
	for name := range s.tables {
		if err := s.conn.Exec(ctx, "DROP TABLE IF EXISTS "+quote(name)); err != nil {
			errs = append(errs, err)
		}
		delete(s.tables, name)
		s.gen++
	}
	return join(errs)
}

func (s *Set) undoTo(ctx context.Context, pos int) error {
	var errs []error
	for i := len(s.undo) - 1; i >= pos; i-- {
		u := s.undo[i]
		var err error
		switch u.kind {
		case undoCreate:
			err = s.conn.Exec(ctx, "DROP TABLE IF EXISTS "+quote(u.table.Name))
			delete(s.tables, u.table.Name)
			s.gen++
		case undoDrop:
			err = s.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s RENAME TO %s", quote(u.hidden), quote(u.table.Name)))
			s.tables[u.table.Name] = u.table
			s.gen++
		case undoWrite:
			err = s.conn.Exec(ctx, fmt.Sprintf("DELETE FROM %[1]s; INSERT INTO %[1]s SELECT * FROM %[2]s; DROP TABLE %[2]s", quote(u.table.Name), quote(u.hidden)))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("roll back temporary table %q: %w", u.table.Name, err))
		}
	}
	s.undo = s.undo[:min(pos, len(s.undo))]
	return join(errs)
}

func (s *Set) onCommit(ctx context.Context) error {
	var errs []error
	for name, t := range s.tables {
		var err error
		switch t.OnCommit {
		case DeleteRows:
			err = s.conn.Exec(ctx, "DELETE FROM "+quote(name))
		case Drop:
			err = s.conn.Exec(ctx, "DROP TABLE IF EXISTS "+quote(name))
			delete(s.tables, name)
			s.gen++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return join(errs)
}

// hiddenName is a name no client table has.
func (s *Set) hiddenName(what string) string {
	s.seq++
	return fmt.Sprintf("__mink_temp_%s_%d", what, s.seq)
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func join(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more errors)", errs[0], len(errs)-1)
}
