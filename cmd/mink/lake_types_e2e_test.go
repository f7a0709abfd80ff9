package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/tiering"
)

// ivVal is an interval as inserted: PostgreSQL's three fields.
type ivVal struct {
	null   bool
	months int32
	days   int32
	micros int64
}

func (v ivVal) literal() string {
	if v.null {
		return "NULL"
	}
	return fmt.Sprintf("'%d months %d days %d microseconds'", v.months, v.days, v.micros)
}

func (v ivVal) String() string {
	if v.null {
		return "NULL"
	}
	return fmt.Sprintf("{%d mon %d d %d µs}", v.months, v.days, v.micros)
}

// ivEdges are intervals at the limits mink stores (months and days are
// int32; the time part is nanoseconds in an int64), with mixed signs.
var ivEdges = []ivVal{
	{months: 2147483647, days: 2147483647, micros: 9223372036854775},
	{months: -2147483648, days: -2147483648, micros: -9223372036854775},
	{months: 1, days: -2, micros: 10_800_000_001},
	{micros: -1},
	{},
	{null: true},
}

func randomInterval(rng *rand.Rand, nullable bool) ivVal {
	if nullable && rng.IntN(6) == 0 {
		return ivVal{null: true}
	}
	return ivVal{months: rng.Int32N(2401) - 1200, days: rng.Int32N(801) - 400, micros: rng.Int64N(2e11) - 1e11}
}

// lakeTypeColumn is a column of the e2e types table with the literals its
// rows take: edges first, then random ones.
type lakeTypeColumn struct {
	name, typ string
	edges     []string
	random    func(rng *rand.Rand) string
}

