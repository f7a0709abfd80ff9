package sqlfront_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
)

// startWithPassword starts a node whose superuser mink has password pw.
func startWithPassword(t *testing.T, pw string) *minktest.Node {
	t.Helper()
	file := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return minktest.Start(t, minktest.Options{Tweak: func(c *server.Config) { c.SuperuserPasswordFile = file }})
}

// as connects to n as user with password.
func as(t *testing.T, n *minktest.Node, user, password string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = user, password
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// wantState runs sql and wants the error's SQLSTATE (and message, if given).
func wantState(t *testing.T, conn *pgx.Conn, sql, state, message string) {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql)
	if sqlstate(err) != state || (message != "" && !strings.Contains(err.Error(), message)) {
		t.Fatalf("%s: %v; want %s %q", sql, err, state, message)
	}
}

func mustExec(t *testing.T, conn *pgx.Conn, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// Roles log in with their passwords; a grant or revoke holds for an open
// session from its next statement; DDL needs ownership.
func TestRolesAndPrivileges(t *testing.T) {
	n := startWithPassword(t, "root pw")
	ctx := context.Background()
	if _, err := as(t, n, "mink", "wrong"); sqlstate(err) != "28P01" {
		t.Fatalf("wrong password: %v, want 28P01", err)
	}
	admin, err := as(t, n, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin,
		"CREATE ROLE analysts",
		"CREATE ROLE alice LOGIN PASSWORD 'alice pw' IN ROLE analysts",
		"CREATE USER bob WITH PASSWORD 'bob pw'",
		"CREATE TABLE events (id bigint, v text) WITH (buckets = 2)",
		"INSERT INTO events VALUES (1, 'a'), (2, 'b')",
		"CREATE TABLE kv (k bigint PRIMARY KEY, v text)",
		"INSERT INTO kv VALUES (1, 'one')",
	)
	wantState(t, admin, "CREATE ROLE alice", "42710", `role "alice" already exists`)
	wantState(t, admin, "CREATE ROLE public", "42939", `role name "public" is reserved`)
	wantState(t, admin, "CREATE ROLE pg_x", "42939", `role name "pg_x" is reserved`)
	wantState(t, admin, "CREATE ROLE c CREATEDB", "0A000", "CREATEDB")
	wantState(t, admin, "GRANT nobody TO alice", "42704", `role "nobody" does not exist`)
	wantState(t, admin, "GRANT alice TO analysts", "0LP01", `role "alice" is a member of role "analysts"`)
	wantState(t, admin, "GRANT USAGE ON events TO alice", "0LP01", "invalid privilege type USAGE for table")
	wantState(t, admin, "GRANT SELECT ON nosuch TO alice", "42P01", "")

	if _, err := as(t, n, "analysts", ""); sqlstate(err) != "28P01" {
		t.Fatalf("a NOLOGIN role: %v, want 28P01", err)
	}
	alice, err := as(t, n, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	var who string
	if err := alice.QueryRow(ctx, "SELECT 1::text").Scan(&who); err != nil {
		t.Fatal(err)
	}
	wantState(t, alice, "SELECT * FROM events", "42501", "permission denied for table events")
	wantState(t, alice, "INSERT INTO events VALUES (3, 'c')", "42501", "permission denied for table events")
	wantState(t, alice, "SELECT * FROM kv WHERE k = 1", "42501", "permission denied for table kv")
	wantState(t, alice, "SELECT count(*) FROM (SELECT * FROM events) s", "42501", "permission denied for table events")
	wantState(t, alice, "CREATE ROLE eve", "42501", "permission denied to create roles")
	wantState(t, alice, "GRANT SELECT ON events TO alice", "42501", "permission denied for table events")

	// A grant to the group reaches its member's open session.
	mustExec(t, admin, "GRANT SELECT ON events, kv TO analysts")
	var count int
	if err := alice.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&count); err != nil || count != 2 {
		t.Fatalf("after GRANT SELECT TO analysts: %d, %v", count, err)
	}
	var v string
	if err := alice.QueryRow(ctx, "SELECT v FROM kv WHERE k = 1").Scan(&v); err != nil || v != "one" {
		t.Fatalf("point lookup after the grant: %q, %v", v, err)
	}
	wantState(t, alice, "INSERT INTO events VALUES (3, 'c')", "42501", "permission denied for table events")
	wantState(t, alice, "UPDATE kv SET v = 'x' WHERE k = 1", "42501", "permission denied for table kv")
	mustExec(t, admin, "GRANT INSERT, UPDATE ON kv TO alice", "GRANT INSERT ON events TO alice")
	mustExec(t, alice, "INSERT INTO events VALUES (3, 'c')", "UPDATE kv SET v = 'uno' WHERE k = 1")
	wantState(t, alice, "DELETE FROM kv WHERE k = 1", "42501", "permission denied for table kv")
	wantState(t, alice, "TRUNCATE events", "42501", "permission denied for table events")
	wantState(t, alice, "DROP TABLE events", "42501", "must be owner of table events")
	wantState(t, alice, "ALTER TABLE events ADD COLUMN w int", "42501", "must be owner of table events")

	// A prepared statement is checked at every execution.
	stmt, err := alice.Prepare(ctx, "count_events", "SELECT count(*) FROM events")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, "REVOKE SELECT ON events FROM analysts")
	if _, err := alice.Exec(ctx, stmt.Name); sqlstate(err) != "42501" {
		t.Fatalf("the prepared statement after REVOKE: %v, want 42501", err)
	}

	// Tables a role creates are its own; others need grants; ownership
	// moves with ALTER TABLE … OWNER TO.
	mustExec(t, alice, "CREATE TABLE mine (x int)", "INSERT INTO mine VALUES (1)", "GRANT SELECT ON mine TO PUBLIC")
	bob, err := as(t, n, "bob", "bob pw")
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.QueryRow(ctx, "SELECT count(*) FROM mine").Scan(&count); err != nil || count != 1 {
		t.Fatalf("bob on PUBLIC's grant: %d, %v", count, err)
	}
	wantState(t, bob, "INSERT INTO mine VALUES (2)", "42501", "permission denied for table mine")
	wantState(t, alice, "ALTER TABLE mine OWNER TO bob", "42501", `must be able to SET ROLE "bob"`)
	wantState(t, admin, "DROP ROLE alice", "2BP01", `role "alice" cannot be dropped because some objects depend on it`)
	mustExec(t, admin, "ALTER TABLE mine OWNER TO bob")
	mustExec(t, bob, "INSERT INTO mine VALUES (2)", "DROP TABLE mine")

	// Passwords: a role changes its own; an old one stops working.
	mustExec(t, alice, "ALTER ROLE alice PASSWORD 'new pw'")
	if _, err := as(t, n, "alice", "alice pw"); sqlstate(err) != "28P01" {
		t.Fatalf("the old password: %v", err)
	}
	if _, err := as(t, n, "alice", "new pw"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	wantState(t, alice, "ALTER ROLE bob PASSWORD 'x'", "42501", "permission denied to alter roles")
	wantState(t, alice, "ALTER ROLE alice SUPERUSER", "42501", "permission denied to alter roles")

	// NOLOGIN, rename and drop.
	mustExec(t, admin, "ALTER ROLE bob NOLOGIN")
	if _, err := as(t, n, "bob", "bob pw"); sqlstate(err) != "28P01" {
		t.Fatalf("bob after NOLOGIN: %v", err)
	}
	mustExec(t, admin, "ALTER ROLE bob RENAME TO robert", "ALTER ROLE robert LOGIN")
	if _, err := as(t, n, "robert", "bob pw"); err != nil {
		t.Fatalf("robert (renamed bob): %v", err)
	}
	wantState(t, admin, "DROP ROLE mink", "55006", "current user cannot be dropped")
	wantState(t, admin, "DROP ROLE nobody", "42704", `role "nobody" does not exist`)
	mustExec(t, admin, "DROP ROLE IF EXISTS nobody", "DROP ROLE robert")
	for i := range 3 {
		if _, err := as(t, n, "robert", "bob pw"); sqlstate(err) != "28P01" {
			t.Fatalf("try %d as a dropped role: %v", i, err)
		}
	}
}

// current_user is the session's role wherever it is used: in a query that
// reads a table, and in the values an INSERT writes.
func TestCurrentUserInStatements(t *testing.T) {
	n := startWithPassword(t, "pw")
	admin, err := as(t, n, "mink", "pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, "CREATE ROLE alice LOGIN PASSWORD 'a'", "CREATE TABLE audit (who text, n int)", "GRANT SELECT, INSERT ON audit TO alice")
	alice, err := as(t, n, "alice", "a")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, alice, "INSERT INTO audit VALUES (current_user, 1)", "INSERT INTO audit SELECT session_user, 2")
	ctx := context.Background()
	rows, err := alice.Query(ctx, "SELECT who, current_user, n FROM audit ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var who, cur string
		var n int
		if err := rows.Scan(&who, &cur, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%s/%d", who, cur, n))
	}
	if rows.Err() != nil || strings.Join(got, " ") != "alice/alice/1 alice/alice/2" {
		t.Fatalf("got %v, %v; want alice/alice/1 alice/alice/2", got, rows.Err())
	}
}

// CREATE TABLE … AS, SELECT … INTO and LIKE read their source: a role
// without SELECT on it is refused (42501) and no table is left; with the
// grant, the role owns the new table.
func TestCreateTableAsPrivileges(t *testing.T) {
	n := startWithPassword(t, "root pw")
	admin, err := as(t, n, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin,
		"CREATE TABLE secret (id int, v text)",
		"INSERT INTO secret VALUES (1, 'x')",
		"CREATE ROLE alice LOGIN PASSWORD 'a pw'")
	alice, err := as(t, n, "alice", "a pw")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, alice, "CREATE TABLE copy1 AS SELECT * FROM secret", "42501", "permission denied for table secret")
	wantState(t, alice, "SELECT * INTO copy2 FROM secret", "42501", "permission denied for table secret")
	wantState(t, alice, "CREATE TABLE copy3 (LIKE secret)", "42501", "permission denied for table secret")
	for _, name := range []string{"copy1", "copy2", "copy3"} {
		wantState(t, admin, "SELECT * FROM "+name, "42P01", "")
	}
	mustExec(t, admin, "GRANT SELECT ON secret TO alice")
	mustExec(t, alice, "CREATE TABLE copy1 AS SELECT * FROM secret", "INSERT INTO copy1 VALUES (2, 'y')")
	var owner string
	var rows int
	if err := alice.QueryRow(context.Background(), "SELECT tableowner, (SELECT count(*) FROM copy1) FROM pg_tables WHERE tablename = 'copy1'").Scan(&owner, &rows); err != nil {
		t.Fatal(err)
	}
	if owner != "alice" || rows != 2 {
		t.Errorf("copy1 is owned by %q with %d rows, want alice's with 2", owner, rows)
	}
}

// Only a table's owner (or a superuser) renames it; the grants on a
// table follow it to its new name.
func TestRenameTablePrivileges(t *testing.T) {
	n := startWithPassword(t, "root pw")
	admin, err := as(t, n, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin,
		"CREATE TABLE orders (id int, v text)",
		"INSERT INTO orders VALUES (1, 'x')",
		"CREATE ROLE bob LOGIN PASSWORD 'b pw'",
		"GRANT SELECT ON orders TO bob")
	bob, err := as(t, n, "bob", "b pw")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, bob, "ALTER TABLE orders RENAME TO mine", "42501", "must be owner of table orders")
	mustExec(t, admin, "ALTER TABLE orders RENAME TO orders_2024")
	var rows int
	if err := bob.QueryRow(context.Background(), "SELECT count(*) FROM orders_2024").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("bob reads the renamed table: %d rows, %v; want 1 row", rows, err)
	}
	wantState(t, bob, "INSERT INTO orders_2024 VALUES (2, 'y')", "42501", "permission denied for table orders_2024")
	mustExec(t, admin, "ALTER TABLE orders_2024 OWNER TO bob")
	mustExec(t, bob, "ALTER TABLE orders_2024 RENAME TO bobs")
}
