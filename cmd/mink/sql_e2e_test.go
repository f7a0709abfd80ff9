package main

// End-to-end tests of the SQL front end: the real mink binary driven by
// real PostgreSQL clients (pgx, lib/pq, psql, psycopg2, pgjdbc), and
// kill -9 in the middle of COPYs and INSERTs. A client that is not
// installed fails its test and names scripts/install-test-deps.sh, which
// `make test` runs first.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lib/pq"

	"github.com/minkdb/mink/buckets/routing"
)

const installHint = "run scripts/install-test-deps.sh (make test does)"

// pgURL is a postgres:// URL of the node's Postgres listener.
func (n *node) pgURL() string {
	return fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", n.pgAddr())
}

// startSQLNode starts a single node with fast failure detection and waits
// until it answers SQL.
func startSQLNode(t *testing.T, dataDir string) *node {
	t.Helper()
	var n *node
	for try := 0; ; try++ {
		n = newNode(t, nodeOpts{dataDir: dataDir, leaseTTL: "3s", extra: []string{"--coordinator-tick", "200ms"}})
		// freePort closes its probe listener, so two of the node's ports
		// can come out the same; draw again rather than fail to start.
		if distinctPorts(n.args) || try == 10 {
			break
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	return n
}

// distinctPorts reports whether the listen addresses in a node's arguments
// (and the embedded etcd's peer port, the one after its client port) are
// all different.
func distinctPorts(args []string) bool {
	seen := map[string]bool{}
	for i, a := range args {
		if !strings.HasSuffix(a, "-addr") || i+1 >= len(args) {
			continue
		}
		host, port, err := net.SplitHostPort(args[i+1])
		if err != nil {
			continue
		}
		ports := []string{port}
		if a == "--embedded-etcd-addr" {
			var p int
			fmt.Sscan(port, &p)
			ports = append(ports, fmt.Sprint(p+1))
		}
		for _, p := range ports {
			if seen[host+":"+p] {
				return false
			}
			seen[host+":"+p] = true
		}
	}
	return true
}

// waitSQL waits until a query succeeds.
func (n *node) waitSQL() {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var conn *pgx.Conn
		if conn, err = pgx.Connect(ctx, n.pgURL()); err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("mink does not answer SQL after 60s: %v\n%s", err, n.log())
}

func connect(t *testing.T, url string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) pgconn.CommandTag {
	t.Helper()
	tag, err := conn.Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestSQLClients drives one mink server with every client, each in its own
// tables.
func TestSQLClients(t *testing.T) {
	n := startSQLNode(t, "")
	t.Run("pgx-simple", func(t *testing.T) { testPgxSimple(t, n) })
	t.Run("pgx-extended", func(t *testing.T) { testPgxExtended(t, n) })
	t.Run("pgx-insert-params", func(t *testing.T) { testPgxInsertParams(t, n) })
	t.Run("pgx-select-params", func(t *testing.T) { testPgxSelectParams(t, n) })
	t.Run("pgx-uuid-binary", func(t *testing.T) { testPgxUUIDBinary(t, n) })
	t.Run("pgx-copy", func(t *testing.T) { testPgxCopy(t, n) })
	t.Run("pgx-copy-jsonb", func(t *testing.T) { testPgxCopyJSONB(t, n) })
	t.Run("pgx-pk-params", func(t *testing.T) { testPgxPKParams(t, n) })
	t.Run("libpq", func(t *testing.T) { testLibPQ(t, n) })
	t.Run("psql", func(t *testing.T) { testPsql(t, n) })
	t.Run("psql-pk", func(t *testing.T) { testPKPsql(t, n) })
	t.Run("psycopg2", func(t *testing.T) { testPsycopg2(t, n) })
	t.Run("sqlalchemy", func(t *testing.T) { testSQLAlchemy(t, n) })
	t.Run("pgjdbc", func(t *testing.T) { testPgJDBC(t, n) })
}

// typesDDL is a table with one column of most types, used by the pgx tests.
const typesDDL = `(id bigint NOT NULL, b boolean, i2 smallint, i4 integer, f4 real, f8 double precision,
	num numeric(12,3), txt text, vc varchar(8), bt bytea, d date, tm time, ts timestamp, tz timestamptz,
	iv interval, js jsonb)`

type typesRow struct {
	ID  int64
	B   bool
	I2  int16
	I4  int32
	F4  float32
	F8  float64
	Num string // numeric as text
	Txt string
	VC  string
	By  []byte
	D   time.Time
	Tm  pgtype.Time
	Ts  time.Time
	Tz  time.Time
	Iv  pgtype.Interval
	JS  map[string]any
}

func sampleRow(id int64) typesRow {
	return typesRow{
		ID: id, B: id%2 == 0, I2: int16(id), I4: int32(id * 1000), F4: 1.5, F8: float64(id) / 4,
		Num: fmt.Sprintf("%d.125", id), Txt: fmt.Sprintf("text %d, 'quoted'", id), VC: "vc",
		By: []byte{0, byte(id), 0xff}, D: time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		Tm: pgtype.Time{Microseconds: (12*3600+34*60+56)*1e6 + 789, Valid: true},
		Ts: time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC),
		Tz: time.Date(2024, 1, 2, 3, 4, 5, 500000000, time.UTC),
		Iv: pgtype.Interval{Months: 14, Days: 3, Microseconds: 4*3600e6 + 5e5, Valid: true},
		JS: map[string]any{"k": "v", "n": float64(id)},
	}
}

func (r typesRow) args() []any {
	num := pgtype.Numeric{}
	if err := num.Scan(r.Num); err != nil {
		panic(err)
	}
	js := fmt.Sprintf(`{"k": %q, "n": %v}`, r.JS["k"], r.JS["n"]) // pgx's simple protocol cannot encode a map
	return []any{r.ID, r.B, r.I2, r.I4, r.F4, r.F8, num, r.Txt, r.VC, r.By, r.D, r.Tm, r.Ts, r.Tz, r.Iv, js}
}

const typesCols = "id, b, i2, i4, f4, f8, num, txt, vc, bt, d, tm, ts, tz, iv, js"

// readTypes reads the rows of a types table, ordered by id.
func readTypes(t *testing.T, conn *pgx.Conn, table string) []typesRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT "+typesCols+" FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var out []typesRow
	for rows.Next() {
		var r typesRow
		var num pgtype.Numeric
		if err := rows.Scan(&r.ID, &r.B, &r.I2, &r.I4, &r.F4, &r.F8, &num, &r.Txt, &r.VC, &r.By, &r.D, &r.Tm, &r.Ts, &r.Tz, &r.Iv, &r.JS); err != nil {
			t.Fatalf("scan: %v", err)
		}
		v, _ := num.Value()
		r.Num = fmt.Sprint(v)
		r.D, r.Ts, r.Tz = r.D.UTC(), r.Ts.UTC(), r.Tz.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkTypes(t *testing.T, got []typesRow, ids ...int64) {
	t.Helper()
	if len(got) != len(ids) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(ids), got)
	}
	for i, id := range ids {
		if want := sampleRow(id); !reflect.DeepEqual(got[i], want) {
			t.Errorf("row %d:\n got %+v\nwant %+v", id, got[i], want)
		}
	}
}

func placeholders(n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(p, ", ")
}

// pgx with the simple protocol: pgx interpolates the parameters into the
// SQL text and gets text results.
func testPgxSimple(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	if tag := mustExec(t, conn, "CREATE TABLE pgx_simple "+typesDDL); tag.String() != "CREATE TABLE" {
		t.Fatalf("tag %q", tag)
	}
	for _, id := range []int64{1, 2} {
		if tag := mustExec(t, conn, "INSERT INTO pgx_simple ("+typesCols+") VALUES ("+placeholders(16)+")", sampleRow(id).args()...); tag.String() != "INSERT 0 1" {
			t.Fatalf("tag %q", tag)
		}
	}
	checkTypes(t, readTypes(t, conn, "pgx_simple"), 1, 2)

	// Several statements in one string, each with its own result.
	results, err := conn.PgConn().Exec(ctx, "INSERT INTO pgx_simple (id) VALUES (3); SELECT count(*), sum(id) FROM pgx_simple").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].CommandTag.String() != "INSERT 0 1" || len(results[1].Rows) != 1 ||
		string(results[1].Rows[0][0]) != "3" || string(results[1].Rows[0][1]) != "6" {
		t.Fatalf("multi-statement results: %+v", results)
	}
	// Transaction status as the driver sees it.
	mustExec(t, conn, "BEGIN")
	if s := conn.PgConn().TxStatus(); s != 'T' {
		t.Fatalf("tx status %c after BEGIN", s)
	}
	if _, err := conn.Exec(ctx, "SELECT * FROM nosuch"); sqlState(err) != "42P01" {
		t.Fatalf("got %v, want 42P01", err)
	}
	if s := conn.PgConn().TxStatus(); s != 'E' {
		t.Fatalf("tx status %c after an error in a block", s)
	}
	mustExec(t, conn, "ROLLBACK")
	if s := conn.PgConn().TxStatus(); s != 'I' {
		t.Fatalf("tx status %c after ROLLBACK", s)
	}
}

