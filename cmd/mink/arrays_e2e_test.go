package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// arrayRow is a row of the e2e arrays table as pgx reads it.
type arrayRow struct {
	id   int64
	tags []*string
	ids  []int64
	ts   []time.Time
	ivs  []pgtype.Interval
}

// showArrayRows renders rows for comparison: strings quoted, nil and
// empty arrays told apart, times in UTC.
func showArrayRows(rows []arrayRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%d", r.id)
		if r.tags == nil {
			b.WriteString(" tags=nil")
		} else {
			b.WriteString(" tags=[")
			for i, v := range r.tags {
				if i > 0 {
					b.WriteByte(' ')
				}
				if v == nil {
					b.WriteString("NULL")
				} else {
					fmt.Fprintf(&b, "%q", *v)
				}
			}
			b.WriteByte(']')
		}
		show := func(name string, isNil bool, v any) {
			if isNil {
				fmt.Fprintf(&b, " %s=nil", name)
			} else {
				fmt.Fprintf(&b, " %s=%v", name, v)
			}
		}
		show("ids", r.ids == nil, r.ids)
		ts := make([]string, len(r.ts))
		for i, v := range r.ts {
			ts[i] = v.UTC().Format(time.RFC3339Nano)
		}
		show("ts", r.ts == nil, ts)
		show("ivs", r.ivs == nil, r.ivs)
		b.WriteByte('\n')
	}
	return b.String()
}

