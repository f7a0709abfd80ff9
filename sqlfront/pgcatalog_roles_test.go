package sqlfront_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/minktest"
)

// The roles, owners and grants the catalogs report, compared with
// PostgreSQL 15.18. Each test sets up, through catalog records, what this
// SQL makes in PostgreSQL (where the superuser mink is initdb's, oid 10):
//
//	CREATE ROLE alice LOGIN PASSWORD 'secret';
//	CREATE ROLE bob;
//	CREATE ROLE carol LOGIN;
//	GRANT bob TO carol;
//	CREATE ROLE admin SUPERUSER;
//	CREATE TABLE t (a int);  -- and u, w as mink
//	ALTER TABLE u OWNER TO alice;
//	GRANT SELECT ON t TO alice;
//	GRANT INSERT ON t TO PUBLIC;
//	GRANT SELECT, UPDATE ON u TO bob;
//	CREATE TABLE k (id int PRIMARY KEY, v int);
//	GRANT SELECT ON k TO carol;
//	CREATE TABLE k2 (id int PRIMARY KEY);
//	GRANT INSERT ON k2 TO carol;
//
// and the expected rows are what PostgreSQL answered to the same queries
// as the same roles (psql -A -F ' | ' -P null=NULL -t; psql's \du, \dp and
// \dt as they print).

// rolesNode is a node with the roles and grants above.
type rolesNode struct {
	*minktest.Node
	roles  map[string]catalog.RoleID
	tables map[string]catalog.TableID
}

func startRolesNode(t *testing.T) *rolesNode {
	t.Helper()
	n := &rolesNode{Node: minktest.Start(t, minktest.Options{}), roles: map[string]catalog.RoleID{}, tables: map[string]catalog.TableID{}}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, ddl := range []string{
		"CREATE TABLE t (a int) WITH (buckets = 1)",
		"CREATE TABLE u (a int) WITH (buckets = 1)",
		"CREATE TABLE w (a int) WITH (buckets = 1)",
		"CREATE TABLE k (id int PRIMARY KEY, v int) WITH (buckets = 1)",
		"CREATE TABLE k2 (id int PRIMARY KEY) WITH (buckets = 1)",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	n.Server.Catalog().Read(func(v *catalog.View) {
		for _, name := range []string{"t", "u", "w", "k", "k2"} {
			tbl, ok := v.TableNamed(name)
			if !ok {
				t.Fatalf("no table %s", name)
			}
			n.tables[name] = tbl.ID
		}
	})
	verifier, err := auth.NewVerifier("secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []catalog.CreateRole{
		{Name: "alice", Login: true, Verifier: verifier.String()},
		{Name: "bob"},
		{Name: "carol", Login: true},
		{Name: "admin", Superuser: true},
	} {
		n.roles[r.Name] = n.propose(t, r).Role
	}
	n.propose(t, catalog.GrantRole{Role: n.roles["bob"], Member: n.roles["carol"]})
	n.propose(t, catalog.SetTableOwner{Table: n.tables["u"], Owner: n.roles["alice"]})
	n.grant(t, "t", "alice", catalog.PrivSelect)
	n.grant(t, "t", "", catalog.PrivInsert)
	n.grant(t, "u", "bob", catalog.PrivSelect|catalog.PrivUpdate)
	n.grant(t, "k", "carol", catalog.PrivSelect)
	n.grant(t, "k2", "carol", catalog.PrivInsert)
	return n
}

func (n *rolesNode) propose(t *testing.T, rec catalog.Record) catalog.Outcome {
	t.Helper()
	out, err := n.Server.Catalog().Propose(context.Background(), rec)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		t.Fatalf("propose %T %+v: %v", rec, rec, err)
	}
	return out
}

// grant grants privs on table to role ("": PUBLIC), or with revoke takes
// them back.
func (n *rolesNode) grant(t *testing.T, table, role string, privs catalog.Privileges, revoke ...bool) {
	t.Helper()
	n.propose(t, catalog.GrantTable{Tables: []catalog.TableID{n.tables[table]}, Grantee: n.roles[role], Privileges: privs,
		Revoke: len(revoke) > 0 && revoke[0]})
}

