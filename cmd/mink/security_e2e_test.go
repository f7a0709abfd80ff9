package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// startSecureNode starts a node whose superuser mink has password pw (and
// any extra flags), and waits until mink can log in over SQL.
func startSecureNode(t *testing.T, dataDir, pw string, extra ...string) *node {
	t.Helper()
	pwFile := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, nodeOpts{dataDir: dataDir, extra: append([]string{"--superuser-password-file", pwFile}, extra...)})
	n.start()
	n.waitHealthy()
	waitFor(t, 30*time.Second, "mink logs in", func() bool {
		conn, err := n.login(context.Background(), "mink", pw)
		if err == nil {
			conn.Close(context.Background())
		}
		return err == nil
	})
	return n
}

// login connects to the node's Postgres listener as user with password.
func (n *node) login(ctx context.Context, user, password string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.Connect(ctx, n.loginURL(user, password))
}

func (n *node) loginURL(user, password string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/mink?sslmode=disable", user, strings.ReplaceAll(password, " ", "%20"), n.pgAddr())
}

// checkLoginLog checks that the node logged a failed login of role on
// listener, and that no password of secrets is in its log.
func checkLoginLog(t *testing.T, n *node, listener, role string, secrets ...string) {
	t.Helper()
	log := n.log()
	for _, secret := range secrets {
		if strings.Contains(log, secret) {
			t.Fatalf("the log holds a password (%q)", secret)
		}
	}
	if want := fmt.Sprintf(`msg="login failed" node=1 listener=%s role=%s`, listener, role); !strings.Contains(log, want) {
		t.Fatalf("a failed %s login is not logged (%s):\n%s", listener, want, lastLines(log, 30))
	}
}

