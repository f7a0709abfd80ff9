package sqlfront_test

import (
	"context"
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
