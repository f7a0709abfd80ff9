package sqlfront_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// A SET of a reported setting sends ParameterStatus, as in PostgreSQL: the
// client's copy of the parameter follows, through the simple and the
// extended protocol, and RESET brings it back.
func TestSetSendsParameterStatus(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pg := conn.PgConn()
	check := func(step, name, want string) {
		t.Helper()
		if got := pg.ParameterStatus(name); got != want {
			t.Errorf("after %s: ParameterStatus(%s) = %q, want %q", step, name, got, want)
		}
	}
	check("startup", "TimeZone", "UTC")
	if _, err := pg.Exec(ctx, "SET application_name = 'reporter'").ReadAll(); err != nil {
		t.Fatal(err)
	}
	check("SET application_name (simple)", "application_name", "reporter")
	if _, err := conn.Exec(ctx, "SET TimeZone = 'Europe/Paris'", pgx.QueryExecModeExec); err != nil {
		t.Fatal(err)
	}
	check("SET TimeZone (extended)", "TimeZone", "Europe/Paris")
	if _, err := pg.Exec(ctx, "SET application_name = 'two'; SELECT 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	check("SET in a multi-statement query", "application_name", "two")
	if _, err := pg.Exec(ctx, "RESET TimeZone").ReadAll(); err != nil {
		t.Fatal(err)
	}
	check("RESET TimeZone", "TimeZone", "UTC")
}

// SELECT set_config(…) answers one row with the command tag "SELECT 1",
// as PostgreSQL does, through the simple and the extended protocol (the
// tag was "SELECT 1 1", which psql cannot interpret).
func TestSetConfigCommandTag(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.PgConn().Exec(ctx, "SELECT set_config('app.user_id', '42', false)").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].CommandTag.String() != "SELECT 1" || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "42" {
		t.Fatalf("simple protocol: %d results, first tag %q rows %q", len(res), res[0].CommandTag.String(), res[0].Rows)
	}
	r := conn.PgConn().ExecParams(ctx, "SELECT set_config('app.user_id', '43', false)", nil, nil, nil, nil).Read()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.CommandTag.String() != "SELECT 1" || len(r.Rows) != 1 || string(r.Rows[0][0]) != "43" {
		t.Fatalf("extended protocol: tag %q rows %q", r.CommandTag.String(), r.Rows)
	}
	var got string
	if err := conn.QueryRow(ctx, "SELECT current_setting('app.user_id')").Scan(&got); err != nil || got != "43" {
		t.Fatalf("current_setting = %q, %v; want 43", got, err)
	}
}
