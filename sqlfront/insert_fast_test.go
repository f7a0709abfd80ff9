package sqlfront_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/sqlfront"
)

var fastInsertSeed = flag.Uint64("fastinsert.seed", 0, "TestFastInsertMatchesGeneral: the seed (0: from the clock)")

// fastInsertColumn is a column of the randomized INSERT test: its
// definition and values to write, each as SQL literal text (NULL, DEFAULT
// and numbers bare, the rest quoted) — good ones, boundaries, and bad ones
// marked with a leading "!".
type fastInsertColumn struct {
	name, def string
	values    []string
}

var fastInsertColumns = []fastInsertColumn{
	{"b", "boolean", []string{"true", "false", "'t'", "'no'", "!'maybe'"}},
	{"i2", "smallint NOT NULL DEFAULT 7", []string{"0", "32767", "-32768", "!32768", "!-32769", "'12'", "!'x'", "1.5"}},
	{"i4", "integer", []string{"2147483647", "-2147483648", "!2147483648", "'-5'", "!'2147483648'", "!'abc'", "3.7"}},
	{"i8", "bigint DEFAULT -1", []string{"9223372036854775807", "-9223372036854775808", "!9223372036854775808", "42", "!'1e3'"}},
	{"f4", "real", []string{"1.5", "3", "3.4e38", "!1e39", "'NaN'", "'Infinity'", "!'x'"}},
	{"f8", "double precision", []string{"1.25", "-7", "1e308", "!1e309", "'-Infinity'", "!'1e400'"}},
	{"n", "numeric(10,2)", []string{"12345678.99", "123.456", "-0.005", "!123456789.1", "5", "!'abc'"}},
	{"nu", "numeric", []string{"1.5", "99999999999999999999", "-3"}},
	{"t", "text DEFAULT 'dflt'", []string{"''", "'hello'", "'it''s'", "'ünï ☃'", "'a\\b'", "5"}},
	{"vc", "varchar(5) NOT NULL DEFAULT 'v'", []string{"'abcde'", "!'abcdef'", "'abc  '", "'äöüäö'", "!'äöüäöü'", "12", "!123456"}},
	{"ch", "char(3)", []string{"'ab'", "'abc'", "!'abcd'", "'a  '", "'ab   '"}},
	{"by", "bytea", []string{"'\\x0102ff'", "'plain'", "!'\\xzz'"}},
	{"d", "date", []string{"'2024-02-29'", "!'2023-02-29'", "'infinity'", "'9999-12-31'", "'5874897-12-31'", "'4713-01-01 BC'", "'0001-01-01'", "!'junk'"}},
	{"tm", "time", []string{"'12:34:56.789'", "'24:00:00'", "!'25:00'", "'00:00'"}},
	{"ts", "timestamp", []string{"'2024-01-02 03:04:05.123456'", "'-infinity'", "!'2024-13-01'", "'1999-12-31 23:59:59'"}},
	{"tz", "timestamptz", []string{"'2024-01-02 03:04:05+02'", "'2024-07-01 12:00:00'", "'infinity'", "!'nonsense'"}},
	{"iv", "interval", []string{"'1 day 2 hours'", "'1 mon -3 days'", "'P1Y2M'", "!'forever'"}},
	{"u", "uuid", []string{"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'A0EEBC999C0B4EF8BB6D6BB9BD380A11'", "!'not-a-uuid'"}},
	{"j", "json", []string{"'{\"a\": 1}'", "'[1, 2]'", "!'{bad'"}},
	{"jb", "jsonb", []string{"'{\"b\": [1, 2], \"a\": null}'", "'3'", "!'{'"}},
	{"ai", "integer[]", []string{"'{1,2,NULL}'", "'{}'", "!'{1,x}'", "!'{{1},{2}}'"}},
	{"at", "text[]", []string{"'{a,\"b c\"}'", "'{NULL}'", "!'{'"}},
}