var lakeTypeColumns = []lakeTypeColumn{
	{"f", "double precision", []string{"'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "1e308", "4.9e-324"},
		func(rng *rand.Rand) string { return fmt.Sprintf("%g", rng.NormFloat64()*1e6) }},
	{"r", "real", []string{"'NaN'", "'-Infinity'", "'-0'", "3.4e38"},
		func(rng *rand.Rand) string { return fmt.Sprintf("%g", float32(rng.NormFloat64()*1e3)) }},
	{"n", "numeric", []string{"9999999999999999999999999999.9999999999", "-0.0000000001"},
		func(rng *rand.Rand) string { return fmt.Sprintf("%d.%010d", rng.Int64N(1e15)-5e14, rng.Int64N(1e10)) }},
	{"n38", "numeric(38,0)", []string{"99999999999999999999999999999999999999", "-99999999999999999999999999999999999999"},
		func(rng *rand.Rand) string { return fmt.Sprint(rng.Int64()) }},
	{"n2", "numeric(12,2)", []string{"9999999999.99", "-0.01"},
		func(rng *rand.Rand) string { return fmt.Sprintf("%d.%02d", rng.Int64N(1e9), rng.IntN(100)) }},
	{"ts", "timestamp", []string{"'infinity'", "'-infinity'", "'290000-12-31 23:59:59.999999'", "'1000-01-01'"},
		func(rng *rand.Rand) string {
			return "'" + time.UnixMicro(rng.Int64N(4e15)-1e15).UTC().Format("2006-01-02 15:04:05.999999") + "'"
		}},
	{"tz", "timestamptz", []string{"'infinity'", "'-infinity'", "'0001-01-01 00:00:00+00'"},
		func(rng *rand.Rand) string {
			return "'" + time.UnixMicro(rng.Int64N(4e15)-1e15).UTC().Format("2006-01-02 15:04:05.999999") + "+00'"
		}},
	{"d", "date", []string{"'infinity'", "'-infinity'", "'5874897-12-31'", "'1970-01-01'"},
		func(rng *rand.Rand) string {
			return "'" + time.Unix(rng.Int64N(2e11)-1e11, 0).UTC().Format("2006-01-02") + "'"
		}},
	{"t", "time", []string{"'24:00:00'", "'00:00:00'", "'23:59:59.999999'"},
		func(rng *rand.Rand) string {
			us := rng.Int64N(86_400_000_000)
			return fmt.Sprintf("'%02d:%02d:%02d.%06d'", us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000)
		}},
	{"v", "varchar(5)", []string{"''", "'ü日🦆'", "'a''b\\'"},
		func(rng *rand.Rand) string { return fmt.Sprintf("'v%d'", rng.IntN(1000)) }},
	{"c", "char(3)", []string{"'x'", "''"},
		func(rng *rand.Rand) string { return fmt.Sprintf("'%d'", rng.IntN(1000)) }},
	{"tx", "text", []string{"''", "'\\N'", "'tab\there'"},
		func(rng *rand.Rand) string { return fmt.Sprintf("'text %d é'", rng.Int64()) }},
	{"j", "json", []string{"'{}'", "'[1, 2.5e10, null, \"é\"]'", "'null'"},
		func(rng *rand.Rand) string { return fmt.Sprintf(`'{"k": %d}'`, rng.Int64()) }},
	{"jb", "jsonb", []string{`'{"b": 1, "a": [true, {"c": null}]}'`, "'[]'"},
		func(rng *rand.Rand) string { return fmt.Sprintf(`'{"z": %d, "a": "x"}'`, rng.IntN(1e6)) }},
	{"b", "bytea", []string{"'\\x'", "'\\x00ff80'"},
		func(rng *rand.Rand) string { return fmt.Sprintf("'\\x%016x'", rng.Uint64()) }},
	{"u", "uuid", []string{"'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"},
		func(rng *rand.Rand) string {
			return fmt.Sprintf("'%08x-%04x-4%03x-8%03x-%012x'", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Int64N(1<<48))
		}},
	{"ok", "boolean", []string{"true", "false"},
		func(rng *rand.Rand) string { return fmt.Sprint(rng.IntN(2) == 0) }},
	{"s", "smallint", []string{"-32768", "32767"},
		func(rng *rand.Rand) string { return fmt.Sprint(rng.IntN(65536) - 32768) }},
	{"i", "integer", []string{"-2147483648", "2147483647"},
		func(rng *rand.Rand) string { return fmt.Sprint(rng.Int32()) }},
	{"big", "bigint", []string{"-9223372036854775808", "9223372036854775807"},
		func(rng *rand.Rand) string { return fmt.Sprint(rng.Int64()) }},
}

// insertTypedRows inserts rows ids [from, to) into lt (id, iv, ivn, the
// lakeTypeColumns) and records their intervals in model.
func insertTypedRows(t *testing.T, conn *pgx.Conn, rng *rand.Rand, from, to int, model map[int64][2]ivVal) {
	t.Helper()
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			mustExec(t, conn, b.String())
			b.Reset()
		}
	}
	for id := from; id < to; id++ {
		iv, ivn := randomInterval(rng, true), randomInterval(rng, false)
		if id < len(ivEdges) {
			iv = ivEdges[id]
		}
		if k := len(ivEdges) - 2 - id; k >= 0 { // the non-NULL edges, in reverse
			ivn = ivEdges[k]
		}
		model[int64(id)] = [2]ivVal{iv, ivn}
		if b.Len() == 0 {
			b.WriteString("INSERT INTO lt VALUES ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, %s, %s", id, iv.literal(), ivn.literal())
		for _, c := range lakeTypeColumns {
			v := "NULL"
			switch {
			case id < len(c.edges):
				v = c.edges[id]
			case rng.IntN(6) != 0:
				v = c.random(rng)
			}
			fmt.Fprintf(&b, ", %s", v)
		}
		b.WriteString(")")
		if id%50 == 49 {
			flush()
		}
	}
	flush()
}

