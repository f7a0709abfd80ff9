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
