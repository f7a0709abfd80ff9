package sqlfront_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/sqlfront"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

func arrowSession(t *testing.T) *sqlfront.ArrowSession {
	t.Helper()
	n := minktest.Start(t, minktest.Options{})
	f := n.Server.SQLFrontend().(*sqlfront.Frontend)
	a, err := f.NewArrowSession(context.Background(), f.BootstrapIdentity())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// run prepares and executes sql and returns its result as a table of
// strings (array.Array's ValueStr) with its schema.
func run(t *testing.T, a *sqlfront.ArrowSession, sql string, params ...any) (*arrow.Schema, [][]string, sqlfront.ArrowResult) {
	t.Helper()
	ctx := context.Background()
	p, err := a.Prepare(ctx, sql, nil)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer p.Close()
	res, err := p.Execute(ctx, params)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if res.Rows == nil {
		return nil, nil, res
	}
	defer res.Rows.Release()
	var rows [][]string
	for res.Rows.Next() {
		rec := res.Rows.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			var row []string
			for c := 0; c < int(rec.NumCols()); c++ {
				row = append(row, strings.Clone(rec.Column(c).ValueStr(r))) // the batch's memory goes with it
			}
			rows = append(rows, row)
		}
	}
	if err := res.Rows.Err(); err != nil {
		t.Fatalf("%s: read: %v", sql, err)
	}
	if p.Schema() == nil || !p.Schema().Equal(res.Rows.Schema()) {
		t.Fatalf("%s: prepared schema %v, result schema %v", sql, p.Schema(), res.Rows.Schema())
	}
	return res.Rows.Schema(), rows, res
}

func TestArrowSessionQuery(t *testing.T) {
	a := arrowSession(t)
	run(t, a, "CREATE TABLE e (id bigint NOT NULL, v double precision, s text) WITH (buckets = 2, bucket_key = 'id')")
	_, _, res := run(t, a, "INSERT INTO e VALUES (1, 1.5, 'one'), (2, NULL, 'two'), (3, 3.5, 'three')")
	if res.RowsAffected() != 3 {
		t.Fatalf("insert: tag %q, rows affected %d", res.Tag, res.RowsAffected())
	}
	schema, rows, _ := run(t, a, "SELECT id, v, s, id * 2 FROM e ORDER BY id")
	want := [][]string{{"1", "1.5", "one", "2"}, {"2", "(null)", "two", "4"}, {"3", "3.5", "three", "6"}}
	if len(rows) != len(want) {
		t.Fatalf("rows %v, want %v", rows, want)
	}
	for i := range want {
		for j := range want[i] {
			if rows[i][j] != want[i][j] {
				t.Fatalf("rows %v, want %v", rows, want)
			}
		}
	}
	names := []string{"id", "v", "s", "?column?"}
	types := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64}
	for i, f := range schema.Fields() {
		if f.Name != names[i] || !arrow.TypeEqual(f.Type, types[i]) {
			t.Fatalf("field %d: %s %s, want %s %s", i, f.Name, f.Type, names[i], types[i])
		}
	}

	// Parameters, typed by the batch the client sends.
	ctx := context.Background()
	ptypes := arrow.NewSchema([]arrow.Field{{Name: "$1", Type: arrow.PrimitiveTypes.Int64}}, nil)
	p, err := a.Prepare(ctx, "SELECT s FROM e WHERE id = $1", sqlfront.ArrowParamTypes(ptypes))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, ptypes)
	b.Field(0).(*array.Int64Builder).Append(2)
	prec := b.NewRecordBatch()
	b.Release()
	defer prec.Release()
	r, err := p.Execute(ctx, sqlfront.ArrowParams(prec, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Rows.Next() || r.Rows.RecordBatch().NumRows() != 1 || r.Rows.RecordBatch().Column(0).ValueStr(0) != "two" {
		t.Fatalf("parameter query: %v", r.Rows.Err())
	}
	r.Rows.Release()
	p.Close()

	// A statement whose rows are materialised: SHOW.
	schema, rows, _ = run(t, a, "SHOW TimeZone")
	if len(rows) != 1 || rows[0][0] != "UTC" || schema.Field(0).Name != "TimeZone" {
		t.Fatalf("SHOW: %v %v", schema, rows)
	}
}

func TestArrowSessionErrors(t *testing.T) {
	a := arrowSession(t)
	ctx := context.Background()
	_, err := a.Prepare(ctx, "SELECT * FROM nosuch", nil)
	var we *pgwire.Error
	if !errors.As(err, &we) || we.Code != pgwire.CodeUndefinedTable {
		t.Fatalf("missing table: %v", err)
	}
	// An error part-way through the result: the cast fails on the
	// engine's rows as they are read.
	p, err := a.Prepare(ctx, "SELECT (CASE WHEN i < 9000000 THEN i::text ELSE 'x' END)::integer FROM range(10000000) t(i)", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Execute(ctx, nil)
	if err != nil {
		t.Fatalf("the statement failed before its first batch: %v", err)
	}
	defer res.Rows.Release()
	batches := 0
	for res.Rows.Next() {
		batches++
	}
	if err := res.Rows.Err(); !errors.As(err, &we) || we.Code != pgwire.CodeInvalidTextRepresentation {
		t.Fatalf("mid-stream error: %v", err)
	}
	if batches == 0 {
		t.Fatalf("no batch before the error")
	}
}