// pgx with the extended protocol: named prepared statements, binary
// parameters and results.
func testPgxExtended(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pgx_ext "+typesDDL)
	sd, err := conn.Prepare(ctx, "ins", "INSERT INTO pgx_ext ("+typesCols+") VALUES ("+placeholders(16)+")")
	if err != nil {
		t.Fatal(err)
	}
	// The parameter types come from the columns.
	wantOIDs := []uint32{20, 16, 21, 23, 700, 701, 1700, 25, 1043, 17, 1082, 1083, 1114, 1184, 1186, 3802}
	if !reflect.DeepEqual(sd.ParamOIDs, wantOIDs) {
		t.Errorf("parameter types %v, want %v", sd.ParamOIDs, wantOIDs)
	}
	for id := int64(1); id <= 5; id++ {
		if _, err := conn.Exec(ctx, "ins", sampleRow(id).args()...); err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
	}
	checkTypes(t, readTypes(t, conn, "pgx_ext"), 1, 2, 3, 4, 5)

	// A prepared query with a parameter, several times; results in binary.
	for i := 0; i < 3; i++ {
		var cnt int64
		var total pgtype.Numeric
		if err := conn.QueryRow(ctx, "SELECT count(*), sum(num) FROM pgx_ext WHERE id > $1", int64(i)).Scan(&cnt, &total); err != nil {
			t.Fatal(err)
		}
		want := []int64{15, 14, 12}[i] // sum of id + 0.125 each
		f, _ := total.Float64Value()
		if cnt != int64(5-i) || f.Float64 != float64(want)+0.125*float64(5-i) {
			t.Fatalf("id > %d: count %d sum %v", i, cnt, f.Float64)
		}
	}
	// RETURNING through a prepared statement.
	var id int64
	var txt string
	if err := conn.QueryRow(ctx, "INSERT INTO pgx_ext (id, txt) VALUES ($1, $2) RETURNING id, txt", int64(9), "nine").Scan(&id, &txt); err != nil || id != 9 || txt != "nine" {
		t.Fatalf("RETURNING: %d %q %v", id, txt, err)
	}
	// Describe-exec mode (no statement cache) and an explicit text result.
	var s string
	if err := conn.QueryRow(ctx, "SELECT txt FROM pgx_ext WHERE id = $1", pgx.QueryExecModeDescribeExec, int64(9)).Scan(&s); err != nil || s != "nine" {
		t.Fatalf("describe exec: %q %v", s, err)
	}
	// Rows in portions (pgx asks for all; a batch checks several portals).
	batch := &pgx.Batch{}
	batch.Queue("SELECT count(*) FROM pgx_ext")
	batch.Queue("SELECT id FROM pgx_ext WHERE id = $1", int64(2))
	br := conn.SendBatch(ctx, batch)
	var c1, c2 int64
	if err := br.QueryRow().Scan(&c1); err != nil {
		t.Fatal(err)
	}
	if err := br.QueryRow().Scan(&c2); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if c1 != 6 || c2 != 2 {
		t.Fatalf("batch: %d %d", c1, c2)
	}
}

