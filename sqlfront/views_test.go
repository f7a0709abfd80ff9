package sqlfront_test

import (
	"context"
	"strings"
	"testing"
)

// A role reads a view with SELECT on the view alone: what the view reads
// is checked against the view's owner, as in PostgreSQL.
func TestViewPrivileges(t *testing.T) {
	n := startWithPassword(t, "root pw")
	ctx := context.Background()
	admin, err := as(t, n, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin,
		"CREATE ROLE alice LOGIN PASSWORD 'alice pw'",
		"CREATE ROLE bob LOGIN PASSWORD 'bob pw'",
		"CREATE TABLE secret (id bigint, v text)",
		"INSERT INTO secret VALUES (1, 'a'), (2, 'b')",
		"CREATE VIEW open AS SELECT id FROM secret",
	)
	alice, err := as(t, n, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := as(t, n, "bob", "bob pw")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, alice, "SELECT * FROM open", "42501", "permission denied for view open")
	wantState(t, alice, "SELECT * FROM secret", "42501", "permission denied for table secret")
	wantState(t, alice, "GRANT SELECT ON open TO bob", "42501", "permission denied for view open")

	mustExec(t, admin, "GRANT SELECT ON open TO alice")
	var n1 int
	if err := alice.QueryRow(ctx, "SELECT count(*) FROM open").Scan(&n1); err != nil || n1 != 2 {
		t.Fatalf("alice reads the view after GRANT SELECT ON open: %d, %v", n1, err)
	}
	// The table itself stays closed, also through a join with the view.
	wantState(t, alice, "SELECT * FROM open JOIN secret USING (id)", "42501", "permission denied for table secret")
	wantState(t, alice, "INSERT INTO open VALUES (3)", "55000", `cannot insert into view "open"`)
	wantState(t, alice, "DROP VIEW open", "42501", "must be owner of view open")
	wantState(t, alice, "ALTER VIEW open RENAME TO shut", "42501", "must be owner of view open")
	wantState(t, alice, "CREATE OR REPLACE VIEW open AS SELECT id, v FROM secret", "42501", "must be owner of view open")

	// A view alice owns reads with alice's privileges: bob, granted the
	// view, still cannot read secret through it.
	mustExec(t, alice, "CREATE VIEW hers AS SELECT id FROM secret", "GRANT SELECT ON hers TO bob")
	wantState(t, bob, "SELECT * FROM hers", "42501", "permission denied for table secret")
	wantState(t, alice, "SELECT * FROM hers", "42501", "permission denied for table secret")
	mustExec(t, admin, "GRANT SELECT ON secret TO alice")
	if err := bob.QueryRow(ctx, "SELECT count(*) FROM hers").Scan(&n1); err != nil || n1 != 2 {
		t.Fatalf("bob reads alice's view once alice may read its table: %d, %v", n1, err)
	}
	// A view of a view: bob needs SELECT on the outer one only.
	mustExec(t, alice, "CREATE VIEW hers2 AS SELECT id FROM hers WHERE id > 1")
	wantState(t, bob, "SELECT * FROM hers2", "42501", "permission denied for view hers2")
	mustExec(t, alice, "GRANT SELECT ON hers2 TO bob")
	if err := bob.QueryRow(ctx, "SELECT count(*) FROM hers2").Scan(&n1); err != nil || n1 != 1 {
		t.Fatalf("bob reads a view of a view: %d, %v", n1, err)
	}

	// REVOKE takes it away again; ownership moves with ALTER VIEW … OWNER TO.
	mustExec(t, admin, "REVOKE SELECT ON open FROM alice")
	wantState(t, alice, "SELECT * FROM open", "42501", "permission denied for view open")
	wantState(t, admin, "DROP ROLE alice", "2BP01", `role "alice" cannot be dropped because some objects depend on it`)
	mustExec(t, admin, "ALTER VIEW open OWNER TO alice")
	if err := alice.QueryRow(ctx, "SELECT count(*) FROM open").Scan(&n1); err != nil || n1 != 2 {
		t.Fatalf("alice reads the view she owns: %d, %v", n1, err)
	}
	mustExec(t, alice, "ALTER VIEW open RENAME TO shut", "DROP VIEW shut")
}