func readArrayRows(t *testing.T, conn *pgx.Conn, where string) []arrayRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id, tags, ids, ts, ivs FROM arr "+where+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var out []arrayRow
	for rows.Next() {
		var r arrayRow
		if err := rows.Scan(&r.id, &r.tags, &r.ids, &r.ts, &r.ivs); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestArrayColumnsE2E drives array columns through the real binary and
// real clients: pgx in binary (array parameters []string, []int64,
// []time.Time, intervals; binary results), pgx's binary COPY, psql's text
// output and \d, a text COPY through psql and COPY TO STDOUT in text and
// csv; the rows read back the same after kill -9 and restart, with a
// = ANY / @> filter on a parameter on top. What SQL reads of arrays return
// from the streams, after a restart and from the lake (with the engine's
// mirrors and without), and a primary-key table's array column, are
// sqlfront/testdata/logic/arrays_lake.test and arrays_lake_direct.test.
func TestArrayColumnsE2E(t *testing.T) {
	n := startLakeNode(t, t.TempDir(), false)
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE arr (id bigint NOT NULL, tags text[], ids bigint[], ts timestamptz[], ivs interval[]) WITH (buckets = 2)")

	s := func(v string) *string { return &v }
	t0 := time.Date(2024, 2, 29, 10, 11, 12, 123456000, time.UTC)
	want := []arrayRow{
		{1, []*string{s("a"), s("b c"), nil, s("NULL"), s(""), s(`q"x`), s(`back\slash`), s("{br},")}, []int64{1, -9223372036854775808, 9223372036854775807},
			[]time.Time{t0}, []pgtype.Interval{{Months: 1, Days: -2, Microseconds: 3_000_001, Valid: true}}},
		{2, []*string{}, []int64{}, []time.Time{}, []pgtype.Interval{}},
		{3, nil, nil, nil, nil},
	}
	for _, r := range want {
		mustExec(t, conn, "INSERT INTO arr VALUES ($1, $2, $3, $4, $5)", r.id, r.tags, r.ids, r.ts, r.ivs)
	}
	// Literals in VALUES.
	mustExec(t, conn, `INSERT INTO arr VALUES (4, '{x,"y z",NULL}', ARRAY[7, 8], '{"2024-01-01 00:00:00+00"}', '{"1 day"}')`)
	want = append(want, arrayRow{4, []*string{s("x"), s("y z"), nil}, []int64{7, 8}, []time.Time{time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		[]pgtype.Interval{{Days: 1, Valid: true}}})
	// pgx's CopyFrom is a binary COPY.
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{"arr"}, []string{"id", "tags", "ids"}, pgx.CopyFromRows([][]any{
		{int64(5), []string{"copy", "bin ary"}, []int64{42}},
		{int64(6), nil, []int64{}},
	}))
	if err != nil || copied != 2 {
		t.Fatalf("CopyFrom: %d, %v", copied, err)
	}
	want = append(want,
		arrayRow{5, []*string{s("copy"), s("bin ary")}, []int64{42}, nil, nil},
		arrayRow{6, nil, []int64{}, nil, nil})

	check := func(stage string) {
		t.Helper()
		if got, exp := showArrayRows(readArrayRows(t, conn, "")), showArrayRows(want); got != exp {
			t.Fatalf("%s: rows\n%s\nwant\n%s", stage, got, exp)
		}
		var ids []int64
		rows, err := conn.Query(ctx, "SELECT id FROM arr WHERE 9223372036854775807 = ANY(ids) OR tags @> $1 ORDER BY id", []string{"bin ary"})
		if err != nil {
			t.Fatal(err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || fmt.Sprint(ids) != "[1 5]" {
			t.Fatalf("%s: ANY/@> filter: %v %v, want [1 5]", stage, ids, err)
		}
	}
	check("streams")

	// psql: text output as PostgreSQL prints it, \d, and a text COPY.
	psql := requireCommand(t, "psql")
	host, port, _ := net.SplitHostPort(n.pgAddr())
	runPsql := func(stdin string, args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, psql, append([]string{"-X", "-v", "ON_ERROR_STOP=1", "-h", host, "-p", port, "-U", "mink", "-d", "mink"}, args...)...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "PSQL") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PAGER=", "LC_ALL=C.UTF-8")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("psql %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := runPsql("", "-A", "-t", "-c", "SELECT tags, ids FROM arr WHERE id IN (1, 2) ORDER BY id")
	if wantOut := "{a,\"b c\",NULL,\"NULL\",\"\",\"q\\\"x\",\"back\\\\slash\",\"{br},\"}|{1,-9223372036854775808,9223372036854775807}\n{}|{}\n"; out != wantOut {
		t.Fatalf("psql text output:\n%q\nwant\n%q", out, wantOut)
	}
	out = runPsql("", "-c", `\d arr`)
	for _, line := range []string{"tags   | text[]", "ids    | bigint[]", "ts     | timestamp with time zone[]", "ivs    | interval[]"} {
		if !strings.Contains(out, line) {
			t.Fatalf("psql \\d arr has no %q:\n%s", line, out)
		}
	}
	out = runPsql("7\t{\"from psql\",NULL}\t{1,2}\n8\t{}\t\\N\n\\.\n", "-c", "COPY arr (id, tags, ids) FROM STDIN")
	if !strings.Contains(out, "COPY 2") {
		t.Fatalf("psql COPY: %s", out)
	}
	want = append(want,
		arrayRow{7, []*string{s("from psql"), nil}, []int64{1, 2}, nil, nil},
		arrayRow{8, []*string{}, nil, nil, nil})
	check("after psql COPY")

	// kill -9 and restart: the acknowledged rows are there.
	conn.Close(ctx)
	n.kill()
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	defer conn.Close(ctx)
	check("after kill -9")

	// COPY TO STDOUT prints arrays as PostgreSQL does, in text and csv.
	for _, c := range []struct{ sql, want string }{
		{"COPY (SELECT id, tags, ids FROM arr WHERE id IN (1, 7, 8) ORDER BY id) TO STDOUT",
			"1\t{a,\"b c\",NULL,\"NULL\",\"\",\"q\\\\\"x\",\"back\\\\\\\\slash\",\"{br},\"}\t{1,-9223372036854775808,9223372036854775807}\n" +
				"7\t{\"from psql\",NULL}\t{1,2}\n8\t{}\t\\N\n"},
		{"COPY (SELECT id, tags FROM arr WHERE id IN (4, 7) ORDER BY id) TO STDOUT (FORMAT csv)",
			"4,\"{x,\"\"y z\"\",NULL}\"\n7,\"{\"\"from psql\"\",NULL}\"\n"},
	} {
		var buf strings.Builder
		if _, err := conn.PgConn().CopyTo(ctx, &buf, c.sql); err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if buf.String() != c.want {
			t.Fatalf("%s:\n%q\nwant\n%q", c.sql, buf.String(), c.want)
		}
	}
}
