package pgwire

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// benchHandler answers "copy b from stdin binary" and pgx's describe of
// table b (8 columns) and discards the rows: the cost of the wire layer alone.
type benchHandler struct{}

var benchColumns = []Column{
	NewColumn("a", pgtype.Int8OID), NewColumn("b", pgtype.Int8OID), NewColumn("c", pgtype.Float8OID),
	NewColumn("d", pgtype.TextOID), NewColumn("e", pgtype.TimestamptzOID), NewColumn("f", pgtype.Int4OID),
	NewColumn("g", pgtype.BoolOID), NewColumn("h", pgtype.TextOID),
}

type benchSession struct{}
type benchStmt struct{ copy, lookup bool }
type discardSink struct{ rows int64 }

func (benchHandler) NewSession(context.Context, SessionInfo) (Session, error) {
	return benchSession{}, nil
}
func (benchSession) Split(_ context.Context, q string) ([]Statement, error) {
	return []Statement{{SQL: q}}, nil
}
func (benchSession) Prepare(_ context.Context, sql string, _ []uint32) (PreparedStatement, error) {
	if len(sql) >= 4 && sql[:4] == "copy" {
		return benchStmt{copy: true}, nil
	}
	if len(sql) >= 6 && sql[:6] == "lookup" {
		return benchStmt{lookup: true}, nil
	}
	return benchStmt{}, nil
}
func (benchSession) Sync(context.Context, bool) error { return nil }
func (benchSession) TxStatus() TxStatus               { return TxIdle }
func (benchSession) Close()                           {}
func (s benchStmt) ParamOIDs() []uint32 {
	if s.lookup {
		return []uint32{pgtype.Int4OID}
	}
	return nil
}
func (s benchStmt) Columns() []Column {
	if s.copy {
		return nil
	}
	if s.lookup {
		return lookupColumns
	}
	return benchColumns
}

// lookupColumns are the columns of pgbench's point lookup in bench/pk.go.
var lookupColumns = []Column{NewColumn("id", pgtype.Int4OID), NewColumn("v", pgtype.TextOID), NewColumn("n", pgtype.Int8OID)}

func (s benchStmt) Execute(_ context.Context, params []any) (Result, error) {
	if s.lookup {
		return Result{Rows: RowsFromSlice(lookupColumns, [][]any{{params[0], "value-42", int64(294)}})}, nil
	}
	if s.copy {
		return Result{CopyIn: &CopyIn{Table: "b", Columns: benchColumns, Options: CopyOptions{Format: CopyBinary}, Sink: &discardSink{}}}, nil
	}
	return Result{Rows: RowsFromSlice(benchColumns, nil)}, nil
}
func (benchStmt) Close() {}
func (s *discardSink) WriteRows(_ context.Context, b *CopyBatch) error {
	s.rows += int64(len(b.Rows))
	return nil
}
func (s *discardSink) Commit(context.Context, int64) error { return nil }
func (s *discardSink) Abort(context.Context, error)        {}

// BenchmarkCopyFromBinary measures pgx CopyFrom of narrow 8-column rows
// through the wire layer into a sink that discards them.
func BenchmarkCopyFromBinary(b *testing.B) {
	ts := startServer(b, Config{Handler: benchHandler{}})
	conn := ts.pgx(b, "")
	ctx := context.Background()
	const batch = 100000
	now := time.Now()
	rows := make([][]any, batch)
	for i := range rows {
		rows[i] = []any{int64(i), int64(i * 7), float64(i) / 3, "customer-name", now, int32(i), i%2 == 0, "some text"}
	}
	b.ResetTimer()
	for range b.N {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{"b"}, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, pgx.CopyFromRows(rows))
		if err != nil || n != batch {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPreparedPointQuery measures round trips of a prepared statement
// with one parameter that returns one short row (Bind, Execute, Sync; the
// shape of pgbench -M prepared point lookups) through the wire layer alone.
func BenchmarkPreparedPointQuery(b *testing.B) {
	ts := startServer(b, Config{Handler: benchHandler{}})
	conn := ts.pgx(b, "")
	ctx := context.Background()
	if _, err := conn.Prepare(ctx, "q", "lookup"); err != nil {
		b.Fatal(err)
	}
	var id int32
	var v string
	var n int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := conn.QueryRow(ctx, "q", int32(i)).Scan(&id, &v, &n); err != nil || id != int32(i) {
			b.Fatal(id, err)
		}
	}
}