// TestFastInsertMatchesGeneral runs the same random INSERT statements
// through the fast path of INSERT … VALUES and through the general path
// (the engine), each into its own copy of the tables, and checks that
// every statement returns the same tag or the same error (SQLSTATE,
// message, detail), and that the tables end up holding the same rows.
// Statements mix column subsets, literals, parameters, NULL and DEFAULT,
// good, boundary and bad values of every column type, and run over the
// simple protocol, the extended protocol, and prepared statements executed
// several times. Replay a failure with -fastinsert.seed.
func TestFastInsertMatchesGeneral(t *testing.T) {
	seed := *fastInsertSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -fastinsert.seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx := context.Background()
	node := minktest.Start(t, minktest.Options{})
	conn, err := pgx.Connect(ctx, node.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	defer sqlfront.SetFastInsert(true)

	var defs []string
	for _, c := range fastInsertColumns {
		defs = append(defs, c.name+" "+c.def)
	}
	pkDefs := "id integer PRIMARY KEY, v text NOT NULL DEFAULT 'd', n bigint, vc varchar(4)"
	for _, path := range []string{"fast", "general"} {
		for _, ddl := range []string{
			fmt.Sprintf("CREATE TABLE log_%s (%s) WITH (buckets = 4)", path, strings.Join(defs, ", ")),
			fmt.Sprintf("CREATE TABLE ser_%s (id serial, a integer NOT NULL, s text)", path),
			fmt.Sprintf("CREATE TABLE pk_%s (%s)", path, pkDefs),
		} {
			if _, err := conn.Exec(ctx, ddl); err != nil {
				t.Fatalf("%s: %v", ddl, err)
			}
		}
	}

	pkColumns := []fastInsertColumn{
		{"id", "", []string{"1", "2", "3", "4", "5", "-2147483648", "!2147483648", "!'x'"}},
		{"v", "", []string{"'a'", "'b'", "'c'"}},
		{"n", "", []string{"1", "-2", "!9223372036854775808"}},
		{"vc", "", []string{"'abcd'", "!'abcde'", "'ab'"}},
	}
	serColumns := []fastInsertColumn{
		{"id", "", []string{"100", "-3", "!'x'"}},
		{"a", "", []string{"1", "'7'", "!'a'"}},
		{"s", "", []string{"'s'", "'t'"}},
	}
	type table struct {
		name    string
		cols    []fastInsertColumn
		suffixs []string
	}
	tables := []table{
		{"log", fastInsertColumns, []string{""}},
		{"ser", serColumns, []string{""}},
		{"pk", pkColumns, []string{"", " ON CONFLICT DO NOTHING", " ON CONFLICT (id) DO NOTHING",
			" ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n", " ON CONFLICT (id) DO UPDATE SET vc = excluded.vc"}},
	}
	const statements = 400
	fastCount, fastExecs, executions := 0, int64(0), 0
	outcomes := map[string]int{}
	for n := range statements {
		tb := tables[rng.IntN(len(tables))]
		// A random subset of columns, in random order, or all of them
		// without a column list.
		var cols []fastInsertColumn
		listed := rng.IntN(4) != 0
		if listed {
			perm := rng.Perm(len(tb.cols))
			cols = make([]fastInsertColumn, 0, len(perm))
			for _, k := range perm[:1+rng.IntN(len(perm))] {
				cols = append(cols, tb.cols[k])
			}
		} else {
			cols = tb.cols[:1+rng.IntN(len(tb.cols))]
		}
		nrows := 1 + rng.IntN(3)
		// About one statement in four has a bad value.
		bad := 0.3 / float64(nrows*len(cols))
		mode := []string{"simple", "extended", "exec", "prepared"}[rng.IntN(4)]
		// Each item is a literal, or (not simple) a parameter
		// carrying the value's text, or NULL or DEFAULT.
		// grid[r][k] is row r's value of column k, param[r][k] whether it
		// is sent as a parameter.
		grid := make([][]string, nrows)
		param := make([][]bool, nrows)
		for r := range nrows {
			grid[r], param[r] = make([]string, len(cols)), make([]bool, len(cols))
			for k, c := range cols {
				grid[r][k] = pickValue(rng, c, bad)
				param[r][k] = mode != "simple" && grid[r][k] != "DEFAULT" && rng.IntN(3) != 0
			}
		}
		var sqlRows []string
		var args []any
		var paramCols []int // the column of each parameter, to draw new values for re-executions
		for r := range nrows {
			var items []string
			for k, v := range grid[r] {
				if param[r][k] {
					args = append(args, paramValue(v))
					paramCols = append(paramCols, k)
					items = append(items, fmt.Sprintf("$%d", len(args)))
					continue
				}
				items = append(items, v)
			}
			sqlRows = append(sqlRows, "("+strings.Join(items, ", ")+")")
		}
		names := make([]string, len(cols))
		for k, c := range cols {
			names[k] = c.name
		}
		suffix := tb.suffixs[rng.IntN(len(tb.suffixs))]
		defaultValues := rng.IntN(25) == 0
		if defaultValues {
			args, paramCols = nil, nil
		}
		text := func(path string) string {
			if defaultValues {
				return fmt.Sprintf("INSERT INTO %s_%s DEFAULT VALUES%s", tb.name, path, suffix)
			}
			list := ""
			if listed {
				list = " (" + strings.Join(names, ", ") + ")"
			}
			return fmt.Sprintf("INSERT INTO %s_%s%s VALUES %s%s", tb.name, path, list, strings.Join(sqlRows, ", "), suffix)
		}
		execs := [][]any{args}
		if mode == "prepared" {
			for range rng.IntN(3) {
				again := make([]any, len(args))
				for p, k := range paramCols {
					v := pickValue(rng, cols[k], bad)
					for v == "DEFAULT" || strings.Contains(strings.ToLower(v), "infinity") {
						v = pickValue(rng, cols[k], bad)
					}
					again[p] = paramValue(v)
				}
				execs = append(execs, again)
			}
		}
		var results [2][]string
		for pi, path := range []string{"fast", "general"} {
			sqlfront.SetFastInsert(path == "fast")
			before := sqlfront.FastInserts()
			sql := text(path)
			switch mode {
			case "simple":
				results[pi] = append(results[pi], outcome(conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)))
			case "extended":
				results[pi] = append(results[pi], outcome(conn.Exec(ctx, sql, append([]any{pgx.QueryExecModeDescribeExec}, args...)...)))
			case "exec":
				// Parameter types from the Go values: text.
				results[pi] = append(results[pi], outcome(conn.Exec(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)))
			case "prepared":
				name := fmt.Sprintf("p%d_%s", n, path)
				if _, err := conn.Prepare(ctx, name, sql); err != nil {
					results[pi] = append(results[pi], "prepare: "+outcome(pgconn.CommandTag{}, err))
					break
				}
				for _, a := range execs {
					results[pi] = append(results[pi], outcome(conn.Exec(ctx, name, a...)))
				}
				if err := conn.Deallocate(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			if k := sqlfront.FastInserts() - before; path == "fast" {
				fastExecs += k
			} else if k != 0 {
				t.Fatalf("statement %d: %d executions took the fast path while it was off", n, k)
			}
		}
		for _, r := range results[0] {
			outcomes[strings.SplitN(r, " ", 3)[0]+" "+strings.SplitN(r+" ", " ", 3)[1]]++
			if testing.Verbose() && strings.HasPrefix(r, "ERROR 0A000") {
				t.Logf("%s: %s", text("X"), r)
			}
		}
		for pi := range results {
			for k, r := range results[pi] {
				results[pi][k] = strings.NewReplacer("_fast", "_X", "_general", "_X").Replace(r)
			}
		}
		if !slices.Equal(results[0], results[1]) {
			t.Errorf("statement %d (%s, args %q):\n%s\nfast:    %q\ngeneral: %q", n, mode, execs, text("X"), results[0], results[1])
		}
		if strings.HasPrefix(results[0][0], "INSERT") {
			fastCount++
		}
		executions += len(results[0])
	}
	sqlfront.SetFastInsert(true)
	t.Logf("%d statements, %d with a first execution that inserted; %d executions, %d stored by the fast path; outcomes %v",
		statements, fastCount, executions, fastExecs, outcomes)
	// Most statements qualify: a test that never took the fast path would
	// compare the general path with itself.
	if fastExecs < int64(executions)/10 {
		t.Errorf("only %d of %d executions took the fast path", fastExecs, executions)
	}
	for _, tb := range tables {
		got, want := tableRows(t, conn, tb.name+"_fast"), tableRows(t, conn, tb.name+"_general")
		if !slices.Equal(got, want) {
			t.Errorf("%s: fast path's table holds\n%s\ngeneral path's\n%s", tb.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(want) == 0 {
			t.Errorf("%s: no rows: the test inserted nothing", tb.name)
		}
	}
}

// pickValue picks one of a column's values, or NULL or DEFAULT; a bad
// value with probability bad.
func pickValue(rng *rand.Rand, c fastInsertColumn, bad float64) string {
	switch rng.IntN(12) {
	case 0:
		return "NULL"
	case 1:
		return "DEFAULT"
	}
	var good, wrong []string
	for _, v := range c.values {
		if w, ok := strings.CutPrefix(v, "!"); ok {
			wrong = append(wrong, w)
		} else {
			good = append(good, v)
		}
	}
	if len(wrong) > 0 && rng.Float64() < bad {
		return wrong[rng.IntN(len(wrong))]
	}
	return good[rng.IntN(len(good))]
}

// paramValue is the argument of a parameter standing for the literal v:
// its text (nil for NULL).
func paramValue(v string) any {
	if v == "NULL" || v == "DEFAULT" {
		return nil
	}
	if strings.HasPrefix(v, "'") {
		return strings.ReplaceAll(strings.Trim(v, "'"), "''", "'")
	}
	return v
}

// outcome is what a client sees of a statement: its tag, or its error's
// SQLSTATE, message and detail.
func outcome(tag pgconn.CommandTag, err error) string {
	if err == nil {
		return tag.String()
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("ERROR %s: %s (%s)", pe.Code, pe.Message, pe.Detail)
	}
	return "client error: " + err.Error()
}

// tableRows is every row of a table as text, sorted.
func tableRows(t *testing.T, conn *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT * FROM "+table, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var vals []string
		for _, v := range rows.RawValues() {
			if v == nil {
				vals = append(vals, "NULL")
			} else {
				vals = append(vals, string(v))
			}
		}
		out = append(out, strings.Join(vals, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// Parameters a multi-row VALUES mixes with DEFAULT and with each other are
// stored as PostgreSQL stores them, on both paths: a uuid, an infinite date,
// PostgreSQL's first and last dates, and arrays. (The general path once
// refused the uuid and the infinite date with 0A000 "Cannot combine types",
// and stored 5874897-12-31 as 29357-07-04.)
func TestInsertParamsInMultiRowValues(t *testing.T) {
	ctx := context.Background()
	node := minktest.Start(t, minktest.Options{})
	conn, err := pgx.Connect(ctx, node.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	defer sqlfront.SetFastInsert(true)
	want := []string{
		"1 a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 infinity {1,2}",
		"2 00000000-0000-0000-0000-000000000007 2024-01-01 {7}",
		"3 0eebc99a-9c0b-4ef8-bb6d-6bb9bd380a12 5874897-12-31 {}",
		"4 <nil> 4713-01-01 BC <nil>",
	}
	for _, fast := range []bool{true, false} {
		sqlfront.SetFastInsert(fast)
		table := fmt.Sprintf("mixed_%v", fast)
		if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (n integer, u uuid DEFAULT '00000000-0000-0000-0000-000000000007', d date DEFAULT '2024-01-01', a integer[] DEFAULT '{7}')"); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
			if _, err := conn.Exec(ctx, "TRUNCATE "+table); err != nil {
				t.Fatal(err)
			}
			tag, err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES (1, $1, $2, $3), (2, DEFAULT, DEFAULT, DEFAULT), (3, $4, $5, $6), (4, NULL, $7, NULL)", mode,
				"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}, []int32{1, 2},
				"0EEBC99A9C0B4EF8BB6D6BB9BD380A12", pgtype.Date{Time: time.Date(5874897, 12, 31, 0, 0, 0, 0, time.UTC), Valid: true}, []int32{},
				"4713-01-01 BC")
			if err != nil {
				t.Fatalf("fast path %v, %v: %v", fast, mode, err)
			}
			if tag.String() != "INSERT 0 4" {
				t.Fatalf("fast path %v, %v: tag %q, want INSERT 0 4", fast, mode, tag)
			}
			// The simple protocol: the values as mink's text output writes them.
			rows, err := conn.Query(ctx, "SELECT n, u, d, a FROM "+table+" ORDER BY n", pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var n int32
				var u, d, a *string
				if err := rows.Scan(&n, &u, &d, &a); err != nil {
					t.Fatal(err)
				}
				str := func(p *string) string {
					if p == nil {
						return "<nil>"
					}
					return *p
				}
				got = append(got, fmt.Sprintf("%d %s %s %s", n, str(u), str(d), str(a)))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("fast path %v, %v: table holds\n%s\nwant\n%s", fast, mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
}