// Passwords and privileges through the clients people use: psql, pgx,
// psycopg2 and pgjdbc authenticate with SCRAM-SHA-256 as the superuser and
// as a role made over SQL; a wrong password is 28P01; a grant and a
// revoke hold for an open session from its next statement; no password
// reaches the log.
func TestSecurityRolesWithClients(t *testing.T) {
	n := startSecureNode(t, t.TempDir(), "root pw")
	ctx := context.Background()
	admin, err := n.login(ctx, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	mustExec(t, admin, "CREATE ROLE alice LOGIN PASSWORD 'alice pw'")
	mustExec(t, admin, "CREATE TABLE notes (id bigint, body text) WITH (buckets = 2)")
	mustExec(t, admin, "INSERT INTO notes VALUES (1, 'one'), (2, 'two')")

	// psql: the right password, a wrong one.
	psql := requireCommand(t, "psql")
	host, port, _ := net.SplitHostPort(n.pgAddr())
	runPsql := func(user, password, sql string) (string, error) {
		cmd := exec.Command(psql, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", host, "-p", port, "-U", user, "-d", "mink", "-c", sql)
		cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGSSLMODE=disable")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := runPsql("alice", "wrong", "SELECT 1"); err == nil || !strings.Contains(out, `password authentication failed for user "alice"`) {
		t.Fatalf("psql, wrong password: %v\n%s", err, out)
	}
	if out, err := runPsql("alice", "alice pw", "SELECT count(*) FROM notes"); err == nil || !strings.Contains(out, "permission denied for table notes") {
		t.Fatalf("psql as alice before the grant: %v\n%s", err, out)
	}
	if out, err := runPsql("mink", "root pw", "GRANT SELECT ON notes TO alice"); err != nil || out != "GRANT" {
		t.Fatalf("psql GRANT: %v\n%s", err, out)
	}
	if out, err := runPsql("alice", "alice pw", "SELECT count(*) FROM notes"); err != nil || out != "2" {
		t.Fatalf("psql as alice after the grant: %v\n%s", err, out)
	}

	// pgx: an open session sees a revoke at its next statement.
	alice, err := n.login(ctx, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(ctx)
	var count int
	if err := alice.QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&count); err != nil || count != 2 {
		t.Fatalf("pgx as alice: %d, %v", count, err)
	}
	mustExec(t, admin, "REVOKE SELECT ON notes FROM alice")
	if err := alice.QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&count); sqlState(err) != "42501" {
		t.Fatalf("pgx as alice after REVOKE: %v, want 42501", err)
	}
	if _, err := n.login(ctx, "alice", "wrong"); sqlState(err) != "28P01" {
		t.Fatalf("pgx, wrong password: %v, want 28P01", err)
	}
	mustExec(t, admin, "GRANT SELECT, INSERT ON notes TO alice")

	// psycopg2 (Debian's, under /usr/bin/python3) with SCRAM.
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import psycopg2").CombinedOutput(); err != nil {
		t.Fatalf("python3-psycopg2 is not installed (%v: %s): %s", err, out, installHint)
	}
	script := `
import sys, psycopg2
dsn = sys.argv[1]
try:
    psycopg2.connect(dsn + " password=wrong")
    print("wrong password connected")
except psycopg2.OperationalError as e:
    if "password authentication failed" not in str(e):
        print("wrong password:", e); sys.exit(1)
c = psycopg2.connect(dsn + " password='alice pw'")
c.autocommit = True
cur = c.cursor()
cur.execute("INSERT INTO notes VALUES (%s, %s)", (3, "from psycopg2"))
cur.execute("SELECT count(*) FROM notes")
n = cur.fetchone()[0]
try:
    cur.execute("TRUNCATE notes")
    print("TRUNCATE without the privilege succeeded"); sys.exit(1)
except psycopg2.Error as e:
    if e.pgcode != "42501":
        print("TRUNCATE:", e.pgcode, e); sys.exit(1)
print("ok" if n == 3 else "count %d" % n)
`
	runClient(t, python, "-c", script, fmt.Sprintf("host=%s port=%s user=alice dbname=mink sslmode=disable", host, port))

	// pgjdbc with SCRAM.
	const jar = "/usr/share/java/postgresql.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("libpostgresql-jdbc-java is not installed (%v): %s", err, installHint)
	}
	java := requireCommand(t, "java")
	src := filepath.Join(t.TempDir(), "Scram.java")
	if err := os.WriteFile(src, []byte(`import java.sql.*;
public class Scram {
  public static void main(String[] a) throws Exception {
    try {
      DriverManager.getConnection(a[0], "alice", "wrong");
      System.out.println("wrong password connected"); return;
    } catch (SQLException e) {
      if (!"28P01".equals(e.getSQLState())) { System.out.println("wrong password: " + e.getSQLState() + " " + e); return; }
    }
    try (Connection c = DriverManager.getConnection(a[0], "alice", "alice pw");
         Statement s = c.createStatement()) {
      s.executeUpdate("INSERT INTO notes VALUES (4, 'from pgjdbc')");
      ResultSet r = s.executeQuery("SELECT count(*) FROM notes");
      r.next();
      System.out.println(r.getInt(1) == 4 ? "ok" : "count " + r.getInt(1));
    }
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	runClient(t, java, "-cp", jar, src, fmt.Sprintf("jdbc:postgresql://%s/mink?sslmode=disable", n.pgAddr()))

	checkLoginLog(t, n, "postgres", "alice", "root pw", "alice pw")
	n.stop()
}

// The superuser's password follows --superuser-password-file across a
// restart; roles and grants survive it; too many failed logins from one
// address are refused for a while, even with the right password.
func TestSecurityRestartAndLoginLimit(t *testing.T) {
	dir := t.TempDir()
	n := startSecureNode(t, dir, "first")
	ctx := context.Background()
	admin, err := n.login(ctx, "mink", "first")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, "CREATE ROLE bob LOGIN PASSWORD 'bob pw'")
	mustExec(t, admin, "CREATE TABLE t (x int)")
	mustExec(t, admin, "GRANT SELECT ON t TO bob")
	admin.Close(ctx)
	n.stop()

	n = startSecureNode(t, dir, "second")
	if _, err := n.login(ctx, "mink", "first"); sqlState(err) != "28P01" {
		t.Fatalf("the old superuser password after the restart: %v", err)
	}
	bob, err := n.login(ctx, "bob", "bob pw")
	if err != nil {
		t.Fatalf("bob after the restart: %v", err)
	}
	var count int
	if err := bob.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&count); err != nil {
		t.Fatalf("bob's grant after the restart: %v", err)
	}
	bob.Close(ctx)

	// Ten failures are allowed in a burst (one of them above), then one a
	// second.
	var refused error
	for i := 0; i < 12 && refused == nil; i++ {
		_, err := n.login(ctx, "bob", "guess")
		if sqlState(err) == "28000" {
			refused = err
		} else if sqlState(err) != "28P01" {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "too many failed logins") {
		t.Fatalf("twelve wrong passwords in a row: the last error %v, want 28000 too many failed logins", refused)
	}
	if _, err := n.login(ctx, "bob", "bob pw"); sqlState(err) != "28000" {
		t.Fatalf("the right password right after: %v, want 28000", err)
	}
	time.Sleep(1100 * time.Millisecond)
	if conn, err := n.login(ctx, "bob", "bob pw"); err != nil {
		t.Fatalf("the right password a second later: %v", err)
	} else {
		conn.Close(ctx)
	}
	n.stop()
}

// --hba-file: first match wins; reject and no matching rule are 28000 with
// PostgreSQL's words; trust lets a role in without a password.
func TestSecurityHBA(t *testing.T) {
	hba := filepath.Join(t.TempDir(), "hba.conf")
	if err := os.WriteFile(hba, []byte(`# type  database user     address       method
host    all      bob      127.0.0.1/32  reject
host    all      trusty   127.0.0.1/32  trust
host    all      all      127.0.0.1/32  scram-sha-256
`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startSecureNode(t, t.TempDir(), "pw", "--hba-file", hba)
	ctx := context.Background()
	admin, err := n.login(ctx, "mink", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	mustExec(t, admin, "CREATE ROLE bob LOGIN PASSWORD 'bob pw'")
	mustExec(t, admin, "CREATE ROLE trusty LOGIN")
	if _, err := n.login(ctx, "bob", "bob pw"); sqlState(err) != "28000" || !strings.Contains(err.Error(), `pg_hba.conf rejects connection for host "127.0.0.1", user "bob", database "mink", no encryption`) {
		t.Fatalf("bob, rejected by the rules: %v", err)
	}
	conn, err := n.login(ctx, "trusty", "")
	if err != nil {
		t.Fatalf("trusty, trusted by the rules: %v", err)
	}
	conn.Close(ctx)
	if _, err := n.login(ctx, "nobody", ""); sqlState(err) != "28P01" {
		t.Fatalf("a role that does not exist: %v, want 28P01", err)
	}
	n.stop()

	// A bad rules file stops the start with its line number.
	bad := filepath.Join(t.TempDir(), "bad.conf")
	if err := os.WriteFile(bad, []byte("host all all 127.0.0.1/32 scram-sha-256\nhots all all 0.0.0.0/0 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runMink(t, 30*time.Second, "server", "--data-dir", t.TempDir(), "--hba-file", bad)
	if code == 0 || !strings.Contains(errOut, `line 2 of configuration file`) || !strings.Contains(errOut, `"hots"`) {
		t.Fatalf("a bad --hba-file: exit %d:\n%s", code, errOut)
	}
}

// An etcd with authentication on: a node with the etcd user and password
// joins; a node without them, or with a wrong password, cannot start, and
// says why at once rather than retrying.
func TestSecurityEtcdCredentials(t *testing.T) {
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "etcd pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd auth: %v", err)
		}
	}
	pwFile := func(pw string) string {
		f := filepath.Join(t.TempDir(), "etcd-password")
		if err := os.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	n := newNode(t, nodeOpts{etcd: endpoints, extra: []string{"--etcd-user", "root", "--etcd-password-file", pwFile("etcd pw")}})
	n.start()
	n.waitHealthy()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE joined (x int)")

	for _, c := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"no credentials", nil, "requires authentication (give --etcd-user and --etcd-password-file)"},
		{"a wrong password", []string{"--etcd-user", "root", "--etcd-password-file", pwFile("guess")}, "the credentials are refused"},
	} {
		other := newNode(t, nodeOpts{etcd: endpoints, nodeID: 2, extra: append([]string{"--etcd-dial-timeout", "20s"}, c.extra...)})
		start := time.Now()
		_, errOut, code := runMink(t, 30*time.Second, other.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Fatalf("%s: exit %d:\n%s", c.name, code, errOut)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("%s: the start took %v to fail: refused credentials are not retried", c.name, took)
		}
	}
	n.stop()
}