// Parameter types of INSERT: a parameter standing for a column has the
// column's type, in VALUES and in INSERT … SELECT.
func testPgxInsertParams(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pgx_params (a integer, b text, c numeric(6,2))")
	var a int32
	var c pgtype.Numeric
	if err := conn.QueryRow(ctx, "INSERT INTO pgx_params (a, c) SELECT $1, $2 RETURNING a, c", int32(7), 1.5).Scan(&a, &c); err != nil || a != 7 {
		t.Fatalf("INSERT … SELECT $1, $2: %d %v", a, err)
	}
	if f, _ := c.Float64Value(); f.Float64 != 1.5 {
		t.Fatalf("c = %v", f)
	}
	if err := conn.QueryRow(ctx, "INSERT INTO pgx_params (a, b) SELECT $1, 'x' UNION ALL SELECT $2, 'y' RETURNING a", int32(8), int32(9)).Scan(&a); err != nil {
		t.Fatalf("INSERT … SELECT … UNION ALL: %v", err)
	}
	// Parameters in RETURNING are refused clearly rather than misread.
	if _, err := conn.Exec(ctx, "INSERT INTO pgx_params (a) VALUES ($1) RETURNING a + $2", int32(1), int32(2)); sqlState(err) != "0A000" {
		t.Fatalf("a parameter in RETURNING: %v, want 0A000", err)
	}
}

// Parameter and result types of a SELECT whose parameters only PostgreSQL's
// rules type: $2 alone is text, $1 in $1 + 1 is integer.
func testPgxSelectParams(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	var i int32
	var s string
	if err := conn.QueryRow(ctx, "SELECT $1::int, $2", int32(5), "y").Scan(&i, &s); err != nil || i != 5 || s != "y" {
		t.Errorf("SELECT $1::int, $2: %d %q %v", i, s, err)
	}
	if err := conn.QueryRow(ctx, "SELECT $1 + 1", int32(1)).Scan(&i); err != nil || i != 2 {
		t.Errorf("SELECT $1 + 1: %d %v", i, err)
	}
}

// uuid columns read with pgx's default, binary results.
func testPgxUUIDBinary(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pgx_uuid (id integer, u uuid)")
	want := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	mustExec(t, conn, "INSERT INTO pgx_uuid VALUES ($1, $2)", int32(1), want)
	var got [16]byte
	if err := conn.QueryRow(ctx, "SELECT u FROM pgx_uuid WHERE id = 1").Scan(&got); err != nil {
		t.Fatalf("select a uuid in binary: %v", err)
	}
	if got != want {
		t.Fatalf("uuid %x, want %x", got, want)
	}
}

