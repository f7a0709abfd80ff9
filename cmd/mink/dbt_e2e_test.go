package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dbtPeerRows are the rows of test/dbt's tables after `dbt build` on
// PostgreSQL 15 (dbt-postgres 1.9.0), as psql -At prints them ordered by
// the first column. The project ran alike on PostgreSQL and on mink when
// this was written; a change of the project needs a new PostgreSQL run.
var dbtPeerRows = map[string][]string{
	"customers": {
		"1|Ann|gold|2024-01-05", "2|Bob|silver|2024-02-11", "3|Cid|gold|2024-03-20", "4|Dee|bronze|2024-03-21"},
	"orders": {
		"100|1|19.99|2024-04-01 10:00:00", "101|1|5.00|2024-04-02 11:30:00", "102|2|42.50|2024-04-02 12:00:00",
		"103|3|7.25|2024-04-03 09:15:00", "104|3|12.75|2024-04-05 18:45:00", "105|4|3.10|2024-04-06 08:00:00"},
	"gold_customers": {"1|Ann|2024-01-05", "3|Cid|2024-03-20"},
	"customer_totals": {
		"1|Ann|gold|2|24.99|2024-04-02 11:30:00", "2|Bob|silver|1|42.50|2024-04-02 12:00:00",
		"3|Cid|gold|2|20.00|2024-04-05 18:45:00", "4|Dee|bronze|1|3.10|2024-04-06 08:00:00"},
	"tier_summary": {"bronze|1|3.10", "gold|2|44.99", "silver|1|42.50"},
	// A view model, and a table model that reads it.
	"big_orders":       {"100|1|19.99", "102|2|42.50", "104|3|12.75"},
	"big_order_counts": {"1|1", "2|1", "3|1"},
	// Models in a custom schema (dbt's public_marts): a table model over a
	// model of public, and a view model over a view model of public.
	"public_marts.gold_revenue":           {"gold|44.99"},
	"public_marts.big_orders_by_customer": {"1|1", "2|1", "3|1"},
	// The incremental model after the first run: the orders.
	"orders_log": {
		"100|1|19.99|2024-04-01 10:00:00", "101|1|5.00|2024-04-02 11:30:00", "102|2|42.50|2024-04-02 12:00:00",
		"103|3|7.25|2024-04-03 09:15:00", "104|3|12.75|2024-04-05 18:45:00", "105|4|3.10|2024-04-06 08:00:00"},
}

// dbtPeerSecondRun are the tables whose rows the second run changes: the
// incremental model's run appends the newest order again (through a
// temporary table and INSERT … SELECT).
var dbtPeerSecondRun = map[string][]string{
	"orders_log": {
		"100|1|19.99|2024-04-01 10:00:00", "101|1|5.00|2024-04-02 11:30:00", "102|2|42.50|2024-04-02 12:00:00",
		"103|3|7.25|2024-04-03 09:15:00", "104|3|12.75|2024-04-05 18:45:00", "105|4|3.10|2024-04-06 08:00:00",
		"105|4|3.10|2024-04-06 08:00:00"},
}

// startToolProject checks that a third-party tool is installed (running
// tool with check), starts a node, and copies the tool's project from src
// to a temporary directory; it returns the node, the project's directory
// and the node's Postgres port.
func startToolProject(t *testing.T, what, src, tool string, check ...string) (n *node, project, port string) {
	t.Helper()
	if out, err := exec.Command(tool, check...).CombinedOutput(); err != nil {
		t.Fatalf("%s is not installed at %s (%v: %s): %s", what, tool, err, out, installHint)
	}
	n = newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	project = t.TempDir()
	if err := os.CopyFS(project, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(n.pgAddr())
	return n, project, port
}

// dbt-postgres runs test/dbt unmodified against a node, twice (with
// models in a custom schema, which dbt creates; the
// second run reloads the seeds with TRUNCATE and INSERT in a transaction
// block, swaps each table model in with CREATE TABLE … AS and renames,
// the view model with CREATE VIEW and renames, and runs the incremental
// model through a temporary table), and the tables and the
// view hold what PostgreSQL's hold after the same project. Its data tests run on mink: a duplicate key makes `dbt test`
// fail.
func TestDbtProject(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	dbt := filepath.Join(kafkaClientCache(t), "dbt-venv", "bin", "dbt")
	n, project, port := startToolProject(t, "dbt", "../../test/dbt", dbt, "--version")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(dbt, append(args, "--profiles-dir", project, "--project-dir", project, "--no-use-colors")...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "MINK_DBT_PORT="+port, "DBT_SEND_ANONYMOUS_USAGE_STATS=false")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for i := 1; i <= 2; i++ {
		out, err := run("build")
		if err != nil || !strings.Contains(out, "PASS=20 WARN=0 ERROR=0 SKIP=0 TOTAL=20") {
			t.Fatalf("dbt build, run %d: %v\n%s", i, err, out)
		}
		conn, err := n.pg(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for table, want := range dbtPeerRows {
			if second, ok := dbtPeerSecondRun[table]; ok && i == 2 {
				want = second
			}
			// The simple protocol: every value in its text form, as psql
			// prints it.
			res, err := conn.PgConn().Exec(context.Background(), "SELECT * FROM "+table).ReadAll()
			if err != nil {
				t.Fatalf("run %d: %s: %v", i, table, err)
			}
			var got []string
			for _, row := range res[0].Rows {
				vals := make([]string, len(row))
				for j, v := range row {
					vals[j] = string(v)
				}
				got = append(got, strings.Join(vals, "|"))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("run %d: %s\n got %q\nwant %q", i, table, got, want)
			}
		}
		var leftovers int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_class WHERE relname LIKE '%dbt%'").Scan(&leftovers); err != nil || leftovers != 0 {
			t.Errorf("run %d: %d tables of dbt's left (%v)", i, leftovers, err)
		}
		conn.Close(context.Background())
	}
	conn, err := n.pg(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "INSERT INTO gold_customers VALUES (1, 'Ann', '2024-01-05')"); err != nil {
		t.Fatal(err)
	}
	out, err := run("test", "--select", "gold_customers")
	if err == nil || !strings.Contains(out, "FAIL 1 unique_gold_customers_id") || !strings.Contains(out, "PASS=2 WARN=0 ERROR=1") {
		t.Fatalf("dbt test with a duplicate id: %v; want exactly the unique test to fail\n%s", err, out)
	}
}
