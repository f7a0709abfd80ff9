package sqlfront_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// Array columns through pgx: its extended protocol sends []string and
// []int64 arguments as binary text[] and int8[] and reads array results in
// binary; the values must come back exactly, with NULL elements and the
// characters array text quotes.
func TestArrayParamsPgx(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id int, tags text[], ids bigint[], ts timestamptz[], n numeric(10,2)[])"); err != nil {
		t.Fatal(err)
	}
	tags := []string{"a", "b c", "", `q"x`, `back\slash`, "NULL", "{br},"}
	ids := []int64{1, -9223372036854775808, 9223372036854775807}
	ts := []time.Time{time.Date(2024, 2, 29, 10, 11, 12, 123456000, time.UTC)}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1, $2, $3, $4, $5)", 1, tags, ids, ts, []float64{1.25, -3}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t (id, tags, ids) VALUES ($1, $2, $3)", 2, []*string{nil, ptr("x")}, []int64{}); err != nil {
		t.Fatal(err)
	}
	var gotTags []string
	var gotIDs []int64
	var gotTS []time.Time
	var gotN []float64
	if err := conn.QueryRow(ctx, "SELECT tags, ids, ts, n FROM t WHERE id = 1").Scan(&gotTags, &gotIDs, &gotTS, &gotN); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotTags, tags) || !reflect.DeepEqual(gotIDs, ids) || len(gotTS) != 1 || !gotTS[0].Equal(ts[0]) || !reflect.DeepEqual(gotN, []float64{1.25, -3}) {
		t.Errorf("row 1 = %q %v %v %v", gotTags, gotIDs, gotTS, gotN)
	}
	var nullable []*string
	if err := conn.QueryRow(ctx, "SELECT tags, ids FROM t WHERE id = 2").Scan(&nullable, &gotIDs); err != nil {
		t.Fatal(err)
	}
	if len(nullable) != 2 || nullable[0] != nil || *nullable[1] != "x" || len(gotIDs) != 0 {
		t.Errorf("row 2 = %v %v", nullable, gotIDs)
	}
	// An array parameter in a query: = ANY and @>.
	var id int32
	if err := conn.QueryRow(ctx, "SELECT id FROM t WHERE tags @> $1", []string{"b c", `q"x`}).Scan(&id); err != nil || id != 1 {
		t.Errorf("tags @> $1: %d %v", id, err)
	}
	if err := conn.QueryRow(ctx, "SELECT id FROM t WHERE 9223372036854775807 = ANY(ids)").Scan(&id); err != nil || id != 1 {
		t.Errorf("= ANY(ids): %d %v", id, err)
	}
	// id = ANY($1) with a Go slice, the common way to pass a set of keys.
	rows, err := conn.Query(ctx, "SELECT id FROM t WHERE id = ANY($1) ORDER BY id", []int32{2, 7})
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(got) != 1 || got[0] != 2 {
		t.Errorf("id = ANY($1): %v %v", got, err)
	}
	rows, err = conn.Query(ctx, "SELECT id FROM t WHERE tags && $1::text[] ORDER BY id", []string{"x", "a"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(got) != 2 {
		t.Errorf("tags && $1::text[]: %v %v", got, err)
	}
	// The same in an INSERT … SELECT's WHERE.
	if _, err := conn.Exec(ctx, "INSERT INTO t (id, tags) SELECT id + 100, tags FROM t WHERE id = ANY($1)", []int64{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t (id) VALUES (-1)"); err != nil {
		t.Fatal(err)
	}
	// Text format results print as PostgreSQL prints them.
	res := conn.PgConn().ExecParams(ctx, "SELECT tags FROM t WHERE id = 1", nil, nil, nil, []int16{0}).Read()
	if res.Err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != `{a,"b c","","q\"x","back\\slash","NULL","{br},"}` {
		t.Errorf("text tags = %q %v", res.Rows, res.Err)
	}
	// A multidimensional parameter is refused with 22P02, nothing stored.
	_, err = conn.Exec(ctx, "INSERT INTO t (id, ids) VALUES (3, $1)", [][]int64{{1, 2}, {3, 4}})
	if pe := asPgError(err); pe == nil || pe.Code != "22P02" {
		t.Errorf("2-D parameter: %v, want 22P02", err)
	}
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&count); err != nil || count != 4 {
		t.Errorf("count = %d %v, want 4", count, err)
	}
}

func ptr[T any](v T) *T { return &v }
