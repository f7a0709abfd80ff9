package temptable

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/sqltypes"
)

// fakeConn records the statements a Set runs; fail makes the statements
// containing it fail.
type fakeConn struct {
	ran  []string
	fail string
}

func (c *fakeConn) Exec(_ context.Context, q string, _ ...any) error {
	c.ran = append(c.ran, q)
	if c.fail != "" && strings.Contains(q, c.fail) {
		return errors.New("injected")
	}
	return nil
}

func (c *fakeConn) QueryArrow(_ context.Context, q string, _ ...any) (array.RecordReader, error) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append("INTEGER")
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "column_type", Type: arrow.BinaryTypes.String}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1)
	defer rec.Release()
	return array.NewRecordReader(schema, []arrow.RecordBatch{rec})
}

func (c *fakeConn) RegisterRecords(context.Context, string, *arrow.Schema, []arrow.RecordBatch) (func(), error) {
	return func() {}, nil
}

// since returns the statements run since the last call.
func (c *fakeConn) since() []string {
	out := c.ran
	c.ran = nil
	return out
}

func table(name string, onCommit OnCommit) *Table {
	return &Table{Name: name, Columns: []sqltypes.Column{{Name: "x", Type: sqltypes.Of(sqltypes.Int4)}}, OnCommit: onCommit}
}

func count(stmts []string, prefix string) int {
	n := 0
	for _, q := range stmts {
		if strings.HasPrefix(q, prefix) {
			n++
		}
	}
	return n
}

// TestUndoLog: a block copies a table once before its first write (once
// more after a savepoint), never one it created, and a rollback puts back
// rows, drops what it created and renames back what it dropped.
func TestUndoLog(t *testing.T) {
	ctx := context.Background()
	c := &fakeConn{}
	s := NewSet(c)
	if err := s.Create(ctx, table("old", PreserveRows), nil, nil); err != nil {
		t.Fatal(err)
	}
	c.since()
	s.Begin()
	for range 2 {
		if err := s.BeforeWrite(ctx, "old"); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(c.since(), "CREATE TEMPORARY TABLE \"__mink_temp_saved_"); got != 1 {
		t.Fatalf("%d copies before two writes in a block, want 1", got)
	}
	if err := s.Create(ctx, table("fresh", PreserveRows), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.BeforeWrite(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if got := count(c.since(), "CREATE TEMPORARY TABLE \"__mink_temp_saved_"); got != 0 {
		t.Fatalf("a table the block created was copied (%d)", got)
	}
	sp := s.Savepoint()
	if err := s.BeforeWrite(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if err := s.BeforeWrite(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if got := count(c.since(), "CREATE TEMPORARY TABLE \"__mink_temp_saved_"); got != 2 {
		t.Fatalf("%d copies after a savepoint, want 2 (both tables existed when it began)", got)
	}
	if err := s.Drop(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup("old"); ok {
		t.Fatal("a dropped table is still there")
	}
	if err := s.RollbackTo(ctx, sp); err != nil {
		t.Fatal(err)
	}
	undone := c.since()
	if _, ok := s.Lookup("old"); !ok || count(undone, "ALTER TABLE \"__mink_temp_dropped_") != 1 || count(undone, "DELETE FROM") != 2 {
		t.Fatalf("ROLLBACK TO ran %q; want the drop renamed back and both tables' rows put back", undone)
	}
	if err := s.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	undone = c.since()
	if _, ok := s.Lookup("fresh"); ok || count(undone, "DROP TABLE IF EXISTS \"fresh\"") != 1 || count(undone, "DELETE FROM \"old\"") != 1 {
		t.Fatalf("ROLLBACK ran %q; want fresh dropped and old's rows put back", undone)
	}
	if _, ok := s.Lookup("old"); !ok {
		t.Fatal("ROLLBACK lost a table made before the block")
	}
}

// TestCommitAndOnCommit: COMMIT drops the hidden copies; ON COMMIT DELETE
// ROWS and DROP act at every commit, also outside a block.
func TestCommitAndOnCommit(t *testing.T) {
	ctx := context.Background()
	c := &fakeConn{}
	s := NewSet(c)
	for _, tb := range []*Table{table("keep", PreserveRows), table("rows", DeleteRows), table("gone", Drop)} {
		if err := s.Create(ctx, tb, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.since()
	s.Begin()
	if err := s.BeforeWrite(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ran := c.since()
	if count(ran, "DROP TABLE IF EXISTS \"__mink_temp_saved_") != 1 || count(ran, "DELETE FROM \"rows\"") != 1 || count(ran, "DROP TABLE IF EXISTS \"gone\"") != 1 {
		t.Fatalf("COMMIT ran %q", ran)
	}
	if _, ok := s.Lookup("gone"); ok {
		t.Fatal("an ON COMMIT DROP table outlived the commit")
	}
	if s.Len() != 2 {
		t.Fatalf("%d tables after COMMIT, want 2", s.Len())
	}
}

// TestCreateFailsCleanly: a table the engine refuses is not recorded.
func TestCreateFailsCleanly(t *testing.T) {
	c := &fakeConn{fail: "CREATE TEMPORARY TABLE \"bad\""}
	s := NewSet(c)
	gen := s.Generation()
	if err := s.Create(context.Background(), table("bad", PreserveRows), nil, nil); err == nil {
		t.Fatal("Create succeeded although the engine refused the table")
	}
	if _, ok := s.Lookup("bad"); ok || s.Generation() != gen {
		t.Fatal("a table the engine refused was recorded")
	}
}