// checkIntervals compares the intervals pgx reads from query (id and one
// or two interval columns) with model.
func checkIntervals(t *testing.T, conn *pgx.Conn, stage, query string, model map[int64][2]ivVal) {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %s: %v", stage, query, err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var id int64
		var got [2]pgtype.Interval
		if err := rows.Scan(&id, &got[0], &got[1]); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		seen++
		want, ok := model[id]
		if !ok {
			t.Errorf("%s: row %d was not inserted (or was deleted)", stage, id)
			continue
		}
		for i, g := range got {
			gv := ivVal{null: !g.Valid, months: g.Months, days: g.Days, micros: g.Microseconds}
			if gv != want[i] {
				t.Errorf("%s: row %d interval %d: pgx reads %s, inserted %s", stage, id, i, gv, want[i])
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	if seen != len(model) {
		t.Errorf("%s: %d rows, want %d", stage, seen, len(model))
	}
}

// lakeIntervals reads the current lake snapshot of a table with iceberg-go
// and returns the (iv, ivn) intervals of every row by id, read from the
// Iceberg structs (months, days, nanoseconds) as another engine sees them.
func lakeIntervals(t *testing.T, dataDir string, id catalog.TableID) map[int64][2]ivVal {
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
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		t.Fatalf("lake of table %d: %v (table %v)", id, err, tbl)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][2]ivVal{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("lake has no column %q: %s", name, rec.Schema())
			}
			return rec.Column(idx[0])
		}
		ids := col("id").(*array.Int64)
		var structs [2]*array.Struct
		for i, name := range []string{"iv", "ivn"} {
			st, ok := col(name).(*array.Struct)
			if !ok {
				t.Fatalf("lake column %s is %s, not a struct", name, col(name).DataType())
			}
			structs[i] = st
		}
		for r := range int(rec.NumRows()) {
			var v [2]ivVal
			for i, st := range structs {
				if st.IsNull(r) {
					v[i] = ivVal{null: true}
					continue
				}
				typ := st.DataType().(*arrow.StructType)
				field := func(name string) arrow.Array {
					idx, ok := typ.FieldIdx(name)
					if !ok {
						t.Fatalf("interval struct %s has no field %s", typ, name)
					}
					return st.Field(idx)
				}
				nanos := field("nanoseconds").(*array.Int64).Value(r)
				if nanos%1000 != 0 {
					t.Errorf("row %d: lake interval has %d ns, not whole microseconds", ids.Value(r), nanos)
				}
				v[i] = ivVal{months: field("months").(*array.Int32).Value(r), days: field("days").(*array.Int32).Value(r), micros: nanos / 1000}
			}
			if _, dup := out[ids.Value(r)]; dup {
				t.Fatalf("row %d is in the lake twice", ids.Value(r))
			}
			out[ids.Value(r)] = v
		}
		rec.Release()
	}
	return out
}

// firstDiff returns the first line in which two dumps differ.
func firstDiff(got, want string) (string, string) {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return gl, wl
		}
	}
	return "", ""
}