// connect opens a connection as user (the node trusts every client).
func (n *rolesNode) connect(t *testing.T, user string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), fmt.Sprintf("postgres://%s@%s/mink?sslmode=disable", user, n.Config.PGAddr))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// textRows runs sql with the simple protocol and renders its rows as psql
// -A -F ' | ' -P null=NULL -t does, or its error as "ERROR: SQLSTATE
// message".
func textRows(c *pgconn.PgConn, sql string) string {
	results, err := c.Exec(context.Background(), sql).ReadAll()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "ERROR: " + pgErr.Code + " " + pgErr.Message
	}
	if err != nil {
		return "ERROR: " + err.Error()
	}
	var lines []string
	for _, r := range results {
		for _, row := range r.Rows {
			vals := make([]string, len(row))
			for i, v := range row {
				if v == nil {
					vals[i] = "NULL"
				} else {
					vals[i] = string(v)
				}
			}
			lines = append(lines, strings.Join(vals, " | "))
		}
	}
	return strings.Join(lines, "\n")
}

type catalogCase struct {
	sql  string
	want string // rows, one a line; "ERROR: SQLSTATE message"
}

func checkCatalogCases(t *testing.T, c *pgconn.PgConn, user string, cases []catalogCase) {
	t.Helper()
	for _, tc := range cases {
		want := strings.TrimSpace(strings.ReplaceAll(tc.want, "\t", ""))
		if got := textRows(c, tc.sql); got != want {
			t.Errorf("as %s: %s\ngot:\n%s\nwant (PostgreSQL 15):\n%s", user, tc.sql, got, want)
		}
	}
}