// Binary COPY with pgx's CopyFrom, all or nothing.
func testPgxCopy(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pgx_copy "+typesDDL+" WITH (buckets = 3)")
	// Every column but the jsonb one (pgx-copy-jsonb).
	var rows [][]any
	for id := int64(1); id <= 300; id++ {
		args := sampleRow(id).args()
		rows = append(rows, args[:len(args)-1])
	}
	cols := strings.Split(typesCols, ", ")
	cols = cols[:len(cols)-1]
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{"pgx_copy"}, cols, pgx.CopyFromRows(rows))
	if err != nil || copied != 300 {
		t.Fatalf("CopyFrom: %d %v", copied, err)
	}
	got := readTypes(t, conn, "pgx_copy")
	if len(got) != 300 {
		t.Fatalf("%d rows after COPY", len(got))
	}
	for i := range got {
		got[i].JS = sampleRow(got[i].ID).JS // not copied
	}
	checkTypes(t, got[:3], 1, 2, 3)

	// A bad row (NULL in a NOT NULL column) fails the whole COPY.
	bad := [][]any{sampleRow(1000).args()[:len(cols)], sampleRow(1001).args()[:len(cols)]}
	bad[1][0] = nil
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"pgx_copy"}, cols, pgx.CopyFromRows(bad)); sqlState(err) != "23502" {
		t.Fatalf("COPY with a NULL id: %v, want 23502", err)
	}
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgx_copy").Scan(&count); err != nil || count != 300 {
		t.Fatalf("count %d after the failed COPY (%v), want 300", count, err)
	}
	// COPY TO STDOUT.
	var buf strings.Builder
	if _, err := conn.PgConn().CopyTo(ctx, &buf, "COPY (SELECT id, txt FROM pgx_copy WHERE id <= 2 ORDER BY id) TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	if want := "1\ttext 1, 'quoted'\n2\ttext 2, 'quoted'\n"; buf.String() != want {
		t.Fatalf("COPY TO: %q, want %q", buf.String(), want)
	}
}

// jsonb in a binary COPY (version byte, then the text).
func testPgxCopyJSONB(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pgx_copy_jsonb (id integer, doc jsonb)")
	rows := [][]any{{int32(1), map[string]any{"a": []any{1, 2}}}, {int32(2), nil}}
	if copied, err := conn.CopyFrom(ctx, pgx.Identifier{"pgx_copy_jsonb"}, []string{"id", "doc"}, pgx.CopyFromRows(rows)); err != nil || copied != 2 {
		t.Fatalf("CopyFrom jsonb: %d %v", copied, err)
	}
	var doc string
	if err := conn.QueryRow(ctx, "SELECT doc::text FROM pgx_copy_jsonb WHERE id = 1").Scan(&doc); err != nil {
		t.Fatalf("jsonb after COPY: %v", err)
	}
	if doc != `{"a": [1, 2]}` {
		t.Fatalf("jsonb after COPY: %q, want %q", doc, `{"a": [1, 2]}`)
	}
}

// Parameters and prepared statements on a primary-key table through pgx's
// extended protocol: parameters for a key and a value in VALUES and in
// INSERT … SELECT … ON CONFLICT, UPDATE … RETURNING by a parameter, point
// lookups by a parameter (the fast path and the engine agree), and a
// lookup prepared before a transaction block that sees the block's own
// writes in it. The statements' tags, rows and SQLSTATEs are
// sqlfront/testdata/logic/pk_statements.test.
func testPgxPKParams(t *testing.T, n *node) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pgx_pk (id bigint PRIMARY KEY, v text, n integer NOT NULL DEFAULT 0) WITH (buckets = 3)")
	if tag := mustExec(t, conn, "INSERT INTO pgx_pk (id, v) VALUES (1, 'a'), (2, 'b'), ($1, $2)", int64(3), "c"); tag.String() != "INSERT 0 3" {
		t.Fatalf("INSERT with parameters: %q", tag)
	}
	if tag := mustExec(t, conn, "INSERT INTO pgx_pk (id, v) SELECT $1, $2 UNION ALL SELECT 5, 'e' ON CONFLICT (id) DO UPDATE SET v = excluded.v || '!', n = pgx_pk.n + 1", int64(1), "a2"); tag.String() != "INSERT 0 2" {
		t.Fatalf("INSERT … SELECT $1, $2 … ON CONFLICT: %q", tag)
	}
	var v string
	if err := conn.QueryRow(ctx, "UPDATE pgx_pk SET v = 'g' WHERE id = $1 RETURNING v", int64(5)).Scan(&v); err != nil || v != "g" {
		t.Fatalf("UPDATE … WHERE id = $1 RETURNING: %q %v", v, err)
	}
	for k, want := range map[int64][]string{1: {"a2!"}, 2: {"b"}, 3: {"c"}, 5: {"g"}, 404: {}} {
		for _, sql := range []string{"SELECT v FROM pgx_pk WHERE id = $1", "SELECT v FROM pgx_pk WHERE id = $1 AND n >= 0"} {
			rows, err := conn.Query(ctx, sql, k)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || !reflect.DeepEqual(append([]string{}, got...), want) {
				t.Fatalf("%s with $1 = %d: %q %v, want %q", sql, k, got, err, want)
			}
		}
	}
	// The lookup is prepared (and cached) before the block.
	lookup := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, id int64) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, "SELECT v FROM pgx_pk WHERE id = $1", id).Scan(&v); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("lookup %d: %v", id, err)
		}
		return v
	}
	if got := lookup(conn, 1); got != "a2!" {
		t.Fatalf("lookup 1 before the block: %q", got)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO pgx_pk (id, v) VALUES ($1, $2)", int64(30), "tx"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO pgx_pk (id, v) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v", int64(1), "tx-up"); err != nil {
		t.Fatal(err)
	}
	if a, b := lookup(tx, 30), lookup(tx, 1); a != "tx" || b != "tx-up" {
		t.Fatalf("the block's lookups see %q and %q, want its own writes tx and tx-up", a, b)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lookup(conn, 1); got != "tx-up" {
		t.Fatalf("lookup 1 after COMMIT: %q", got)
	}
}