func equalIntervals(t *testing.T, what string, got, want map[int64][2]ivVal) {
	t.Helper()
	for id, w := range want {
		if g, ok := got[id]; !ok {
			t.Errorf("%s: row %d missing", what, id)
		} else if g != w {
			t.Errorf("%s: row %d: %v, inserted %v", what, id, g, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: row %d is not in the table", what, id)
		}
	}
}

// TestLakeTypesE2E: a log table with interval columns (nullable and NOT
// NULL) and a column of every other type, filled with edge values
// (infinities, NaN, -0, numeric's limits, 24:00:00, the largest
// intervals, mixed signs), NULLs and seeded random values, is tiered and
// its streams trimmed by log_retention, so that its rows come from the
// lake. pgx then reads every value as before tiering (through the engine's
// mirror, filled from the lake, and through the direct read; again after
// a restart), the intervals equal to what was inserted; iceberg-go reads
// the same intervals from the lake. A primary-key table with interval
// non-key columns, after updates and deletes, has the same intervals in
// the lake as through pgx.
func TestLakeTypesE2E(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 2))
			dataDir := t.TempDir()
			n := startLakeNode(t, dataDir, direct)
			conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
			ctx := context.Background()

			var cols strings.Builder
			names := []string{"id", "iv", "ivn"}
			for _, c := range lakeTypeColumns {
				fmt.Fprintf(&cols, ", %s %s", c.name, c.typ)
				names = append(names, c.name)
			}
			mustExec(t, conn, "CREATE TABLE lt (id bigint NOT NULL, iv interval, ivn interval NOT NULL"+cols.String()+
				") WITH (buckets = 1, log_retention = '1s')")
			model := map[int64][2]ivVal{}
			insertTypedRows(t, conn, rng, 0, 200, model)
			all := "SELECT " + strings.Join(names, ", ") + " FROM lt WHERE id < 200 ORDER BY id"
			want := dump(t, conn, all)
			checkIntervals(t, conn, "before tiering", "SELECT id, iv, ivn FROM lt", model)

			mustExec(t, conn, "CREATE TABLE pt (id bigint PRIMARY KEY, iv interval, ivn interval NOT NULL, tz timestamptz) WITH (buckets = 2)")
			pkModel := map[int64][2]ivVal{}
			var b strings.Builder
			b.WriteString("INSERT INTO pt VALUES ")
			for id := range 100 {
				v := [2]ivVal{randomInterval(rng, true), randomInterval(rng, false)}
				if id < len(ivEdges) {
					v[0] = ivEdges[id]
				}
				pkModel[int64(id)] = v
				if id > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(%d, %s, %s, now())", id, v[0].literal(), v[1].literal())
			}
			mustExec(t, conn, b.String())
			for id := int64(0); id < 100; id += 3 {
				v := [2]ivVal{randomInterval(rng, true), randomInterval(rng, false)}
				mustExec(t, conn, fmt.Sprintf("UPDATE pt SET iv = %s, ivn = %s WHERE id = %d", v[0].literal(), v[1].literal(), id))
				pkModel[id] = v
			}
			mustExec(t, conn, "DELETE FROM pt WHERE id % 7 = 1")
			for id := range pkModel {
				if id%7 == 1 {
					delete(pkModel, id)
				}
			}
			checkIntervals(t, conn, "primary-key table", "SELECT id, iv, ivn FROM pt", pkModel)
			wantPK := dump(t, conn, "SELECT id, iv, ivn, tz FROM pt ORDER BY id")

			waitFor(t, 30*time.Second, "200 rows committed", func() bool {
				return tableTiering(t, tieringStatus(t, n), "lt").End == 200
			})
			tierNow(t, n, "lt")
			tierNow(t, n, "pt")
			waitFor(t, 30*time.Second, "the stream of lt trimmed to its tiered offset", func() bool {
				bs := tableBuckets(t, n, "lt")
				return len(bs) == 1 && bs[0].Start == 200 && bs[0].End == 200
			})
			st := tieringStatus(t, n)
			equalIntervals(t, "iceberg-go, lt", lakeIntervals(t, dataDir, tableTiering(t, st, "lt").ID), model)
			equalIntervals(t, "iceberg-go, pt", lakeIntervals(t, dataDir, tableTiering(t, st, "pt").ID), pkModel)

			insertTypedRows(t, conn, rng, 200, 230, model) // stream rows above the lake
			check := func(stage string) {
				t.Helper()
				if got := dump(t, conn, all); got != want {
					g, w := firstDiff(got, want)
					t.Fatalf("%s: rows from the lake differ from the rows read before tiering; first difference:\n got %s\nwant %s", stage, g, w)
				}
				checkIntervals(t, conn, stage, "SELECT id, iv, ivn FROM lt", model)
				var count int64
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM lt WHERE iv IS NULL").Scan(&count); err != nil {
					t.Fatalf("%s: %v", stage, err)
				}
				nulls := 0
				for _, v := range model {
					if v[0].null {
						nulls++
					}
				}
				if count != int64(nulls) {
					t.Errorf("%s: %d rows with iv IS NULL, want %d", stage, count, nulls)
				}
				if got := dump(t, conn, "SELECT id, iv, ivn, tz FROM pt ORDER BY id"); got != wantPK {
					g, w := firstDiff(got, wantPK)
					t.Fatalf("%s: primary-key table differs; first difference:\n got %s\nwant %s", stage, g, w)
				}
			}
			check("after the trim")
			check("again after the trim")
			conn.Close(ctx)
			n.stop()
			n.start()
			n.waitHealthy()
			n.waitSQL()
			conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
			check("after a restart")
		})
	}
}