// As the bootstrap superuser: every role, the verifiers, every grant.
func TestCatalogRolesSuperuser(t *testing.T) {
	n := startRolesNode(t)
	c := n.connect(t, "mink")
	if got := c.ParameterStatus("is_superuser"); got != "on" {
		t.Errorf("is_superuser %q, want on", got)
	}
	checkCatalogCases(t, c, "mink", []catalogCase{
		{`SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls, rolconnlimit, rolpassword, rolvaliduntil FROM pg_roles WHERE rolname !~ '^pg_' ORDER BY rolname`, `
			admin | t | t | f | f | f | f | f | -1 | ******** | NULL
			alice | f | t | f | f | t | f | f | -1 | ******** | NULL
			bob | f | t | f | f | f | f | f | -1 | ******** | NULL
			carol | f | t | f | f | t | f | f | -1 | ******** | NULL
			mink | t | t | t | t | t | t | t | -1 | ******** | NULL`},
		{`SELECT usename, usecreatedb, usesuper, userepl, usebypassrls, passwd FROM pg_user ORDER BY usename`, `
			alice | f | f | f | f | ********
			carol | f | f | f | f | ********
			mink | t | t | t | t | ********`},
		{`SELECT rolname, left(rolpassword, 14) FROM pg_authid WHERE rolname !~ '^pg_' ORDER BY rolname`, `
			admin | NULL
			alice | SCRAM-SHA-256$
			bob | NULL
			carol | NULL
			mink | NULL`},
		{`SELECT usename, left(passwd, 14) FROM pg_shadow ORDER BY usename`, `
			alice | SCRAM-SHA-256$
			carol | NULL
			mink | NULL`},
		{`SELECT r.rolname, m.rolname, g.rolname, a.admin_option FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member JOIN pg_roles g ON g.oid = a.grantor WHERE r.rolname !~ '^pg_' ORDER BY 1, 2`, `
			bob | carol | mink | f`},
		{`SELECT groname, array_length(grolist, 1) FROM pg_group WHERE groname !~ '^pg_' ORDER BY 1`, `
			admin | NULL
			bob | 1`},
		{`SELECT relname, pg_get_userbyid(relowner), relacl FROM pg_class WHERE relname IN ('t', 'u', 'w', 'k', 'k2') ORDER BY 1`, `
			k | mink | {mink=arwdDxt/mink,carol=r/mink}
			k2 | mink | {mink=arwdDxt/mink,carol=a/mink}
			t | mink | {mink=arwdDxt/mink,alice=r/mink,=a/mink}
			u | alice | {alice=arwdDxt/alice,bob=rw/alice}
			w | mink | NULL`},
		{`SELECT relname, relacl FROM pg_class WHERE relname IN ('pg_class', 'pg_authid', 'pg_settings') ORDER BY 1`, `
			pg_authid | {mink=arwdDxt/mink}
			pg_class | {mink=arwdDxt/mink,=r/mink}
			pg_settings | {mink=arwdDxt/mink,=rw/mink}`},
		{`SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`, `
			k | mink
			k2 | mink
			t | mink
			u | alice
			w | mink`},
		{`SELECT grantor, grantee, table_name, privilege_type, is_grantable, with_hierarchy FROM information_schema.table_privileges WHERE table_schema = 'public' AND table_name IN ('t', 'u') ORDER BY table_name, grantee, privilege_type`, `
			mink | PUBLIC | t | INSERT | NO | NO
			mink | alice | t | SELECT | NO | YES
			mink | mink | t | DELETE | YES | NO
			mink | mink | t | INSERT | YES | NO
			mink | mink | t | REFERENCES | YES | NO
			mink | mink | t | SELECT | YES | YES
			mink | mink | t | TRIGGER | YES | NO
			mink | mink | t | TRUNCATE | YES | NO
			mink | mink | t | UPDATE | YES | NO
			alice | alice | u | DELETE | YES | NO
			alice | alice | u | INSERT | YES | NO
			alice | alice | u | REFERENCES | YES | NO
			alice | alice | u | SELECT | YES | YES
			alice | alice | u | TRIGGER | YES | NO
			alice | alice | u | TRUNCATE | YES | NO
			alice | alice | u | UPDATE | YES | NO
			alice | bob | u | SELECT | NO | YES
			alice | bob | u | UPDATE | NO | NO`},
		{`SELECT table_name, count(*) FROM information_schema.role_table_grants WHERE table_schema = 'public' GROUP BY 1 ORDER BY 1`, `
			k | 8
			k2 | 8
			t | 9
			u | 9
			w | 7`},
		{`SELECT r.rolname, c.relname, has_table_privilege(r.rolname, c.oid, 'SELECT'), has_table_privilege(r.oid, c.relname, 'INSERT'), has_table_privilege(r.rolname, c.relname, 'UPDATE, DELETE'), has_table_privilege(r.rolname, c.oid, 'SELECT WITH GRANT OPTION') FROM pg_roles r, pg_class c WHERE r.rolname IN ('mink', 'alice', 'bob', 'carol', 'admin') AND c.relname IN ('t', 'u', 'w', 'k') ORDER BY 1, 2`, `
			admin | k | t | t | t | t
			admin | t | t | t | t | t
			admin | u | t | t | t | t
			admin | w | t | t | t | t
			alice | k | f | f | f | f
			alice | t | t | t | f | f
			alice | u | t | t | t | t
			alice | w | f | f | f | f
			bob | k | f | f | f | f
			bob | t | f | t | f | f
			bob | u | t | f | t | f
			bob | w | f | f | f | f
			carol | k | t | f | f | f
			carol | t | f | t | f | f
			carol | u | t | f | t | f
			carol | w | f | f | f | f
			mink | k | t | t | t | t
			mink | t | t | t | t | t
			mink | u | t | t | t | t
			mink | w | t | t | t | t`},
		{`SELECT m.rolname, r.rolname, pg_has_role(m.rolname, r.rolname, 'MEMBER'), pg_has_role(m.oid, r.oid, 'USAGE WITH ADMIN OPTION') FROM pg_roles m, pg_roles r WHERE m.rolname IN ('alice', 'bob', 'carol', 'admin') AND r.rolname IN ('alice', 'bob', 'carol') ORDER BY 1, 2`, `
			admin | alice | t | t
			admin | bob | t | t
			admin | carol | t | t
			alice | alice | t | f
			alice | bob | f | f
			alice | carol | f | f
			bob | alice | f | f
			bob | bob | t | f
			bob | carol | f | f
			carol | alice | f | f
			carol | bob | t | f
			carol | carol | t | f`},
		{`SELECT has_table_privilege('public', 't', 'INSERT'), has_table_privilege('public', 't', 'SELECT'), has_any_column_privilege('alice', 't', 'SELECT'), has_column_privilege('carol', 'u', 'a', 'UPDATE'), has_table_privilege('t', 'RULE'), has_table_privilege('t', ' select , Trigger ')`, `
			t | f | t | t | f | t`},
		{`SELECT current_user, session_user, current_role, user, current_setting('is_superuser')`, `
			mink | mink | mink | mink | on`},
		{`SELECT has_table_privilege('nobody', 't', 'SELECT')`, `ERROR: 42704 role "nobody" does not exist`},
		{`SELECT has_table_privilege('t', 'DROP')`, `ERROR: 22023 unrecognized privilege type: "DROP"`},
		{`SELECT has_table_privilege('nosuch', 'SELECT')`, `ERROR: 42P01 relation "nosuch" does not exist`},
		{`SELECT pg_has_role('public', 'MEMBER')`, `ERROR: 42704 role "public" does not exist`},
	})
}

