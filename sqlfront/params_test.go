package sqlfront_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// Parameters DuckDB cannot type get PostgreSQL's types: a parameter alone
// is text, one in arithmetic takes the other operand's type. pgx's
// extended protocol describes the statement first and encodes arguments
// by the described types, so a wrong type shows as an error or a wrong
// value.
func TestSelectParamTypes(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE p (i integer, b bigint, f double precision)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO p VALUES (1, 10, 0.5)"); err != nil {
		t.Fatal(err)
	}
	var i int32
	var s string
	if err := conn.QueryRow(ctx, "SELECT $1::int, $2", int32(5), "y").Scan(&i, &s); err != nil || i != 5 || s != "y" {
		t.Errorf("SELECT $1::int, $2: %d %q %v", i, s, err)
	}
	if err := conn.QueryRow(ctx, "SELECT $1 + 1", int32(1)).Scan(&i); err != nil || i != 2 {
		t.Errorf("SELECT $1 + 1: %d %v", i, err)
	}
	var b int64
	var f float64
	if err := conn.QueryRow(ctx, "SELECT b * $1, f + $2 FROM p", int64(3), 0.25).Scan(&b, &f); err != nil || b != 30 || f != 0.75 {
		t.Errorf("SELECT b * $1, f + $2: %d %v %v", b, f, err)
	}
	sd, err := conn.Prepare(ctx, "q", "SELECT $1 + 1, 2.5 * $2, $3")
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{23, 1700, 25}; len(sd.ParamOIDs) != 3 || sd.ParamOIDs[0] != want[0] || sd.ParamOIDs[1] != want[1] || sd.ParamOIDs[2] != want[2] {
		t.Errorf("parameter types %v, want %v", sd.ParamOIDs, want)
	}
}
