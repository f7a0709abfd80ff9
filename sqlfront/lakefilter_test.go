package sqlfront_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/sqlfront"
)

// tierNow runs a tiering round of table on n and waits for it.
func tierNow(t *testing.T, n *minktest.Node, table string) {
	t.Helper()
	resp, err := http.Post("http://"+n.Server.AdminAddr()+"/api/v1/tiering/run?table="+table+"&wait=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"committed"`) && !strings.Contains(string(body), `"done"`) {
		t.Fatalf("tiering run of %s: %s %s", table, resp.Status, body)
	}
	if strings.Contains(string(body), `"error"`) {
		t.Fatalf("tiering run of %s: %s", table, body)
	}
}

// filterRows returns the ids a query returns, in order.
func filterRows(t *testing.T, conn *pgx.Conn, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", sql, args, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("%s %v: %v", sql, args, err)
	}
	return ids
}

// TestLakeFilterQueries: over a table tiered in three rounds (plus rows
// only in the streams), random selective WHEREs with constants and
// parameters, on every column type statistics pruning uses and some it
// does not, return exactly the rows the same statement returns without
// pruning; the lake reads skip files.
func TestLakeFilterQueries(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MINK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MINK_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with MINK_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	front := n.Server.SQLFrontend().(*sqlfront.Frontend)
	front.SetMirrors(false)
	defer sqlfront.SetLakeFilters(true)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE TABLE ev (id bigint NOT NULL, i integer, sm smallint, t text, v varchar(12), d date,
		ts timestamp, tz timestamptz, ok boolean, f double precision) WITH (buckets = 2)`)
	const perRound = 150
	day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	next := 0
	null := func(p int) bool { return rng.IntN(100) < p }
	insert := func() {
		var vals []string
		for range perRound {
			id := next
			next++
			lit := func(nullPct int, s string) string {
				if null(nullPct) {
					return "NULL"
				}
				return s
			}
			vals = append(vals, fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, %s)", id,
				lit(5, fmt.Sprint(id*3-200)),
				lit(5, fmt.Sprint(id%50-25)),
				lit(10, fmt.Sprintf("'k%05d'", id)),
				lit(20, []string{"'alpha'", "'beta'", "'Gamma'", "''", "'zeta z'"}[rng.IntN(5)]),
				lit(5, day0.AddDate(0, 0, id/7).Format("'2006-01-02'")),
				lit(5, day0.Add(time.Duration(id)*time.Minute).Format("'2006-01-02 15:04:05'")),
				lit(5, day0.Add(time.Duration(id*7)*time.Second).Format("'2006-01-02 15:04:05+00'")),
				lit(10, []string{"true", "false"}[rng.IntN(2)]),
				lit(10, fmt.Sprintf("%d.5", id%9)),
			))
		}
		if _, err := conn.Exec(ctx, "INSERT INTO ev VALUES "+strings.Join(vals, ", ")); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	for range 3 {
		insert()
		tierNow(t, n, "ev")
	}
	insert() // stays in the streams
	total := next

	// A value near the data's range, boundaries (min, max) often.
	intAround := func(lo, hi int) int {
		switch rng.IntN(5) {
		case 0:
			return lo
		case 1:
			return hi
		}
		return lo - 5 + rng.IntN(hi-lo+10)
	}
	type cond struct {
		sql  string
		args []any
	}
	gen := func(argN *int) cond {
		param := func(v any) string {
			*argN++
			return fmt.Sprintf("$%d", *argN)
		}
		usesParam := rng.IntN(3) == 0
		value := func(text string, v any) (string, []any) {
			if usesParam {
				return param(v), []any{v}
			}
			return text, nil
		}
		ops := []string{"=", "<", "<=", ">", ">="}
		op := ops[rng.IntN(len(ops))]
		switch rng.IntN(14) {
		case 0:
			x := intAround(0, total-1)
			s, a := value(fmt.Sprint(x), int64(x))
			return cond{"id " + op + " " + s, a}
		case 1:
			x := intAround(-200, (total-1)*3-200)
			s, a := value(fmt.Sprintf("'%d'", x), int32(x))
			if rng.IntN(2) == 0 {
				return cond{fmt.Sprintf("%s %s i", s, op), a} // the column on the right
			}
			return cond{"i " + op + " " + s, a}
		case 2:
			x := intAround(-25, 24)
			s, a := value(fmt.Sprint(x), int16(x))
			return cond{"sm " + op + " " + s, a}
		case 3:
			x := intAround(0, total-1)
			s, a := value(fmt.Sprintf("'k%05d'", x), fmt.Sprintf("k%05d", x))
			return cond{"t " + op + " " + s, a}
		case 4:
			w := []string{"alpha", "beta", "Gamma", "", "zeta z", "b", "zz"}[rng.IntN(7)]
			s, a := value("'"+w+"'", w)
			return cond{"v " + op + " " + s, a}
		case 5:
			day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, intAround(0, (total-1)/7))
			if usesParam {
				return cond{"d " + op + " " + param(nil), []any{day}}
			}
			if rng.IntN(2) == 0 {
				return cond{"d " + op + " DATE '" + day.Format("2006-01-02") + "'", nil}
			}
			return cond{"d " + op + " '" + day.Format("2006-01-02") + "'", nil}
		case 6:
			at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(intAround(0, total-1)) * time.Minute)
			if rng.IntN(4) == 0 {
				at = at.Add(time.Microsecond * time.Duration(rng.IntN(3)-1))
			}
			text := at.Format("2006-01-02 15:04:05.999999")
			if usesParam {
				return cond{"ts " + op + " " + param(nil), []any{at}}
			}
			return cond{"ts " + op + " '" + text + "'", nil}
		case 7:
			at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(intAround(0, (total-1)*7)) * time.Second)
			text := at.Format("2006-01-02 15:04:05") + "+00"
			if rng.IntN(3) == 0 {
				text = at.Add(time.Hour).Format("2006-01-02 15:04:05") + "+01"
			}
			if usesParam {
				return cond{"tz " + op + " " + param(nil), []any{at}}
			}
			if rng.IntN(2) == 0 {
				return cond{"tz " + op + " '" + text + "'::timestamptz", nil}
			}
			return cond{"tz " + op + " '" + text + "'", nil}
		case 8:
			if rng.IntN(3) == 0 {
				return cond{"ok IN (true, false)", nil}
			}
			b := rng.IntN(2) == 0
			s, a := value(fmt.Sprint(b), b)
			return cond{"ok = " + s, a}
		case 9:
			col := []string{"i", "t", "v", "d", "ts", "tz", "ok", "sm"}[rng.IntN(8)]
			if rng.IntN(2) == 0 {
				return cond{col + " IS NULL", nil}
			}
			return cond{col + " IS NOT NULL", nil}
		case 10:
			a, b := intAround(0, total-1), intAround(0, total-1)
			if usesParam {
				return cond{fmt.Sprintf("id BETWEEN %s AND %s", param(nil), param(nil)), []any{int64(a), int64(b)}}
			}
			return cond{fmt.Sprintf("id BETWEEN %d AND %d", a, b), nil}
		case 11:
			var items []string
			var args []any
			for range 1 + rng.IntN(4) {
				x := intAround(0, total-1)
				if usesParam {
					items = append(items, param(nil))
					args = append(args, fmt.Sprintf("k%05d", x))
				} else {
					items = append(items, fmt.Sprintf("'k%05d'", x))
				}
			}
			if rng.IntN(5) == 0 {
				items = append(items, "NULL")
			}
			return cond{"t IN (" + strings.Join(items, ", ") + ")", args}
		case 12:
			// Not used for pruning: float, OR, NOT BETWEEN, <>.
			x := intAround(0, total-1)
			return cond{[]string{fmt.Sprintf("f < %d.5", x%9), fmt.Sprintf("(id < %d OR i IS NULL)", x),
				fmt.Sprintf("id NOT BETWEEN %d AND %d", x, x+40), fmt.Sprintf("id <> %d", x)}[rng.IntN(4)], nil}
		}
		x := intAround(0, total-1)
		return cond{fmt.Sprintf("id = %d + 0", x), nil} // an expression: not used
	}
	before := front.LakeStats()
	for q := range 150 {
		var conds []string
		var args []any
		argN := 0
		for range 1 + rng.IntN(3) {
			c := gen(&argN)
			conds = append(conds, c.sql)
			args = append(args, c.args...)
		}
		sql := "SELECT id FROM ev WHERE " + strings.Join(conds, " AND ") + " ORDER BY id"
		if rng.IntN(4) == 0 {
			sql = "SELECT id FROM ev e WHERE " + strings.ReplaceAll(strings.Join(conds, " AND "), "id ", "e.id ") + " ORDER BY id"
		}
		sqlfront.SetLakeFilters(false)
		want := filterRows(t, conn, sql, args...)
		sqlfront.SetLakeFilters(true)
		got := filterRows(t, conn, sql, args...)
		if !slices.Equal(got, want) {
			t.Fatalf("query %d: %s %v:\n got %d rows %v\nwant %d rows %v", q, sql, args, len(got), got, len(want), want)
		}
	}
	after := front.LakeStats()
	t.Logf("lake files read %d, pruned %d", after.FilesRead-before.FilesRead, after.FilesPruned-before.FilesPruned)
	if after.FilesPruned == before.FilesPruned {
		t.Fatal("no lake file was pruned")
	}

	// The lake's files: a point query or a range within one round reads
	// only files of that round (at least two rounds' files are pruned), a
	// value only in the streams none; a statement that scans the table
	// twice does not prune.
	before = front.LakeStats()
	if ids := filterRows(t, conn, "SELECT id FROM ev"); len(ids) != total {
		t.Fatalf("whole table: %d rows, want %d", len(ids), total)
	}
	files := front.LakeStats().FilesRead - before.FilesRead
	if files < 3 {
		t.Fatalf("whole table: %d files read, want at least one per round", files)
	}
	// A stream row whose t is known (the random rows' t may be NULL).
	exec("INSERT INTO ev (id, t) VALUES ($1, 'k-stream')", int64(total))
	for _, c := range []struct {
		sql              string
		minRead, maxRead uint64
		rows             int
	}{
		{"SELECT id FROM ev WHERE id = 10", 1, files - 2, 1},
		{"SELECT id FROM ev WHERE id >= 150 AND id < 300", 1, files - 2, 150},
		{"SELECT id FROM ev WHERE t = 'k-stream'", 0, 0, 1}, // a stream row
		{"SELECT id FROM ev WHERE id = 10 AND id IN (SELECT id FROM ev WHERE id > 400)", 2 * files, 2 * files, 0},
	} {
		before := front.LakeStats()
		ids := filterRows(t, conn, c.sql)
		after := front.LakeStats()
		read, pruned := after.FilesRead-before.FilesRead, after.FilesPruned-before.FilesPruned
		wantPruned := files - read
		if c.minRead == 2*files {
			wantPruned = 0
		}
		if len(ids) != c.rows || read < c.minRead || read > c.maxRead || pruned != wantPruned {
			t.Errorf("%s: %d rows, %d files read, %d pruned; want %d rows, %d..%d files read of %d, the rest pruned",
				c.sql, len(ids), read, pruned, c.rows, c.minRead, c.maxRead, files)
		}
	}
}

// TestLakeScanTrimRace: a scan pins the lake snapshot and tiered offsets,
// then, before it reads the stream from the pinned offset, a newer round
// commits and retention trims the stream past it. The scan pins again and
// returns every row once.
func TestLakeScanTrimRace(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	other, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	front := n.Server.SQLFrontend().(*sqlfront.Frontend)
	front.SetMirrors(false)
	for _, sql := range []string{
		"CREATE TABLE r (id bigint) WITH (buckets = 1)",
		"INSERT INTO r SELECT * FROM generate_series(0, 99)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	tierNow(t, n, "r")
	if _, err := conn.Exec(ctx, "INSERT INTO r SELECT * FROM generate_series(100, 199)"); err != nil {
		t.Fatal(err)
	}
	cat := n.Server.Catalog()
	var once sync.Once
	var hookErr error
	sqlfront.SetPinnedStreamHook(func(table string) {
		if table != "r" {
			return
		}
		once.Do(func() {
			// Between the pin and the stream read: more rows, a round
			// that tiers them all, and a trim up to the new tiered offset.
			if _, hookErr = other.Exec(ctx, "INSERT INTO r SELECT * FROM generate_series(200, 249)"); hookErr != nil {
				return
			}
			tierNow(t, n, "r")
			var rec catalog.TrimStream
			cat.Read(func(v *catalog.View) {
				tbl, _ := v.TableNamed("r")
				b := tbl.Buckets[0]
				rec = catalog.TrimStream{Stream: catalog.StreamID(b), Start: tbl.Tiering.Offsets[b], CoordinatorEpoch: v.Coordinator.Epoch}
			})
			if rec.Start != 250 {
				hookErr = fmt.Errorf("tiered offset %d after the round, want 250", rec.Start)
				return
			}
			out, err := cat.Propose(ctx, rec)
			if err == nil {
				err = out.Err
			}
			hookErr = err
		})
	})
	defer sqlfront.SetPinnedStreamHook(nil)
	var count, sum, distinct int64
	err = conn.QueryRow(ctx, "SELECT count(*), sum(id), count(DISTINCT id) FROM r").Scan(&count, &sum, &distinct)
	if hookErr != nil {
		t.Fatalf("hook: %v", hookErr)
	}
	if err != nil {
		t.Fatalf("scan racing a trim: %v", err)
	}
	if count != 250 || distinct != 250 || sum != 249*250/2 {
		t.Fatalf("scan racing a trim: %d rows (%d distinct, sum %d), want 250 rows 0..249", count, distinct, sum)
	}
}

// TestTrimmedUntieredTable: a table with tiering off whose stream retention
// trimmed reads from the stream's start (its expired rows are gone by
// design); the pin/trim check does not take that for a race.
func TestTrimmedUntieredTable(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	n.Server.SQLFrontend().(*sqlfront.Frontend).SetMirrors(false)
	for _, sql := range []string{
		"CREATE TABLE u (id bigint) WITH (buckets = 1, tiering = off)",
		"INSERT INTO u SELECT * FROM generate_series(0, 99)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Wait for the first object, then insert more rows: the trim removes
	// the first object.
	cat := n.Server.Catalog()
	var stream catalog.StreamID
	deadline := time.Now().Add(30 * time.Second)
	for {
		var end uint64
		cat.Read(func(v *catalog.View) {
			tbl, _ := v.TableNamed("u")
			stream = catalog.StreamID(tbl.Buckets[0])
			end = v.Streams[stream].End
		})
		if end == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows not committed to stream objects (end %d)", end)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO u SELECT * FROM generate_series(100, 149)"); err != nil {
		t.Fatal(err)
	}
	var epoch uint64
	cat.Read(func(v *catalog.View) { epoch = v.Coordinator.Epoch })
	out, err := cat.Propose(ctx, catalog.TrimStream{Stream: stream, Start: 100, CoordinatorEpoch: epoch})
	if err == nil {
		err = out.Err
	}
	if err != nil {
		t.Fatalf("trim: %v", err)
	}
	var count, lo int64
	if err := conn.QueryRow(ctx, "SELECT count(*), min(id) FROM u").Scan(&count, &lo); err != nil {
		t.Fatalf("read after the trim: %v", err)
	}
	if count != 50 || lo != 100 {
		t.Fatalf("read after the trim: %d rows from id %d, want 50 from 100", count, lo)
	}
}
