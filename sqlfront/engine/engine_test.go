package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"
	"go.uber.org/goleak"

	"github.com/minkdb/mink/internal/sqltypes"
)

func TestMain(m *testing.M) {
	if !arrowEnabled {
		fmt.Fprintln(os.Stderr, "sqlfront/engine tests need -tags duckdb_arrow (the Makefile sets it)")
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Statement interrupters must be gone once their results are.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func openDB(t testing.TB, opts Options) *DB {
	t.Helper()
	if opts.Threads == 0 {
		opts.Threads = 2
	}
	db, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openConn(t testing.TB, db *DB) *Conn {
	t.Helper()
	c, err := db.Conn(context.Background(), ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fromJSON builds a batch of schema from JSON rows.
func fromJSON(t testing.TB, schema *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	t.Cleanup(rec.Release)
	return rec
}

func register(t testing.TB, c *Conn, name string, recs ...arrow.RecordBatch) {
	t.Helper()
	rel, err := c.RegisterRecords(context.Background(), name, recs[0].Schema(), recs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel)
}

// query runs sql and returns its rows as strings, one per row, values
// separated by "|", NULL as "NULL".
func query(t testing.TB, c *Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]string, len(rows.Values()))
		for i, v := range rows.Values() {
			vals[i] = text(v)
		}
		out = append(out, strings.Join(vals, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// text prints a value the way the tests expect it: NULL, numerics with
// their scale.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case pgtype.Numeric:
		s := v.Int.String()
		if v.Exp >= 0 {
			return s + strings.Repeat("0", int(v.Exp))
		}
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		scale := int(-v.Exp)
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
		if neg {
			s = "-" + s
		}
		return s
	}
	return fmt.Sprint(v)
}

func expectRows(t testing.TB, c *Conn, sql string, want ...string) {
	t.Helper()
	got := query(t, c, sql)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", sql, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// sqlState returns the SQLSTATE of err, "" if it is not an *Error.
func sqlState(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// readAll runs sql with QueryArrow and returns the batches.
func readAll(t testing.TB, c *Conn, sql string) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	rdr, err := c.QueryArrow(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rdr.Release()
	var recs []arrow.RecordBatch
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
		t.Cleanup(rec.Release)
	}
	if err := rdr.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return rdr.Schema(), recs
}

func mustType(t testing.TB, s string) sqltypes.Type {
	t.Helper()
	typ, err := sqltypes.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// A native table holds exactly the appends that succeeded, with the
// progress the caller recorded for them, and every Conn reads it.
func TestNativeTable(t *testing.T) {
	db := openDB(t, Options{})
	c := openConn(t, db)
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	batch := func(from, n int64) arrow.RecordBatch {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		for i := from; i < from+n; i++ {
			b.Append(i)
		}
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(schema, []arrow.Array{col}, n)
	}
	nt, err := db.NativeTable(ctx, "t1", schema)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int64 {
		t.Helper()
		rows, err := c.Query(ctx, "SELECT count(*), coalesce(sum(id), 0) FROM "+nt.Name())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		rows.Next()
		return rows.Values()[0].(int64)
	}
	injected := errors.New("injected")
	err = nt.Update(ctx, func(progress map[uint64]uint64, appendRows func([]arrow.RecordBatch) error) error {
		b := batch(0, 10)
		defer b.Release()
		if err := appendRows([]arrow.RecordBatch{b}); err != nil {
			return err
		}
		progress[7] = 10
		return injected // fails after the first append
	})
	if !errors.Is(err, injected) {
		t.Fatalf("Update: %v", err)
	}
	if got := nt.Progress()[7]; got != 10 {
		t.Fatalf("progress %d, want 10", got)
	}
	if n := count(); n != 10 {
		t.Fatalf("%d rows, want 10", n)
	}
	if again, err := db.NativeTable(ctx, "t1", schema); err != nil || again != nt {
		t.Fatalf("NativeTable again: %v %v", again, err)
	}
	if err := nt.Disable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nt.Update(ctx, func(map[uint64]uint64, func([]arrow.RecordBatch) error) error { return nil }); !errors.Is(err, ErrNativeDisabled) {
		t.Fatalf("Update of a disabled table: %v", err)
	}
	if err := db.DropNativeTables(ctx, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if len(db.NativeTableKeys()) != 0 {
		t.Fatalf("keys after drop: %v", db.NativeTableKeys())
	}
	db.SetNativeTables(false)
	if _, err := db.NativeTable(ctx, "t2", schema); !errors.Is(err, ErrNativeDisabled) {
		t.Fatalf("NativeTable while off: %v", err)
	}
}