// rolesUserCases are asked as alice and as carol.
const (
	sqlWhoAmI         = `SELECT current_user, session_user, current_role, user, current_setting('is_superuser')`
	sqlTablePrivs     = `SELECT grantor, grantee, table_name, privilege_type, is_grantable FROM information_schema.table_privileges WHERE table_schema = 'public' ORDER BY table_name, grantee, privilege_type`
	sqlRoleGrants     = `SELECT grantor, grantee, table_name, privilege_type FROM information_schema.role_table_grants WHERE table_schema = 'public' ORDER BY table_name, grantee, privilege_type`
	sqlColumnPrivs    = `SELECT grantee, table_name, column_name, privilege_type FROM information_schema.column_privileges WHERE table_schema = 'public' ORDER BY table_name, column_name, grantee, privilege_type`
	sqlISTables       = `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`
	sqlISColumns      = `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2`
	sqlISKeyColumns   = `SELECT table_name, column_name FROM information_schema.key_column_usage WHERE table_schema = 'public' ORDER BY 1, 2`
	sqlEnabledRoles   = `SELECT role_name FROM information_schema.enabled_roles ORDER BY 1`
	sqlApplicable     = `SELECT grantee, role_name, is_grantable FROM information_schema.applicable_roles ORDER BY 1, 2`
	sqlOwnPrivileges  = `SELECT has_table_privilege('t', 'SELECT'), has_table_privilege('t', 'INSERT'), has_table_privilege('u', 'UPDATE'), has_table_privilege('u', 'SELECT WITH GRANT OPTION'), has_table_privilege('pg_class', 'SELECT'), has_table_privilege('pg_authid', 'SELECT'), pg_has_role('bob', 'MEMBER')`
	sqlRolesPasswords = `SELECT rolname, rolsuper, rolpassword FROM pg_roles WHERE rolname !~ '^pg_' ORDER BY rolname`
	rolesPasswords    = `
		admin | t | ********
		alice | f | ********
		bob | f | ********
		carol | f | ********
		mink | t | ********`
)

