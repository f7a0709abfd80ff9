package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/client"
)

// TestAlterTableAddColumn: columns added to a log table and a primary-key
// table with rows in the lake, in the stream and in the KV tablet, as the
// Go Flight client sees them (a client that cached the table before the
// ALTER looks up keys; a scan reads stream rows of both widths), after
// tiering rounds of both widths and after kill -9 and a restart (snapshot
// restore and changelog replay of entries of both widths), when pgx reads
// every row and the changelog too. What SQL reads of the added columns
// return, with the engine's mirrors and without, is
// sqlfront/testdata/logic/alter_lake.test and alter_lake_direct.test.
func TestAlterTableAddColumn(t *testing.T) {
	dataDir := t.TempDir()
	n := startLakeNode(t, dataDir, false)
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE ev (id bigint NOT NULL, msg text) WITH (buckets = 2)")
	mustExec(t, conn, "CREATE TABLE kv (k integer PRIMARY KEY, v text) WITH (buckets = 2)")
	insertRange := func(table string, from, to int, extra func(i int) string) {
		var b strings.Builder
		fmt.Fprintf(&b, "INSERT INTO %s VALUES ", table)
		for i := from; i < to; i++ {
			if i > from {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, 'r%d'%s)", i, i, extra(i))
		}
		mustExec(t, conn, b.String())
	}
	none := func(int) string { return "" }
	insertRange("ev", 0, 100, none)
	insertRange("kv", 0, 100, none)
	tierNow(t, n, "ev")
	tierNow(t, n, "kv")
	insertRange("ev", 100, 150, none) // stream rows of the old width
	insertRange("kv", 100, 150, none)

	// A Flight client that cached the table before the ALTER.
	early, err := client.Dial(ctx, n.flightAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	lookup := func(stage string, want string) {
		t.Helper()
		b := array.NewInt32Builder(memory.DefaultAllocator)
		b.AppendValues([]int32{7, 150, 5}, nil)
		keys := b.NewArray()
		defer keys.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int32}}, nil)
		kb := array.NewRecordBatch(schema, []arrow.Array{keys}, 3)
		defer kb.Release()
		got, err := early.Lookup(ctx, "kv", kb)
		if err != nil {
			t.Fatalf("%s: lookup: %v", stage, err)
		}
		defer got.Release()
		var out strings.Builder
		for i := 0; i < int(got.NumRows()); i++ {
			for j := 0; j < int(got.NumCols()); j++ {
				if j > 0 {
					out.WriteString(" ")
				}
				out.WriteString(got.Column(j).ValueStr(i))
			}
			out.WriteString("\n")
		}
		if out.String() != want {
			t.Fatalf("%s: lookup of keys 7, 150, 5 gave %q, want %q", stage, out.String(), want)
		}
	}
	lookup("before ALTER", "7 r7\n5 r5\n")

	mustExec(t, conn, "ALTER TABLE ev ADD COLUMN n integer DEFAULT 7, ADD COLUMN note text")
	mustExec(t, conn, "ALTER TABLE kv ADD COLUMN c integer NOT NULL DEFAULT 0")
	insertRange("ev", 150, 200, func(i int) string { return fmt.Sprintf(", %d, 'x%d'", i, i) })
	insertRange("kv", 150, 200, func(i int) string { return fmt.Sprintf(", %d", i) })
	// Rows stored before the column change through it: an upsert of old
	// keys, an update of lake rows, a delete by the added column.
	mustExec(t, conn, "INSERT INTO kv VALUES (5, 'up5', 55), (120, 'up120', 1) ON CONFLICT (k) DO UPDATE SET v = excluded.v, c = kv.c + excluded.c")
	mustExec(t, conn, "UPDATE kv SET c = c + 3 WHERE k < 3")
	mustExec(t, conn, "DELETE FROM kv WHERE c = 0 AND k >= 140 AND k < 150")

	wantEv := func() string {
		var b strings.Builder
		for i := 0; i < 200; i++ {
			if i < 150 {
				fmt.Fprintf(&b, "%d r%d 7 <nil>\n", i, i)
			} else {
				fmt.Fprintf(&b, "%d r%d %d x%d\n", i, i, i, i)
			}
		}
		return b.String()
	}()
	wantKV := func() string {
		var b strings.Builder
		for i := 0; i < 200; i++ {
			switch {
			case i < 3:
				fmt.Fprintf(&b, "%d r%d 3\n", i, i)
			case i == 5:
				fmt.Fprintf(&b, "5 up5 55\n")
			case i == 120:
				fmt.Fprintf(&b, "120 up120 1\n")
			case i >= 140 && i < 150:
			case i < 150:
				fmt.Fprintf(&b, "%d r%d 0\n", i, i)
			default:
				fmt.Fprintf(&b, "%d r%d %d\n", i, i, i)
			}
		}
		return b.String()
	}()
	check := func(stage string) {
		t.Helper()
		lookup(stage, "7 r7 0\n150 r150 150\n5 up5 55\n")
		// The Go client reads the stream rows of both widths over Flight.
		cl, err := client.Dial(ctx, n.flightAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rd, err := cl.Scan(ctx, "ev", client.ScanOptions{Columns: []string{"id", "n"}})
		if err != nil {
			t.Fatalf("%s: flight scan: %v", stage, err)
		}
		defer rd.Release()
		rows := 0
		for rd.Next() {
			rec := rd.RecordBatch()
			ids, ns := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int32)
			for i := 0; i < ids.Len(); i++ {
				want := int32(7)
				if ids.Value(i) >= 150 {
					want = int32(ids.Value(i))
				}
				if ns.IsNull(i) || ns.Value(i) != want {
					t.Fatalf("%s: flight: id %d has n %v, want %d", stage, ids.Value(i), ns.ValueStr(i), want)
				}
				rows++
			}
		}
		if err := rd.Err(); err != nil || rows == 0 {
			t.Fatalf("%s: flight scan: %d rows, %v", stage, rows, err)
		}
	}
	check("after ALTER")
	tierNow(t, n, "ev")
	tierNow(t, n, "kv")
	check("after tiering both widths")
	n.kill()
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	check("after kill -9 and restart")
	if got := dump(t, conn, "SELECT id, msg, n, note FROM ev ORDER BY id"); got != wantEv {
		t.Fatalf("after kill -9 and restart: ev differs\n got %.600q\nwant %.600q", got, wantEv)
	}
	if got := dump(t, conn, "SELECT k, v, c FROM kv ORDER BY k"); got != wantKV {
		t.Fatalf("after kill -9 and restart: kv differs\n got %.600q\nwant %.600q", got, wantKV)
	}

	// The changelog shows every record; those written before the column
	// carry its missing value.
	if got := dump(t, conn, `SELECT _change_type, c FROM "kv$changelog" WHERE k = 5 ORDER BY _offset`); got != "+I 0\n-U 0\n+U 55\n" {
		t.Fatalf("changelog of key 5: %q", got)
	}
}

