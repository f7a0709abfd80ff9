package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/tiering"
)

// lakePKRows reads the current lake snapshot of a primary-key table
// (id bigint, v text, n integer[, dt text]) with iceberg-go and returns its
// rows as "id|v|n|dt" by id (dt empty when the table has none). It fails on
// a key present twice.
func lakePKRows(t *testing.T, dataDir string, id catalog.TableID) map[string]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tbl, err := tiering.NewLake(store, "file://"+root).Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return out
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) int {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("lake has no column %q: %s", name, rec.Schema())
			}
			return idx[0]
		}
		ids, vs, ns := rec.Column(col("id")).(*array.Int64), rec.Column(col("v")).(*array.String), rec.Column(col("n")).(*array.Int32)
		var dts *array.String
		if idx := rec.Schema().FieldIndices("dt"); len(idx) == 1 {
			dts = rec.Column(idx[0]).(*array.String)
		}
		for i := range int(rec.NumRows()) {
			v := "NULL"
			if vs.IsValid(i) {
				v = vs.Value(i)
			}
			dt := ""
			if dts != nil {
				dt = dts.Value(i)
			}
			key := fmt.Sprintf("%d/%s", ids.Value(i), dt)
			if prev, dup := out[key]; dup {
				t.Fatalf("key %s is in the lake twice: %q", key, prev)
			}
			out[key] = fmt.Sprintf("%d|%s|%d|%s", ids.Value(i), v, ns.Value(i), dt)
		}
		rec.Release()
	}
	return out
}

// sqlPKRows is SELECT * of the same table through mink.
func sqlPKRows(t *testing.T, conn *pgx.Conn, table string, partitioned bool) map[string]string {
	t.Helper()
	dtCol := "''"
	if partitioned {
		dtCol = "dt"
	}
	rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT id, coalesce(v, 'NULL'), n, %s FROM %s", dtCol, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var (
			id    int64
			v, dt string
			n     int32
		)
		if err := rows.Scan(&id, &v, &n, &dt); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%d/%s", id, dt)] = fmt.Sprintf("%d|%s|%d|%s", id, v, n, dt)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func diffRows(lake, want map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if lake[k] != want[k] {
			fmt.Fprintf(&b, "  %s: lake %q, table %q\n", k, lake[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(lake)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  %s: lake %q, not in the table\n", k, lake[k])
		}
	}
	return b.String()
}

// TestTieringPrimaryKeyTable: primary-key tables written with pgx (inserts,
// upserts, updates, deletes) are tiered by `mink tiering run --wait`; after
// each round the lake read by iceberg-go equals SELECT * through mink, for
// an unpartitioned and a partitioned table.
func TestTieringPrimaryKeyTable(t *testing.T) {
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h")
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, v text, n integer NOT NULL DEFAULT 0) WITH (buckets = 3)")
	mustExec(t, conn, "CREATE TABLE kvp (id bigint NOT NULL, dt text NOT NULL, v text, n integer NOT NULL DEFAULT 0, PRIMARY KEY (id, dt)) PARTITION BY LIST (dt) WITH (buckets = 2)")

	steps := [][]string{
		{
			"INSERT INTO @T (id, v, n@C) SELECT i, 'v' || i, i@D FROM generate_series(1, 300) AS g(i)",
		},
		{
			"INSERT INTO @T (id, v, n@C) SELECT i, 'up' || i, 1000 + i@D FROM generate_series(250, 400) AS g(i) ON CONFLICT (@K) DO UPDATE SET v = excluded.v, n = excluded.n",
			"UPDATE @T SET v = NULL, n = n + 1 WHERE id % 7 = 0",
			"DELETE FROM @T WHERE id % 5 = 0",
		},
		{
			"DELETE FROM @T WHERE id < 100",
			"UPDATE @T SET v = 'x' || v WHERE id % 3 = 0",
			"INSERT INTO @T (id, v, n@C) VALUES (5, 'back', 5@E)",
		},
	}
	for step, stmts := range steps {
		for _, table := range []string{"kv", "kvp"} {
			part := table == "kvp"
			for _, s := range stmts {
				c, d, e, k := "", "", "", "id"
				if part {
					c, d, e, k = ", dt", ", 'day-' || (i % 3)", ", 'day-2'", "id, dt"
				}
				s = strings.NewReplacer("@T", table, "@C", c, "@D", d, "@E", e, "@K", k).Replace(s)
				mustExec(t, conn, s)
			}
			out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", table, "--wait", "--server", n.admin)
			if code != 0 || !strings.Contains(out, "done") {
				t.Fatalf("step %d: mink tiering run --table %s: exit %d: %s\n%s", step, table, code, errOut, out)
			}
			st := tableTiering(t, tieringStatus(t, n), table)
			if st.LagRows != 0 || st.Tiered != st.End || st.LastError != "" {
				t.Fatalf("step %d: status of %s: %+v", step, table, st)
			}
			want := sqlPKRows(t, conn, table, part)
			lake := lakePKRows(t, dataDir, st.ID)
			if d := diffRows(lake, want); d != "" {
				t.Fatalf("step %d: lake of %s (%d rows) differs from SELECT (%d rows):\n%s", step, table, len(lake), len(want), d)
			}
			t.Logf("step %d: %s: %d rows in the lake, changelog tiered to %d", step, table, len(lake), st.Tiered)
		}
	}
}