// As roles that are no superusers: pg_authid is refused, information_schema
// shows what the role may see.
func TestCatalogRolesUser(t *testing.T) {
	n := startRolesNode(t)
	alice := n.connect(t, "alice")
	if got := alice.ParameterStatus("is_superuser"); got != "off" {
		t.Errorf("alice: is_superuser %q, want off", got)
	}
	restricted := []catalogCase{
		{`SELECT rolname FROM pg_authid`, `ERROR: 42501 permission denied for table pg_authid`},
		{`SELECT usename FROM pg_shadow`, `ERROR: 42501 permission denied for view pg_shadow`},
		{`SELECT count(*) FROM pg_roles r WHERE EXISTS (SELECT 1 FROM pg_authid a WHERE a.oid = r.oid)`, `ERROR: 42501 permission denied for table pg_authid`},
		{sqlRolesPasswords, rolesPasswords},
	}
	checkCatalogCases(t, alice, "alice", restricted)
	checkCatalogCases(t, alice, "alice", []catalogCase{
		{sqlWhoAmI, `alice | alice | alice | alice | off`},
		{sqlTablePrivs, `
			mink | PUBLIC | t | INSERT | NO
			mink | alice | t | SELECT | NO
			alice | alice | u | DELETE | YES
			alice | alice | u | INSERT | YES
			alice | alice | u | REFERENCES | YES
			alice | alice | u | SELECT | YES
			alice | alice | u | TRIGGER | YES
			alice | alice | u | TRUNCATE | YES
			alice | alice | u | UPDATE | YES
			alice | bob | u | SELECT | NO
			alice | bob | u | UPDATE | NO`},
		{sqlRoleGrants, `
			mink | alice | t | SELECT
			alice | alice | u | DELETE
			alice | alice | u | INSERT
			alice | alice | u | REFERENCES
			alice | alice | u | SELECT
			alice | alice | u | TRIGGER
			alice | alice | u | TRUNCATE
			alice | alice | u | UPDATE
			alice | bob | u | SELECT
			alice | bob | u | UPDATE`},
		{sqlColumnPrivs, `
			PUBLIC | t | a | INSERT
			alice | t | a | SELECT
			alice | u | a | INSERT
			alice | u | a | REFERENCES
			alice | u | a | SELECT
			alice | u | a | UPDATE
			bob | u | a | SELECT
			bob | u | a | UPDATE`},
		{sqlISTables, "t\nu"},
		{sqlISColumns, "t | a\nu | a"},
		{sqlISKeyColumns, ""},
		{sqlEnabledRoles, "alice"},
		{sqlApplicable, ""},
		{sqlOwnPrivileges, `t | t | t | t | t | f | f`},
	})

	carol := n.connect(t, "carol")
	checkCatalogCases(t, carol, "carol", restricted)
	checkCatalogCases(t, carol, "carol", []catalogCase{
		{sqlWhoAmI, `carol | carol | carol | carol | off`},
		{sqlTablePrivs, `
			mink | carol | k | SELECT | NO
			mink | carol | k2 | INSERT | NO
			mink | PUBLIC | t | INSERT | NO
			alice | bob | u | SELECT | NO
			alice | bob | u | UPDATE | NO`},
		{sqlRoleGrants, `
			mink | carol | k | SELECT
			mink | carol | k2 | INSERT
			alice | bob | u | SELECT
			alice | bob | u | UPDATE`},
		{sqlColumnPrivs, `
			carol | k | id | SELECT
			carol | k | v | SELECT
			carol | k2 | id | INSERT
			PUBLIC | t | a | INSERT
			bob | u | a | SELECT
			bob | u | a | UPDATE`},
		{sqlISTables, "k\nk2\nt\nu"},
		{sqlISColumns, "k | id\nk | v\nk2 | id\nt | a\nu | a"},
		{sqlISKeyColumns, "k | id\nk2 | id"},
		{sqlEnabledRoles, "bob\ncarol"},
		{sqlApplicable, "carol | bob | NO"},
		{sqlOwnPrivileges, `f | t | t | f | t | f | t`},
	})
}

// A GRANT, a REVOKE or ALTER ROLE … SUPERUSER holds from the next
// statement of an open session, also for a prepared statement and for
// is_superuser (which PostgreSQL reports at the start of a session).
func TestCatalogRolesChange(t *testing.T) {
	n := startRolesNode(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/mink?sslmode=disable", n.Config.PGAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	hasUpdate := func(step string, want bool) {
		t.Helper()
		var got bool
		if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1, 'UPDATE')", "t").Scan(&got); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got != want {
			t.Errorf("%s: has_table_privilege('t', 'UPDATE') = %v, want %v", step, got, want)
		}
	}
	hasUpdate("before", false)
	n.grant(t, "t", "alice", catalog.PrivUpdate)
	hasUpdate("after GRANT UPDATE", true)
	n.grant(t, "t", "alice", catalog.PrivUpdate, true)
	hasUpdate("after REVOKE UPDATE", false)

	pg := conn.PgConn()
	yes := true
	n.propose(t, catalog.AlterRole{Role: n.roles["alice"], Superuser: &yes})
	if got := textRows(pg, "SHOW is_superuser"); got != "on" {
		t.Errorf("SHOW is_superuser after ALTER ROLE alice SUPERUSER: %q", got)
	}
	if got := pg.ParameterStatus("is_superuser"); got != "on" {
		t.Errorf("ParameterStatus is_superuser after ALTER ROLE alice SUPERUSER: %q", got)
	}
	if got := textRows(pg, "SELECT left(rolpassword, 14) FROM pg_authid WHERE rolname = 'alice'"); got != "SCRAM-SHA-256$" {
		t.Errorf("pg_authid as a superuser: %q", got)
	}
	hasUpdate("as a superuser", true)
	no := false
	n.propose(t, catalog.AlterRole{Role: n.roles["alice"], Superuser: &no})
	if got := textRows(pg, "SELECT 1"); got != "1" {
		t.Fatal(got)
	}
	if got := pg.ParameterStatus("is_superuser"); got != "off" {
		t.Errorf("ParameterStatus is_superuser after ALTER ROLE alice NOSUPERUSER: %q", got)
	}
	if got := textRows(pg, "SELECT rolname FROM pg_authid"); got != "ERROR: 42501 permission denied for table pg_authid" {
		t.Errorf("pg_authid after NOSUPERUSER: %q", got)
	}

	// Names in aclitems are quoted as PostgreSQL's putid quotes them
	// (CREATE ROLE "Mixed Case"; CREATE ROLE "Dave"; CREATE ROLE "q""uote";
	// GRANT SELECT ON w TO "Mixed Case", "Dave", "q""uote").
	for _, name := range []string{"Mixed Case", "Dave", `q"uote`} {
		n.roles[name] = n.propose(t, catalog.CreateRole{Name: name}).Role
		n.grant(t, "w", name, catalog.PrivSelect)
	}
	checkCatalogCases(t, pg, "alice", []catalogCase{
		{`SELECT relacl FROM pg_class WHERE relname = 'w'`, `{mink=arwdDxt/mink,"\"Mixed Case\"=r/mink",Dave=r/mink,"\"q\"\"uote\"=r/mink"}`},
		{`SELECT array_to_string(relacl, ' ') FROM pg_class WHERE relname = 'w'`, `mink=arwdDxt/mink "Mixed Case"=r/mink Dave=r/mink "q""uote"=r/mink`},
	})
}

