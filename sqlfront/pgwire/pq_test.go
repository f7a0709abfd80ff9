package pgwire

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
)

func openPQ(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestLibPQ drives the server with lib/pq, which uses text formats
// throughout.
func TestLibPQ(t *testing.T) {
	ts := startServer(t, Config{})
	db := openPQ(t, ts.url("", ""))
	ctx := testCtx(t)

	var (
		id     int64
		name   sql.NullString
		ok     sql.NullBool
		score  sql.NullFloat64
		tstamp sql.NullTime
		amount sql.NullString
		data   []byte
		day    sql.NullTime
		uid    sql.NullString
		doc    sql.NullString
	)
	rows, err := db.QueryContext(ctx, "select * from t")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for rows.Next() {
		n++
		if err := rows.Scan(&id, &name, &ok, &score, &tstamp, &amount, &data, &day, &uid, &doc); err != nil {
			t.Fatal(err)
		}
		if n == 1 && (id != 1 || name.String != "alpha" || !ok.Bool || score.Float64 != 1.5 ||
			!tstamp.Time.Equal(time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC)) || amount.String != "123.45" ||
			string(data) != "\xde\xad\xbe\xef" || day.Time.Format(time.DateOnly) != "2024-01-02" ||
			uid.String != "12345678-9abc-def0-1234-56789abcdef0" || doc.String != `{"a": 1}`) {
			t.Errorf("row 1: %v %v %v %v %v %v %x %v %v %v", id, name, ok, score, tstamp, amount, data, day, uid, doc)
		}
		if n == 3 && (name.Valid || ok.Valid || tstamp.Valid || data != nil) {
			t.Errorf("row 3 should be NULLs")
		}
	}
	if err := rows.Err(); err != nil || n != 3 {
		t.Fatalf("%d rows, %v", n, err)
	}

	// Parameters go through the unnamed statement as text.
	var a int64
	var b string
	if err := db.QueryRowContext(ctx, "select $1::int8, $2::text", 42, "hé").Scan(&a, &b); err != nil || a != 42 || b != "hé" {
		t.Fatalf("params: %d %q %v", a, b, err)
	}
	stmt, err := db.PrepareContext(ctx, "select $1::int8, $2::text")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := stmt.QueryRowContext(ctx, i, "x").Scan(&a, &b); err != nil || a != int64(i) {
			t.Fatalf("prepared %d: %v", i, err)
		}
	}
	stmt.Close()

	// Errors carry the SQLSTATE.
	_, err = db.ExecContext(ctx, "select * from missing")
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "42P01" || pqErr.Message != `relation "missing" does not exist` {
		t.Fatalf("error: %#v", err)
	}

	// COPY FROM STDIN prepared inside a transaction: lib/pq's COPY support.
	txn, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := txn.PrepareContext(ctx, `COPY "c" ("id", "name", "score") FROM STDIN`)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"plain", "tab\there", "back\\slash", "line\nbreak", ""} {
		if _, err := cp.ExecContext(ctx, i, v, float64(i)/2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.ExecContext(ctx, 5, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	got := ts.h.committed()
	if len(got) != 6 || got[1][1] != "tab\there" || got[2][1] != `back\slash` || got[3][1] != "line\nbreak" ||
		got[4][1] != "" || got[5][1] != nil || got[5][2] != nil || got[3][2] != 1.5 {
		t.Fatalf("copied rows %q", got)
	}

	// A COPY whose data fails stores nothing; lib/pq reports the error.
	txn, _ = db.BeginTx(ctx, nil)
	cp, err = txn.PrepareContext(ctx, `COPY "c" ("id", "name") FROM STDIN`)
	if err != nil {
		t.Fatal(err)
	}
	cp.ExecContext(ctx, 10, "a")
	cp.ExecContext(ctx, "not-a-number", "b")
	_, err = cp.ExecContext(ctx)
	if err == nil {
		err = cp.Close()
	}
	if !errors.As(err, &pqErr) || pqErr.Code != CodeInvalidTextRepresentation || !strings.Contains(pqErr.Where, "COPY c, line 2, column id") {
		t.Fatalf("bad COPY: %#v", err)
	}
	txn.Rollback()
	if len(ts.h.committed()) != 6 {
		t.Fatalf("failed COPY stored rows")
	}
}