// lib/pq through database/sql: queries, prepared statements, CopyIn in a
// transaction.
func testLibPQ(t *testing.T, n *node) {
	host, port, _ := net.SplitHostPort(n.pgAddr())
	db, err := sql.Open("postgres", fmt.Sprintf("host=%s port=%s user=mink dbname=mink sslmode=disable", host, port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	if _, err := db.Exec("CREATE TABLE pq_t (id integer NOT NULL, name text, amount numeric(8,2), ts timestamptz, ok boolean)"); err != nil {
		t.Fatal(err)
	}
	ins, err := db.Prepare("INSERT INTO pq_t VALUES ($1, $2, $3, $4, $5)")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 3, 4, 5, 6, 7, 890000000, time.UTC)
	for i := 1; i <= 3; i++ {
		res, err := ins.Exec(i, fmt.Sprintf("row %d", i), fmt.Sprintf("%d.50", i), ts, i%2 == 1)
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("RowsAffected %d", n)
		}
	}
	ins.Close()

	// CopyIn inside a transaction: visible after COMMIT, and a rolled back
	// one leaves nothing.
	copyIn := func(from, to int, commit bool) {
		txn, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		// lib/pq's CopyIn: a prepared COPY … FROM STDIN (what the deprecated
		// pq.CopyIn builds), one Exec per row, an empty Exec to finish.
		stmt, err := txn.Prepare(`COPY "pq_t" ("id", "name", "amount", "ts", "ok") FROM STDIN`)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i <= to; i++ {
			if _, err := stmt.Exec(i, fmt.Sprintf("copied %d", i), fmt.Sprintf("%d.25", i), ts, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := stmt.Exec(); err != nil {
			t.Fatalf("CopyIn flush: %v", err)
		}
		if err := stmt.Close(); err != nil {
			t.Fatal(err)
		}
		var inTx int
		if err := txn.QueryRow("SELECT count(*) FROM pq_t WHERE id >= $1", from).Scan(&inTx); err != nil || inTx != to-from+1 {
			t.Fatalf("the transaction sees %d copied rows (%v), want %d", inTx, err, to-from+1)
		}
		if commit {
			err = txn.Commit()
		} else {
			err = txn.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	copyIn(100, 199, true)
	copyIn(200, 249, false)

	rows, err := db.Query("SELECT id, name, amount, ts, ok FROM pq_t WHERE id < $1 OR id = $2 ORDER BY id", 100, 150)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id int
		var name, amount string
		var when time.Time
		var ok sql.NullBool
		if err := rows.Scan(&id, &name, &amount, &when, &ok); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %s %s %v", id, name, amount, when.UTC().Format(time.RFC3339Nano), ok))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 row 1 1.50 2024-03-04T05:06:07.89Z {true true}",
		"2 row 2 2.50 2024-03-04T05:06:07.89Z {false true}",
		"3 row 3 3.50 2024-03-04T05:06:07.89Z {true true}",
		"150 copied 150 150.25 2024-03-04T05:06:07.89Z {false false}",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var count int
	if err := db.QueryRow("SELECT count(*) FROM pq_t").Scan(&count); err != nil || count != 103 {
		t.Fatalf("count %d (%v), want 103", count, err)
	}
	_, err = db.Exec("INSERT INTO pq_t (name) VALUES ('no id')")
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "23502" {
		t.Fatalf("NOT NULL violation: %v", err)
	}
}

func requireCommand(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: %s", name, installHint)
	}
	return path
}

// psql: -c, -f with \copy, and how values print.
func testPsql(t *testing.T, n *node) {
	psql := requireCommand(t, "psql")
	host, port, _ := net.SplitHostPort(n.pgAddr())
	run := func(dir string, args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, append([]string{"-X", "-h", host, "-p", port, "-U", "mink", "-d", "mink", "-v", "ON_ERROR_STOP=1"}, args...)...)
		cmd.Dir = dir
		// No libpq settings from the environment; no pager.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "PSQL") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PAGER=", "LC_ALL=C.UTF-8")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}

	// Several -c, as PostgreSQL 15's psql prints them.
	// (A bytea literal in a SELECT, '\x00ff'::bytea, is a known bug: the
	// logic test select.test marks it.)
	out, errOut, code := run("", "-c", "SELECT 1 AS one, 'a b' AS two, NULL AS three", "-c", `SELECT true, 1.50::numeric(4,2)`)
	want := ` one | two | three 
-----+-----+-------
   1 | a b | 
(1 row)

 ?column? | numeric 
----------+---------
 t        |    1.50
(1 row)

`
	if code != 0 || out != want {
		t.Errorf("psql -c: exit %d, stderr %q\n got:\n%s\nwant:\n%s", code, errOut, out, want)
	}

	// An error: exit status 1 and PostgreSQL's message.
	_, errOut, code = run("", "-c", "SELECT * FROM nope")
	if code != 1 || !strings.Contains(errOut, `ERROR:  relation "nope" does not exist`) {
		t.Errorf("psql -c on a missing table: exit %d, stderr %q", code, errOut)
	}

	// A script with \copy from a file and to a file.
	dir := t.TempDir()
	data := "1,1234.5,2024-01-02 03:04:05.678+00,\\xdeadbeef,1 day 02:03:04,t,plain,0.1\n" +
		"2,-0.0001,1999-12-31 23:59:59+00,\\x,-3 days,f,\"two, words\",-2.5e-10\n" +
		"3,,,,,,,\n"
	script := `CREATE TABLE psql_fmt (id integer, n numeric(12,4), tz timestamptz, b bytea, iv interval, ok boolean, t text, f double precision);
\copy psql_fmt FROM 'data.csv' WITH (FORMAT csv)
SELECT * FROM psql_fmt ORDER BY id;
SET TimeZone = 'America/Los_Angeles';
SELECT id, tz FROM psql_fmt WHERE id = 1;
SELECT count(*) AS n, sum(n) AS total FROM psql_fmt;
\copy (SELECT id, t FROM psql_fmt ORDER BY id) TO 'out.csv' WITH (FORMAT csv)
`
	for name, content := range map[string]string{"data.csv": data, "script.sql": script} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = run(dir, "-f", "script.sql")
	// PostgreSQL 15's output for the same script.
	want = `CREATE TABLE
COPY 3
 id |     n     |             tz             |     b      |       iv       | ok |     t      |    f     
----+-----------+----------------------------+------------+----------------+----+------------+----------
  1 | 1234.5000 | 2024-01-02 03:04:05.678+00 | \xdeadbeef | 1 day 02:03:04 | t  | plain      |      0.1
  2 |   -0.0001 | 1999-12-31 23:59:59+00     | \x         | -3 days        | f  | two, words | -2.5e-10
  3 |           |                            |            |                |    |            |         
(3 rows)

SET
 id |             tz             
----+----------------------------
  1 | 2024-01-01 19:04:05.678-08
(1 row)

 n |   total   
---+-----------
 3 | 1234.4999
(1 row)

COPY 3
`
	if code != 0 || out != want {
		t.Errorf("psql -f: exit %d, stderr %q\n got:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	copied, err := os.ReadFile(filepath.Join(dir, "out.csv"))
	if err != nil || string(copied) != "1,plain\n2,\"two, words\"\n3,\n" {
		t.Errorf("\\copy to a file: %q %v", copied, err)
	}

	// ON_ERROR_ROLLBACK: psql wraps each statement of a block in a
	// savepoint and rolls back to it on an error, so the block goes on.
	script = `CREATE TABLE psql_sp (id int PRIMARY KEY, v text);
BEGIN;
INSERT INTO psql_sp VALUES (1, 'a');
INSERT INTO psql_sp VALUES (1, 'dup');
INSERT INTO psql_sp VALUES (2, 'b');
COMMIT;
SELECT * FROM psql_sp ORDER BY id;
`
	if err := os.WriteFile(filepath.Join(dir, "sp.sql"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(dir, "-v", "ON_ERROR_STOP=0", "-v", "ON_ERROR_ROLLBACK=on", "-f", "sp.sql")
	// PostgreSQL 15's output for the same script.
	want = `CREATE TABLE
BEGIN
INSERT 0 1
INSERT 0 1
COMMIT
 id | v 
----+---
  1 | a
  2 | b
(2 rows)

`
	if code != 0 || out != want || !strings.Contains(errOut, `ERROR:  duplicate key value violates unique constraint "psql_sp_pkey"`) {
		t.Errorf("psql ON_ERROR_ROLLBACK: exit %d, stderr %q\n got:\n%s\nwant:\n%s", code, errOut, out, want)
	}
}

// psycopg2 (Debian's python3-psycopg2) through test/clients/psycopg2_client.py.
func testPsycopg2(t *testing.T, n *node) {
	// Debian's python, not whichever python3 comes first on PATH.
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import psycopg2").CombinedOutput(); err != nil {
		t.Fatalf("python3-psycopg2 is not installed (%v: %s): %s", err, out, installHint)
	}
	host, port, _ := net.SplitHostPort(n.pgAddr())
	runClient(t, python, "../../test/clients/psycopg2_client.py", fmt.Sprintf("host=%s port=%s user=mink dbname=mink", host, port), "py_t")
}

// pgjdbc (Debian's libpostgresql-jdbc-java) with the machine's JDK, through
// test/clients/JdbcClient.java in single-file source mode.
func testPgJDBC(t *testing.T, n *node) {
	const jar = "/usr/share/java/postgresql.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("libpostgresql-jdbc-java is not installed (%v): %s", err, installHint)
	}
	java := requireCommand(t, "java")
	runClient(t, java, "-cp", jar, "../../test/clients/JdbcClient.java", fmt.Sprintf("jdbc:postgresql://%s/mink?user=mink", n.pgAddr()), "jdbc_t")
}

// SQLAlchemy 1.4 and pandas (Debian's python3-sqlalchemy and
// python3-pandas) through test/clients/sqlalchemy_client.py: reflection
// of columns, keys and indexes, an ORM round trip, to_sql and read_sql.
func testSQLAlchemy(t *testing.T, n *node) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import sqlalchemy, pandas, psycopg2").CombinedOutput(); err != nil {
		t.Fatalf("python3-sqlalchemy or python3-pandas is not installed (%v: %s): %s", err, out, installHint)
	}
	runClient(t, python, "../../test/clients/sqlalchemy_client.py", "postgresql+psycopg2://mink@"+n.pgAddr()+"/mink")
}

// runClient runs a client script; it prints "ok" or what failed.
func runClient(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// copyRows are the rows of COPY number k: ids k*copyRowsEach … +copyRowsEach-1.
const copyRowsEach = 5000

func copyRows(k int) [][]any {
	rows := make([][]any, copyRowsEach)
	for i := range rows {
		id := int64(k*copyRowsEach + i)
		rows[i] = []any{id, fmt.Sprintf("copy %d row %d", k, i)}
	}
	return rows
}

// A loop of COPYs, one of them cut short by SIGKILL, three times over:
// while its rows stream in, or right after the last one was sent.
// After each restart, every acknowledged COPY is there exactly once. The
// COPY the kill interrupted was never acknowledged: mink commits a COPY's
// rows bucket by bucket (sqlfront/write.go queues one append per bucket,
// each durable on its own), so each of its per-bucket parts is either
// wholly present or wholly absent, and nothing is present twice.
func TestSQLKillMidCopy(t *testing.T) {
	dataDir := t.TempDir()
	n := startSQLNode(t, dataDir)
	ctx := context.Background()
	const buckets = 4
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, fmt.Sprintf("CREATE TABLE kc (id bigint NOT NULL, v text) WITH (buckets = %d, bucket_key = 'id')", buckets))

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	acked := map[int]bool{}
	interrupted := map[int]bool{}
	next := 0 // the next COPY's number
	for round := 0; round < 3; round++ {
		first := next
		killAt := first + 3 + rng.Intn(4) // the COPY during which the kill comes
		var killed sync.WaitGroup
		var took time.Duration // of this round's COPYs so far
		for k := next; ; k++ {
			next = k + 1
			start := time.Now()
			var copied int64
			var err error
			switch {
			case k == killAt && round%2 == 0:
				// While the rows stream in: a random point of the time a
				// COPY takes.
				avg := took / time.Duration(k-first)
				delay := time.Duration(rng.Int63n(int64(avg) + 1))
				killed.Add(1)
				go func() {
					defer killed.Done()
					time.Sleep(delay)
					n.kill()
				}()
				copied, err = conn.CopyFrom(ctx, pgx.Identifier{"kc"}, []string{"id", "v"}, pgx.CopyFromRows(copyRows(k)))
			case k == killAt:
				// After the last row is sent, while the server commits: the
				// reader fires the kill when the COPY data runs out.
				delay := time.Duration(rng.Int63n(int64(took/time.Duration(k-first)) + 1))
				data := &onEOF{r: strings.NewReader(copyText(k)), fn: func() {
					killed.Add(1)
					go func() {
						defer killed.Done()
						time.Sleep(delay)
						n.kill()
					}()
				}}
				var tag pgconn.CommandTag
				tag, err = conn.PgConn().CopyFrom(ctx, data, "COPY kc (id, v) FROM STDIN")
				copied = tag.RowsAffected()
			default:
				copied, err = conn.CopyFrom(ctx, pgx.Identifier{"kc"}, []string{"id", "v"}, pgx.CopyFromRows(copyRows(k)))
			}
			took += time.Since(start)
			if err != nil {
				interrupted[k] = true
				break
			}
			if copied != copyRowsEach {
				t.Fatalf("COPY %d copied %d", k, copied)
			}
			acked[k] = true
			if k > killAt+50 {
				t.Fatal("the server survived SIGKILL")
			}
		}
		killed.Wait()

		// Restart on the same data directory and check every COPY so far.
		n.start()
		n.waitHealthy()
		n.waitSQL()
		conn = connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
		present := readIDs(t, conn, "SELECT id FROM kc")
		for id, c := range present {
			if c != 1 {
				t.Errorf("round %d: id %d is present %d times", round, id, c)
			}
			if k := int(id / copyRowsEach); k >= next {
				t.Errorf("round %d: id %d of COPY %d, which never ran", round, id, k)
			}
		}
		for k := range acked {
			missing := 0
			for i := 0; i < copyRowsEach; i++ {
				if present[int64(k*copyRowsEach+i)] == 0 {
					missing++
				}
			}
			if missing > 0 {
				t.Errorf("round %d: acknowledged COPY %d lost %d of its %d rows", round, k, missing, copyRowsEach)
			}
		}
		// The interrupted COPYs: whole bucket parts or nothing.
		for k := range interrupted {
			var state []string
			for b, ids := range bucketParts(t, copyRows(k), buckets) {
				in := 0
				for _, id := range ids {
					if present[id] > 0 {
						in++
					}
				}
				if in != 0 && in != len(ids) {
					t.Errorf("round %d: the interrupted COPY %d has %d of the %d rows of bucket %d", round, k, in, len(ids), b)
				}
				state = append(state, fmt.Sprintf("%d/%d", in, len(ids)))
			}
			if k == next-1 {
				sort.Strings(state)
				t.Logf("round %d: SIGKILL during COPY %d; after the restart it has, per bucket, %s of its rows", round, k, strings.Join(state, " "))
			}
		}
	}
}

// readIDs counts the ids a query returns.
func readIDs(t *testing.T, conn *pgx.Conn, query string) map[int64]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	present := map[int64]int{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		present[id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return present
}

// copyText is copyRows(k) in COPY's text format.
func copyText(k int) string {
	var b strings.Builder
	for _, r := range copyRows(k) {
		fmt.Fprintf(&b, "%d\t%s\n", r[0], r[1])
	}
	return b.String()
}

// onEOF calls fn once when r is exhausted.
type onEOF struct {
	r    *strings.Reader
	fn   func()
	done bool
}

func (o *onEOF) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == io.EOF && !o.done {
		o.done = true
		o.fn()
	}
	return n, err
}

// bucketParts groups the ids of rows by the bucket mink routes them to.
func bucketParts(t *testing.T, rows [][]any, buckets int) map[int][]int64 {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for _, r := range rows {
		b.Append(r[0].(int64))
	}
	ids := b.NewArray()
	defer ids.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ids}, int64(len(rows)))
	defer rec.Release()
	of, err := routing.Buckets(rec, []int{0}, buckets)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]int64{}
	for i, bucket := range of {
		out[int(bucket)] = append(out[int(bucket)], rows[i][0].(int64))
	}
	return out
}

