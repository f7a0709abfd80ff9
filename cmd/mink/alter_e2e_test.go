package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
)

// TestAlterTableAddColumn: columns added to a log table and a primary-key
// table with rows in the lake, in the stream and in the KV tablet read as
// their DEFAULT (evaluated once) or NULL for every row stored before, and
// as written for the rows after; the same through psql's protocol (pgx),
// the Go Flight client, after tiering rounds of both widths, and after
// kill -9 and a restart (snapshot restore and changelog replay of entries
// of both widths). With the engine's mirrors and without (the lake read
// with statistics pruning on the added column).
func TestAlterTableAddColumn(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testAlterTableAddColumn(t, direct) })
	}
}

func testAlterTableAddColumn(t *testing.T, direct bool) {
	dataDir := t.TempDir()
	n := startLakeNode(t, dataDir, direct)
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
		if got := dump(t, conn, "SELECT id, msg, n, note FROM ev ORDER BY id"); got != wantEv {
			t.Fatalf("%s: ev differs\n got %.600q\nwant %.600q", stage, got, wantEv)
		}
		if got := dump(t, conn, "SELECT k, v, c FROM kv ORDER BY k"); got != wantKV {
			t.Fatalf("%s: kv differs\n got %.600q\nwant %.600q", stage, got, wantKV)
		}
		lookup(stage, "7 r7 0\n150 r150 150\n5 up5 55\n")
		var c int64
		if err := conn.QueryRow(ctx, "SELECT c FROM kv WHERE k = 7").Scan(&c); err != nil || c != 0 {
			t.Fatalf("%s: point lookup of a row stored before the column: %d, %v", stage, c, err)
		}
		if got := dump(t, conn, "SELECT count(*), sum(n) FROM ev WHERE n = 7"); got != fmt.Sprintf("150 %d\n", 150*7) {
			t.Fatalf("%s: filter on the added column: %q", stage, got)
		}
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

	// The changelog shows every record; those written before the column
	// carry its missing value.
	if got := dump(t, conn, `SELECT _change_type, c FROM "kv$changelog" WHERE k = 5 ORDER BY _offset`); got != "+I 0\n-U 0\n+U 55\n" {
		t.Fatalf("changelog of key 5: %q", got)
	}
}
