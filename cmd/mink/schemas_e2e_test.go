package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Schemas across a three-node cluster: a node killed with SIGKILL before
// a schema is renamed, a table moved to another schema, a view made in
// one and a schema dropped with CASCADE sees all of it when it comes
// back: the relations under their new names, their rows, the view over
// the moved table, 42P01 and 3F000 for what is gone, and the catalogs
// listing the schemas; a write it takes under a new name reads back on
// another node.
func TestSchemasCluster(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	ctx := context.Background()
	first, err := c.nodes[0].pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	for _, q := range []string{
		"CREATE SCHEMA staging",
		"CREATE SCHEMA scratch",
		"CREATE TABLE staging.ev (id bigint, v text) WITH (buckets = 3)",
		"CREATE TABLE ev (id bigint, v text) WITH (buckets = 1)",
		"CREATE TABLE scratch.tmp (id bigint) WITH (buckets = 1)",
	} {
		if _, err := first.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c.waitServed(c.nodes[0], "staging.ev", 60*time.Second)
	c.waitServed(c.nodes[0], "ev", 60*time.Second)
	c.waitServed(c.nodes[0], "scratch.tmp", 60*time.Second)
	for _, q := range []string{
		"INSERT INTO staging.ev SELECT i, 'v' || i FROM generate_series(1, 60) AS g(i)",
		"INSERT INTO ev VALUES (1000, 'public')",
		"INSERT INTO scratch.tmp VALUES (1)",
	} {
		if _, err := first.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	down := c.nodes[2]
	down.kill()
	for _, q := range []string{
		"ALTER SCHEMA staging RENAME TO marts",
		"CREATE SCHEMA raw",
		"ALTER TABLE marts.ev SET SCHEMA raw",
		"CREATE VIEW marts.ev_stats AS SELECT count(*) AS n, sum(id) AS total FROM raw.ev",
		"DROP SCHEMA scratch CASCADE",
	} {
		if _, err := first.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// scalar is what node n answers for a one-value query, or "".
	scalar := func(n *node, q string) string {
		conn, err := n.pg(ctx)
		if err != nil {
			return ""
		}
		defer conn.Close(ctx)
		var got string
		if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
			return ""
		}
		return got
	}
	const stats = "SELECT n || ' ' || total FROM marts.ev_stats"
	waitFor(t, 30*time.Second, "node 2 reads raw.ev through marts.ev_stats", func() bool {
		return scalar(c.nodes[1], stats) == "60 1830"
	})
	c.restart(down)
	down.waitHealthy()
	waitFor(t, 60*time.Second, "the restarted node 3 reads raw.ev through marts.ev_stats", func() bool {
		return scalar(down, stats) == "60 1830"
	})
	conn, err := down.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if got := scalar(down, "SELECT count(*)::text || ' ' || min(v) FROM ev"); got != "1 public" {
		t.Errorf("node 3: public.ev is %q, want its one row", got)
	}
	if got := scalar(down, "SELECT string_agg(nspname, ',' ORDER BY nspname) FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' AND nspname <> 'information_schema'"); got != "marts,public,raw" {
		t.Errorf("node 3: schemas %q, want marts,public,raw", got)
	}
	if got := scalar(down, "SELECT string_agg(table_schema || '.' || table_name, ',' ORDER BY table_schema, table_name) FROM information_schema.tables WHERE table_schema IN ('marts', 'raw', 'public')"); got != "marts.ev_stats,public.ev,raw.ev" {
		t.Errorf("node 3: relations %q, want marts.ev_stats,public.ev,raw.ev", got)
	}
	for q, code := range map[string]string{
		"SELECT * FROM staging.ev":           "42P01",
		"SELECT * FROM marts.ev":             "42P01",
		"INSERT INTO scratch.tmp VALUES 2":   "42601",
		"INSERT INTO scratch.tmp VALUES (2)": "42P01",
		"TRUNCATE scratch.tmp":               "3F000",
		"CREATE TABLE staging.x (a int)":     "3F000",
		"CREATE SCHEMA raw":                  "42P06",
	} {
		var pgErr *pgconn.PgError
		if _, err := conn.Exec(ctx, q); !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("node 3: %s: %v, want SQLSTATE %s", q, err, code)
		}
	}
	// A write node 3 takes under the new name reads back on node 1.
	if _, err := conn.Exec(ctx, "INSERT INTO raw.ev VALUES (61, 'v61')"); err != nil {
		t.Fatalf("node 3: insert into raw.ev: %v", err)
	}
	waitFor(t, 30*time.Second, "node 1 reads node 3's write to raw.ev", func() bool {
		return scalar(c.nodes[0], stats) == "61 1891"
	})
}