// INSERTs from several connections, SIGKILL, restart: every acknowledged
// INSERT is there exactly once. An INSERT into a log table without a bucket
// key goes to one bucket as one append, so an unacknowledged one is there
// whole or not at all. The node's store is a local directory, where the WAL
// commits in groups: the kill lands while a put carries several writers'
// INSERTs and the next group waits behind it.
func TestSQLKillDurability(t *testing.T) {
	dataDir := t.TempDir()
	n := startSQLNode(t, dataDir)
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE kd (writer integer, seq integer, part integer)")

	const writers, rowsEach = 8, 3
	var mu sync.Mutex
	acked := map[[2]int]bool{}
	attempted := map[[2]int]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wconn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				attempted[[2]int{w, seq}] = true
				mu.Unlock()
				_, err := wconn.Exec(ctx, "INSERT INTO kd VALUES ($1, $2, 0), ($1, $2, 1), ($1, $2, 2)", int32(w), int32(seq))
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked[[2]int{w, seq}] = true
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	n.kill()
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("%d INSERTs acknowledged, %d attempted", len(acked), len(attempted))
	mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no INSERT was acknowledged before the kill")
	}

	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	rows, err := conn.Query(ctx, "SELECT writer, seq, part FROM kd")
	if err != nil {
		t.Fatal(err)
	}
	parts := map[[2]int][]int{}
	for rows.Next() {
		var w, seq, part int32
		if err := rows.Scan(&w, &seq, &part); err != nil {
			t.Fatal(err)
		}
		k := [2]int{int(w), int(seq)}
		parts[k] = append(parts[k], int(part))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k := range acked {
		if parts[k] == nil {
			t.Errorf("acknowledged INSERT %v is missing", k)
		}
	}
	for k, p := range parts {
		sort.Ints(p)
		if !reflect.DeepEqual(p, []int{0, 1, 2}) {
			t.Errorf("INSERT %v has rows %v, want each of 0, 1, 2 once", k, p)
		}
		if !attempted[k] {
			t.Errorf("INSERT %v was never sent", k)
		}
	}
	// The table still takes writes after the restart.
	mustExec(t, conn, "INSERT INTO kd VALUES (-1, -1, 0)")
}
