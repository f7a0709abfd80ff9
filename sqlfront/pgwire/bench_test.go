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
type benchStmt struct{ copy bool }
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
	return benchStmt{}, nil
}
func (benchSession) Sync(context.Context, bool) error { return nil }
func (benchSession) TxStatus() TxStatus               { return TxIdle }
func (benchSession) Close()                           {}
func (benchStmt) ParamOIDs() []uint32                 { return nil }
func (s benchStmt) Columns() []Column {
	if s.copy {
		return nil
	}
	return benchColumns
}
func (s benchStmt) Execute(context.Context, []any) (Result, error) {
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