// psql's \du, \dp and \dt print what PostgreSQL 15's psql prints for the
// same roles and grants.
func TestCatalogRolesPsql(t *testing.T) {
	bin, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql not found in PATH: run scripts/install-test-deps.sh (or `make test-deps`) to install it")
	}
	n := startRolesNode(t)
	host, port, _ := net.SplitHostPort(n.Config.PGAddr)
	for _, tc := range []struct{ user, command, want string }{
		{"mink", `\du`, `
                                   List of roles
 Role name |                         Attributes                         | Member of 
-----------+------------------------------------------------------------+-----------
 admin     | Superuser, Cannot login                                    | {}
 alice     |                                                            | {}
 bob       | Cannot login                                               | {}
 carol     |                                                            | {bob}
 mink      | Superuser, Create role, Create DB, Replication, Bypass RLS | {}
`},
		{"mink", `\dp`, `
                             Access privileges
 Schema | Name | Type  |  Access privileges  | Column privileges | Policies 
--------+------+-------+---------------------+-------------------+----------
 public | k    | table | mink=arwdDxt/mink  +|                   | 
        |      |       | carol=r/mink        |                   | 
 public | k2   | table | mink=arwdDxt/mink  +|                   | 
        |      |       | carol=a/mink        |                   | 
 public | t    | table | mink=arwdDxt/mink  +|                   | 
        |      |       | alice=r/mink       +|                   | 
        |      |       | =a/mink             |                   | 
 public | u    | table | alice=arwdDxt/alice+|                   | 
        |      |       | bob=rw/alice        |                   | 
 public | w    | table |                     |                   | 
(5 rows)
`},
		{"mink", `\dt`, `
       List of relations
 Schema | Name | Type  | Owner 
--------+------+-------+-------
 public | k    | table | mink
 public | k2   | table | mink
 public | t    | table | mink
 public | u    | table | alice
 public | w    | table | mink
(5 rows)
`},
		{"alice", `\dp t|u`, `
                             Access privileges
 Schema | Name | Type  |  Access privileges  | Column privileges | Policies 
--------+------+-------+---------------------+-------------------+----------
 public | t    | table | mink=arwdDxt/mink  +|                   | 
        |      |       | alice=r/mink       +|                   | 
        |      |       | =a/mink             |                   | 
 public | u    | table | alice=arwdDxt/alice+|                   | 
        |      |       | bob=rw/alice        |                   | 
(2 rows)
`},
	} {
		dsn := fmt.Sprintf("host=%s port=%s user=%s dbname=mink sslmode=disable", host, port, tc.user)
		cmd := exec.Command(bin, "-X", "-c", tc.command, dsn)
		cmd.Env = append(os.Environ(), "PAGER=", "PSQL_PAGER=", "PGTZ=UTC")
		got, _ := cmd.CombinedOutput()
		if want := strings.TrimPrefix(tc.want, "\n") + "\n"; string(got) != want {
			t.Errorf("psql as %s -c %q:\n%s\nwant (PostgreSQL 15):\n%s", tc.user, tc.command, got, want)
		}
	}
}