// TestAlterTableAddColumnCluster: ADD COLUMN on one node of three while
// clients on the other two keep writing a log table and a primary-key
// table (six buckets each, led by all three nodes). Writers use the new
// column once their node knows it; rows written without it, before the
// ALTER or by a node that had not applied it yet, read its DEFAULT; the
// test ends once both writers use the column in both tables. Every
// acknowledged row is there, once, with the right value, read on every
// node.
func TestAlterTableAddColumnCluster(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	ctx := context.Background()
	setup, err := c.nodes[0].pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE ev (id bigint NOT NULL, w integer NOT NULL) WITH (buckets = 6)",
		"CREATE TABLE kv (id bigint PRIMARY KEY, w integer NOT NULL) WITH (buckets = 6)",
	} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	c.waitServed(c.nodes[0], "ev", 60*time.Second)
	c.waitServed(c.nodes[0], "kv", 60*time.Second)

	// Each writer inserts ids w, w+2, w+4, … into both tables; an id
	// written with the new column gets tag = id. done[table] lists the
	// acknowledged ids and whether they carried the column.
	type written struct {
		id     int64
		tagged bool
	}
	var mu sync.Mutex
	done := map[string][]written{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.nodes[1+w].pg(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			tagged := map[string]bool{}
			// insert writes id into table, with the column once the
			// node knows it.
			insert := func(ctx context.Context, table string, id int64) error {
				_, err := conn.Exec(ctx, "INSERT INTO "+table+" (id, w, tag) VALUES ($1, $2, $1)", id, w)
				var pgErr *pgconn.PgError
				if !tagged[table] && errors.As(err, &pgErr) && pgErr.Code == "42703" {
					// This node does not know the column yet.
					_, err = conn.Exec(ctx, "INSERT INTO "+table+" (id, w) VALUES ($1, $2)", id, w)
				} else if err == nil {
					tagged[table] = true
				}
				if err != nil {
					return fmt.Errorf("writer %d, %s id %d: %w", w, table, id, err)
				}
				mu.Lock()
				done[table] = append(done[table], written{id, tagged[table]})
				mu.Unlock()
				return nil
			}
			for id := int64(w); ; id += 2 {
				select {
				case <-stop:
					return
				default:
				}
				// A statement that hangs fails the test (and keeps the
				// nodes' logs with MINK_E2E_LOGS).
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := insert(ctx, "ev", id)
				if err == nil {
					err = insert(ctx, "kv", id)
				}
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// wrote reports whether every writer has n acknowledged rows in each
	// table, tagged ones only with tagged.
	wrote := func(n int, tagged bool) func() bool {
		return func() bool {
			select {
			case err := <-errs:
				errs <- err
				return true // the writer's error fails the test below
			default:
			}
			mu.Lock()
			defer mu.Unlock()
			for _, table := range []string{"ev", "kv"} {
				var per [2]int
				for _, x := range done[table] {
					if !tagged || x.tagged {
						per[x.id%2]++
					}
				}
				if per[0] < n || per[1] < n {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 30*time.Second, "both writers writing both tables", wrote(50, false))
	for _, q := range []string{"ALTER TABLE ev ADD COLUMN tag bigint DEFAULT -1", "ALTER TABLE kv ADD COLUMN tag bigint DEFAULT -1"} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "both writers using the added column in both tables", wrote(50, true))
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	want := map[string]map[int64]int64{}
	tagged := 0
	for table, ws := range done {
		want[table] = map[int64]int64{}
		for _, x := range ws {
			want[table][x.id] = -1
			if x.tagged {
				want[table][x.id] = x.id
				tagged++
			}
		}
	}
	if rows := len(want["ev"]) + len(want["kv"]); tagged == 0 || tagged == rows {
		t.Fatalf("%d of %d rows written with the new column: the ALTER did not happen while writing", tagged, rows)
	}
	for i, n := range c.nodes {
		conn, err := n.pg(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"ev", "kv"} {
			rows, err := conn.Query(ctx, "SELECT id, tag FROM "+table)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int64]int64{}
			for rows.Next() {
				var id, tag int64
				if err := rows.Scan(&id, &tag); err != nil {
					t.Fatal(err)
				}
				if _, dup := got[id]; dup {
					t.Fatalf("node %d: %s has id %d twice", i+1, table, id)
				}
				got[id] = tag
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for id, tag := range want[table] {
				if g, ok := got[id]; !ok || g != tag {
					t.Fatalf("node %d: %s id %d: tag %d (present %v), want %d", i+1, table, id, g, ok, tag)
				}
			}
			if len(got) != len(want[table]) {
				t.Fatalf("node %d: %s has %d rows, %d acknowledged", i+1, table, len(got), len(want[table]))
			}
		}
		conn.Close(ctx)
	}
	t.Logf("%d rows, %d written with the added column", len(want["ev"])+len(want["kv"]), tagged)
}