// A prepared statement that reads a view reads the view as it is at each
// execution: a replaced view's new query, a renamed table; a dropped view
// is 42P01, and a replacement that changes the statement's result columns
// PostgreSQL's 0A000.
func TestViewPreparedStatement(t *testing.T) {
	n := startWithPassword(t, "root pw")
	ctx := context.Background()
	conn, err := as(t, n, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn,
		"CREATE TABLE t (a int, b text)",
		"INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'z')",
		"CREATE VIEW v AS SELECT a, b FROM t WHERE a > 1",
	)
	stmt, err := conn.Prepare(ctx, "read_v", "SELECT b FROM v WHERE a >= $1 ORDER BY a")
	if err != nil {
		t.Fatal(err)
	}
	read := func() ([]string, error) {
		rows, err := conn.Query(ctx, stmt.Name, 0)
		if err != nil {
			return nil, err
		}
		var out []string
		for rows.Next() {
			var b string
			if err := rows.Scan(&b); err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, rows.Err()
	}
	want := func(what string, expect ...string) {
		t.Helper()
		got, err := read()
		if err != nil || strings.Join(got, ",") != strings.Join(expect, ",") {
			t.Fatalf("%s: %v, %v; want %v", what, got, err, expect)
		}
	}
	want("as prepared", "y", "z")
	mustExec(t, conn, "CREATE OR REPLACE VIEW v AS SELECT a, b FROM t WHERE a < 3")
	want("after CREATE OR REPLACE", "x", "y")
	mustExec(t, conn, "ALTER TABLE t RENAME TO t2", "INSERT INTO t2 VALUES (0, 'w')")
	want("after the table's rename", "w", "x", "y")
	mustExec(t, conn, "CREATE OR REPLACE VIEW v AS SELECT a, upper(b) AS b FROM t2 WHERE a < 3")
	want("a column's expression replaced", "W", "X", "Y")

	// A statement whose result columns are the view's own changes its
	// result type with a replacement that adds one.
	star, err := conn.Prepare(ctx, "star_v", "SELECT * FROM v")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "CREATE OR REPLACE VIEW v AS SELECT a, upper(b) AS b, 1 AS c FROM t2 WHERE a < 3")
	if _, err := conn.Exec(ctx, star.Name); sqlstate(err) != "0A000" || !strings.Contains(err.Error(), "cached plan must not change result type") {
		t.Fatalf("SELECT * after a column was added: %v, want 0A000", err)
	}
	want("a column added that the statement does not read", "W", "X", "Y")
	mustExec(t, conn, "DROP VIEW v")
	if _, err := read(); sqlstate(err) != "42P01" {
		t.Fatalf("after DROP VIEW: %v, want 42P01", err)
	}
}

// GRANT … ON ALL TABLES IN SCHEMA public takes in views, as in PostgreSQL.
func TestViewGrantAllTables(t *testing.T) {
	n := startWithPassword(t, "root pw")
	ctx := context.Background()
	admin, err := as(t, n, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin,
		"CREATE ROLE carol LOGIN PASSWORD 'carol pw'",
		"CREATE TABLE t (a int)",
		"INSERT INTO t VALUES (1), (2)",
		"CREATE VIEW v AS SELECT a FROM t WHERE a > 1",
	)
	carol, err := as(t, n, "carol", "carol pw")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, carol, "SELECT * FROM v", "42501", "permission denied for view v")
	mustExec(t, admin, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO carol")
	var count int
	if err := carol.QueryRow(ctx, "SELECT count(*) FROM v").Scan(&count); err != nil || count != 1 {
		t.Fatalf("carol reads v after GRANT … ALL TABLES: %d, %v", count, err)
	}
	var has bool
	if err := carol.QueryRow(ctx, "SELECT has_table_privilege('v', 'SELECT')").Scan(&has); err != nil || !has {
		t.Fatalf("has_table_privilege('v', 'SELECT') for carol: %v, %v", has, err)
	}
	wantState(t, admin, `CREATE VIEW "v$changelog" AS SELECT 1`, "42939", "reserved for changelogs")
}
