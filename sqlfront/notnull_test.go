package sqlfront_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/internal/minktest"
)

// TestNotNullDetail: a NOT NULL violation (23502) names the failing row in
// its detail as PostgreSQL 15 does, for INSERT (VALUES, SELECT, defaults,
// parameters), UPDATE and COPY. With -logic.pg the same steps run against
// PostgreSQL, which must give the same errors.
func TestNotNullDetail(t *testing.T) {
	ctx := context.Background()
	conn := pgOrMink(t)
	for _, sql := range []string{
		"DROP TABLE IF EXISTS nd",
		"DROP TABLE IF EXISTS ndk",
		"CREATE TABLE nd (a integer NOT NULL, b text, ts timestamptz, ch char(3), long text)",
		"CREATE TABLE ndk (id integer PRIMARY KEY, a integer NOT NULL, b text)",
		"INSERT INTO ndk VALUES (1, 10, 'z')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	long := strings.Repeat("y", 70)
	cases := []struct {
		name, sql string
		args      []any
		copyData  string // when set, sql is a COPY FROM STDIN
		detail    string
		where     string // a prefix of the error's context
	}{
		{name: "values", sql: "INSERT INTO nd VALUES (NULL, 'x', '2024-01-02 03:04:05+00', 'ab', '" + long + "')",
			detail: "Failing row contains (null, x, 2024-01-02 03:04:05+00, ab , " + strings.Repeat("y", 64) + "...)."},
		{name: "defaults", sql: "INSERT INTO nd (b) VALUES ('y')",
			detail: "Failing row contains (null, y, null, null, null)."},
		{name: "second row", sql: "INSERT INTO nd (a, b) SELECT * FROM (VALUES (1, 'one'), (NULL, 'two')) v",
			detail: "Failing row contains (null, two, null, null, null)."},
		{name: "parameters", sql: "INSERT INTO nd (a, b, ts) VALUES ($1, $2, $3)", args: []any{nil, "p", "2024-06-01 12:00:00+00"},
			detail: "Failing row contains (null, p, 2024-06-01 12:00:00+00, null, null)."},
		{name: "key table", sql: "INSERT INTO ndk VALUES (2, NULL, 'q')",
			detail: "Failing row contains (2, null, q)."},
		{name: "update", sql: "UPDATE ndk SET a = NULL WHERE id = 1",
			detail: "Failing row contains (1, null, z)."},
		{name: "copy", sql: "COPY nd FROM STDIN", copyData: "1\tok\t\\N\t\\N\t\\N\n\\N\tc\t\\N\tabc\t\\N\n",
			detail: "Failing row contains (null, c, null, abc, null).", where: "COPY nd, line 2"},
		{name: "copy key table", sql: "COPY ndk (id, b) FROM STDIN", copyData: "3\tk\n",
			detail: "Failing row contains (3, null, k).", where: "COPY ndk, line 1"},
		{name: "time zone", sql: "SET TimeZone = 'America/New_York'"},
		{name: "timestamptz in the session's zone", sql: "INSERT INTO nd (b, ts) VALUES ('tz', '2024-01-02 03:04:05+00')",
			detail: "Failing row contains (null, tz, 2024-01-01 22:04:05-05, null, null)."},
		{name: "copy in the session's zone", sql: "COPY nd (b, ts) FROM STDIN", copyData: "tz\t2024-07-02 03:04:05+00\n",
			detail: "Failing row contains (null, tz, 2024-07-01 23:04:05-04, null, null).", where: "COPY nd, line 1"},
	}
	for _, tc := range cases {
		var err error
		if tc.copyData != "" {
			_, err = conn.PgConn().CopyFrom(ctx, strings.NewReader(tc.copyData), tc.sql)
		} else {
			_, err = conn.Exec(ctx, tc.sql, tc.args...)
		}
		if tc.detail == "" {
			if err != nil {
				t.Fatalf("%s: %v", tc.sql, err)
			}
			continue
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23502" {
			t.Errorf("%s: %s: got %v, want 23502", tc.name, tc.sql, err)
			continue
		}
		if pe.Detail != tc.detail {
			t.Errorf("%s: %s: detail\n got %q\nwant %q", tc.name, tc.sql, pe.Detail, tc.detail)
		}
		if !strings.HasPrefix(pe.Where, tc.where) {
			t.Errorf("%s: %s: context %q, want it to start with %q", tc.name, tc.sql, pe.Where, tc.where)
		}
	}
	// Nothing of a failed statement is stored.
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM nd").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows in nd: %d %v, want 0", n, err)
	}
}

// pgOrMink connects to the PostgreSQL of -logic.pg, or else to a node of
// its own, for tests that check mink's answers against PostgreSQL's. The
// connection is closed when the test ends.
func pgOrMink(t *testing.T) *pgx.Conn {
	t.Helper()
	url := *logicPG
	if url == "" {
		url = minktest.Start(t, minktest.Options{}).URL
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
