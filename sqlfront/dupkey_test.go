package sqlfront_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDuplicateKeyDetail: a unique violation (23505) names the key in its
// detail as PostgreSQL 15 does: each value's text output (timestamptz in
// the session's time zone, char(n) padded), uncut, for a key already
// stored, a key twice in one statement, a composite key, and a key
// written twice by two transaction blocks' COMMITs. With -logic.pg the
// same steps run against PostgreSQL, which must give the same details.
func TestDuplicateKeyDetail(t *testing.T) {
	ctx := context.Background()
	conn := pgOrMink(t)
	for _, sql := range []string{
		"DROP TABLE IF EXISTS dk_ts", "DROP TABLE IF EXISTS dk_two", "DROP TABLE IF EXISTS dk_ch",
		"CREATE TABLE dk_ts (ts timestamptz PRIMARY KEY, v text)",
		"CREATE TABLE dk_two (a integer, b text, v text, PRIMARY KEY (a, b))",
		"CREATE TABLE dk_ch (c char(3) PRIMARY KEY)",
		"SET TimeZone = 'America/New_York'",
		"INSERT INTO dk_ts VALUES ('2024-01-02 03:04:05+00', 'a')",
		"INSERT INTO dk_two VALUES (1, 'x y', 'a')",
		"INSERT INTO dk_ch VALUES ('ab')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	long := "k" // grows into a key longer than a failing row's 64-byte cut
	for len(long) < 80 {
		long += "k"
	}
	cases := []struct {
		name, sql, detail string
		args              []any
	}{
		{name: "stored timestamptz in the session's zone", sql: "INSERT INTO dk_ts VALUES ('2024-01-01 22:04:05-05', 'b')",
			detail: "Key (ts)=(2024-01-01 22:04:05-05) already exists."},
		{name: "twice in one statement", sql: "INSERT INTO dk_ts VALUES ('2024-07-01 00:00:00+00', 'b'), ('2024-07-01 00:00:00+00', 'c')",
			detail: "Key (ts)=(2024-06-30 20:00:00-04) already exists."},
		{name: "composite key", sql: "INSERT INTO dk_two VALUES ($1, $2, 'b')", args: []any{1, "x y"},
			detail: "Key (a, b)=(1, x y) already exists."},
		{name: "long key uncut", sql: "INSERT INTO dk_two VALUES (2, $1, 'b'), (2, $1, 'c')", args: []any{long},
			detail: "Key (a, b)=(2, " + long + ") already exists."},
		{name: "char(n) padded", sql: "INSERT INTO dk_ch VALUES ('ab ')",
			detail: "Key (c)=(ab ) already exists."},
	}
	for _, tc := range cases {
		_, err := conn.Exec(ctx, tc.sql, tc.args...)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" {
			t.Errorf("%s: %s: got %v, want 23505", tc.name, tc.sql, err)
			continue
		}
		if pe.Detail != tc.detail {
			t.Errorf("%s: %s: detail\n got %q\nwant %q", tc.name, tc.sql, pe.Detail, tc.detail)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM dk_ts").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in dk_ts: %d %v, want 1", n, err)
	}
}
