package main

// End-to-end tests of primary-key tables: the real binary, driven by pgx
// (simple and extended protocol) and psql, and kill -9 after acknowledged
// upserts and deletes.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestPKStatements runs every statement on primary-key tables through pgx,
// in both protocols, checking tags, rows and SQLSTATEs, then psql.
func TestPKStatements(t *testing.T) {
	n := startSQLNode(t, "")
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) { testPKPgx(t, n, mode) })
	}
	t.Run("psql", func(t *testing.T) { testPKPsql(t, n) })
}

func testPKPgx(t *testing.T, n *node, mode pgx.QueryExecMode) {
	ctx := context.Background()
	conn := connect(t, n.pgURL(), mode)
	other := connect(t, n.pgURL(), mode)
	tbl := "pk_" + strings.ReplaceAll(mode.String(), " ", "_")
	q := func(s string) string { return strings.ReplaceAll(s, "@T", tbl) }
	tag := func(sql string, args ...any) string {
		t.Helper()
		return mustExec(t, conn, q(sql), args...).String()
	}
	fails := func(code, sql string, args ...any) *pgconn.PgError {
		t.Helper()
		_, err := conn.Exec(ctx, q(sql), args...)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != code {
			t.Fatalf("%s: %v, want SQLSTATE %s", q(sql), err, code)
		}
		return pe
	}
	state := func(c *pgx.Conn) map[int64]string {
		t.Helper()
		rows, err := c.Query(ctx, q("SELECT id, v FROM @T"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]string{}
		for rows.Next() {
			var id int64
			var v *string
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			out[id] = "<null>"
			if v != nil {
				out[id] = *v
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	expect := func(want map[int64]string) {
		t.Helper()
		if got := state(conn); !reflect.DeepEqual(got, want) {
			t.Fatalf("table is %v, want %v", got, want)
		}
	}

	if got := tag("CREATE TABLE @T (id bigint PRIMARY KEY, v text, n integer NOT NULL DEFAULT 0) WITH (buckets = 3)"); got != "CREATE TABLE" {
		t.Fatal(got)
	}
	if got := tag("INSERT INTO @T (id, v) VALUES (1, 'a'), (2, 'b'), ($1, $2)", int64(3), "c"); got != "INSERT 0 3" {
		t.Fatal(got)
	}
	pe := fails("23505", "INSERT INTO @T (id, v) VALUES (10, 'new'), (2, 'dup')")
	if pe.Detail != "Key (id)=(2) already exists." || pe.ConstraintName != tbl+"_pkey" || pe.Message != fmt.Sprintf("duplicate key value violates unique constraint %q", tbl+"_pkey") {
		t.Fatalf("23505: %q / %q / %q", pe.Message, pe.Detail, pe.ConstraintName)
	}
	fails("23505", "INSERT INTO @T (id, v) VALUES (11, 'x'), (11, 'y')")
	expect(map[int64]string{1: "a", 2: "b", 3: "c"})
	if got := tag("INSERT INTO @T (id, v) VALUES (3, 'skip'), (4, 'd') ON CONFLICT DO NOTHING"); got != "INSERT 0 1" {
		t.Fatal(got)
	}
	if got := tag("INSERT INTO @T (id, v) SELECT $1, $2 UNION ALL SELECT 5, 'e' ON CONFLICT (id) DO UPDATE SET v = excluded.v || '!', n = @T.n + 1", int64(1), "a2"); got != "INSERT 0 2" {
		t.Fatal(got)
	}
	if got := tag("INSERT INTO @T AS t (id, v) VALUES (1, 'no'), (2, 'yes') ON CONFLICT (id) DO UPDATE SET v = excluded.v WHERE t.n = 0"); got != "INSERT 0 1" {
		t.Fatal(got)
	}
	expect(map[int64]string{1: "a2!", 2: "yes", 3: "c", 4: "d", 5: "e"})
	fails("21000", "INSERT INTO @T (id, v) VALUES (7, 'x'), (7, 'y') ON CONFLICT (id) DO UPDATE SET v = excluded.v")
	fails("42P10", "INSERT INTO @T (id, v) VALUES (7, 'x') ON CONFLICT (v) DO NOTHING")
	fails("23502", "INSERT INTO @T (v) VALUES ('no key')")
	fails("23502", "INSERT INTO @T (id, v, n) VALUES (8, 'x', NULL)")

	// RETURNING.
	var id int64
	var v string
	if err := conn.QueryRow(ctx, q("INSERT INTO @T (id, v) VALUES (6, 'f') RETURNING id, v || '?'")).Scan(&id, &v); err != nil || id != 6 || v != "f?" {
		t.Fatalf("INSERT RETURNING: %d %q %v", id, v, err)
	}
	if err := conn.QueryRow(ctx, q("UPDATE @T SET v = 'g' WHERE id = $1 RETURNING v"), int64(6)).Scan(&v); err != nil || v != "g" {
		t.Fatalf("UPDATE RETURNING: %q %v", v, err)
	}
	if err := conn.QueryRow(ctx, q("DELETE FROM @T WHERE id = 6 RETURNING v")).Scan(&v); err != nil || v != "g" {
		t.Fatalf("DELETE RETURNING: %q %v", v, err)
	}

	// UPDATE and DELETE by key and by predicate.
	if got := tag("UPDATE @T SET n = n + 10 WHERE id = $1", int64(3)); got != "UPDATE 1" {
		t.Fatal(got)
	}
	if got := tag("UPDATE @T SET v = upper(v) WHERE n < 5"); got != "UPDATE 4" {
		t.Fatal(got)
	}
	if got := tag("DELETE FROM @T WHERE v = 'D' OR id = 99"); got != "DELETE 1" {
		t.Fatal(got)
	}
	expect(map[int64]string{1: "A2!", 2: "YES", 3: "c", 5: "E"})
	fails("0A000", "UPDATE @T SET id = 100 WHERE id = 1")
	fails("23502", "UPDATE @T SET n = NULL")
	fails("42703", "UPDATE @T SET nosuch = 1")
	mustExec(t, conn, q("CREATE TABLE @T_log (a integer)"))
	fails("0A000", "UPDATE @T_log SET a = 1")
	fails("0A000", "DELETE FROM @T_log")

	// COPY: a duplicate key stores none of the COPY's rows.
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{tbl}, []string{"id", "v"}, pgx.CopyFromRows([][]any{{int64(20), "x"}, {int64(21), "y"}, {int64(3), "dup"}})); sqlState(err) != "23505" {
		t.Fatalf("COPY with a duplicate: %v", err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{tbl}, []string{"id", "v"}, pgx.CopyFromRows([][]any{{int64(20), "x"}, {int64(20), "y"}})); sqlState(err) != "23505" {
		t.Fatalf("COPY with a key twice: %v", err)
	}
	expect(map[int64]string{1: "A2!", 2: "YES", 3: "c", 5: "E"})
	if c, err := conn.CopyFrom(ctx, pgx.Identifier{tbl}, []string{"id", "v"}, pgx.CopyFromRows([][]any{{int64(20), "x"}, {int64(21), "y"}})); err != nil || c != 2 {
		t.Fatalf("COPY: %d %v", c, err)
	}

	// Point lookups: prepared, with parameters; and the same through the engine.
	for _, k := range []int64{1, 2, 21, 404} {
		var fast, slow []string
		for _, sql := range []string{"SELECT v FROM @T WHERE id = $1", "SELECT v FROM @T WHERE id = $1 AND n >= 0"} {
			rows, err := conn.Query(ctx, q(sql), k)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if fast == nil {
				fast = append([]string{}, got...)
			} else {
				slow = append([]string{}, got...)
			}
		}
		if !reflect.DeepEqual(fast, slow) || (k != 404) != (len(fast) == 1) {
			t.Fatalf("lookup %d: fast %v, engine %v", k, fast, slow)
		}
	}

	// A transaction block: the writes are applied at COMMIT, discarded at
	// ROLLBACK; the block sees its own writes (a point lookup, prepared
	// before the block in the extended protocol, and a scan).
	lookup := func(c pgx.Tx, id int64) string {
		t.Helper()
		var v string
		if err := c.QueryRow(ctx, q("SELECT v FROM @T WHERE id = $1"), id).Scan(&v); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("lookup %d: %v", id, err)
		}
		return v
	}
	var before string
	if err := conn.QueryRow(ctx, q("SELECT v FROM @T WHERE id = $1"), int64(1)).Scan(&before); err != nil || before != "A2!" {
		t.Fatalf("lookup 1 before the block: %q %v", before, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, q("INSERT INTO @T (id, v) VALUES (30, 'tx')")); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, q("INSERT INTO @T (id, v) VALUES (1, 'tx-up') ON CONFLICT (id) DO UPDATE SET v = excluded.v")); err != nil {
		t.Fatal(err)
	}
	if st := state(other); st[30] != "" || st[1] != "A2!" {
		t.Fatalf("another session sees uncommitted writes: %v", st)
	}
	if a, b := lookup(tx, 30), lookup(tx, 1); a != "tx" || b != "tx-up" {
		t.Fatalf("the block's lookups see %q and %q, want its own writes tx and tx-up", a, b)
	}
	var inBlock int64
	if err := tx.QueryRow(ctx, q("SELECT count(*) FROM @T WHERE v LIKE 'tx%'")).Scan(&inBlock); err != nil || inBlock != 2 {
		t.Fatalf("the block's scan sees %d rows of its own, %v; want 2", inBlock, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A duplicate key inside a block fails at the statement (23505) and
	// aborts the block (25P02), as in PostgreSQL.
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, q("INSERT INTO @T (id, v) VALUES (32, 'dup')")); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, q("INSERT INTO @T (id, v) VALUES (32, 'again')"))
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("duplicate of the block's own key: %v, want 23505", err)
	}
	_, err = tx.Exec(ctx, q("SELECT 1"))
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "25P02" {
		t.Fatalf("after the failed INSERT: %v, want 25P02", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, q("INSERT INTO @T (id, v) VALUES (31, 'rolled back')")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	expect(map[int64]string{1: "tx-up", 2: "YES", 3: "c", 5: "E", 20: "x", 21: "y", 30: "tx"})

	// The changelog holds every change, in order per bucket.
	rows, err := conn.Query(ctx, q(`SELECT _change_type, _bucket, _offset, id, v FROM "@T$changelog" ORDER BY _bucket, _offset`))
	if err != nil {
		t.Fatal(err)
	}
	folded := map[int64]string{}
	for rows.Next() {
		var ct string
		var bucket, off, id int64
		var val *string
		if err := rows.Scan(&ct, &bucket, &off, &id, &val); err != nil {
			t.Fatal(err)
		}
		s := "<null>"
		if val != nil {
			s = *val
		}
		switch ct {
		case "+I", "+U":
			folded[id] = s
		case "-D":
			delete(folded, id)
		case "-U":
		default:
			t.Fatalf("change type %q", ct)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := state(conn); !reflect.DeepEqual(folded, got) {
		t.Fatalf("the changelog folds to %v, the table is %v", folded, got)
	}
}

func testPKPsql(t *testing.T, n *node) {
	psql := requireCommand(t, "psql")
	host, port, _ := net.SplitHostPort(n.pgAddr())
	run := func(args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, append([]string{"-X", "-h", host, "-p", port, "-U", "mink", "-d", "mink"}, args...)...)
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
	out, errOut, code := run("-v", "ON_ERROR_STOP=1",
		"-c", "CREATE TABLE pkpsql (k text, n integer, v text, PRIMARY KEY (k, n))",
		"-c", "INSERT INTO pkpsql VALUES ('a', 1, 'x'), ('a', 2, 'y')",
		"-c", "INSERT INTO pkpsql VALUES ('a', 1, 'z') ON CONFLICT (k, n) DO UPDATE SET v = excluded.v RETURNING *",
		"-c", "UPDATE pkpsql SET v = v || '+' WHERE n = 2",
		"-c", "DELETE FROM pkpsql WHERE k = 'b'",
		"-c", "SELECT * FROM pkpsql WHERE k = 'a' AND n = 2",
		"-c", "SELECT * FROM pkpsql ORDER BY n")
	want := `CREATE TABLE
INSERT 0 2
 k | n | v 
---+---+---
 a | 1 | z
(1 row)

INSERT 0 1
UPDATE 1
DELETE 0
 k | n | v  
---+---+----
 a | 2 | y+
(1 row)

 k | n | v  
---+---+----
 a | 1 | z
 a | 2 | y+
(2 rows)

`
	if code != 0 || out != want {
		t.Fatalf("psql: exit %d\n%s\nstderr: %s\nwant:\n%s", code, out, errOut, want)
	}
	_, errOut, code = run("-c", "INSERT INTO pkpsql VALUES ('a', 2, 'dup')")
	if code == 0 || !strings.Contains(errOut, `ERROR:  duplicate key value violates unique constraint "pkpsql_pkey"`) ||
		!strings.Contains(errOut, `DETAIL:  Key (k, n)=(a, 2) already exists.`) {
		t.Fatalf("psql duplicate: exit %d: %s", code, errOut)
	}
	// \d does not break on a primary-key table.
	out, errOut, code = run("-c", `\d pkpsql`)
	if code != 0 || !strings.Contains(out, "pkpsql") {
		t.Fatalf(`psql \d: exit %d: %s %s`, code, out, errOut)
	}
}

// TestPKKillAfterAcknowledged runs seeded random inserts, upserts, updates
// and deletes, SIGKILLs the server in the middle of them three times, and
// after each restart checks the table against a model of the acknowledged
// statements: only the statement the kill interrupted may or may not have
// happened. The changelog folds to the same state.
func TestPKKillAfterAcknowledged(t *testing.T) {
	dataDir := t.TempDir()
	n := startSQLNode(t, dataDir)
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pkk (id bigint PRIMARY KEY, v bigint) WITH (buckets = 4)")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	const keys = 64
	model := map[int64]int64{}
	for round := 0; round < 3; round++ {
		killAfter := 50 + rng.Intn(150)
		var killed sync.WaitGroup
		var inFlight func(map[int64]int64) // the interrupted statement's effect
		for i := 0; ; i++ {
			k := rng.Int63n(keys)
			val := rng.Int63n(1000)
			var sql string
			var args []any
			var apply func(m map[int64]int64)
			switch op := rng.Intn(5); op {
			case 0:
				sql, args = "INSERT INTO pkk VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v", []any{k, val}
				apply = func(m map[int64]int64) { m[k] = val }
			case 1:
				sql, args = "INSERT INTO pkk VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = pkk.v + excluded.v", []any{k, val}
				apply = func(m map[int64]int64) { m[k] += val }
			case 2:
				sql, args = "UPDATE pkk SET v = v * 2 WHERE id = $1", []any{k}
				apply = func(m map[int64]int64) {
					if old, ok := m[k]; ok {
						m[k] = old * 2
					}
				}
			case 3:
				sql, args = "DELETE FROM pkk WHERE id = $1", []any{k}
				apply = func(m map[int64]int64) { delete(m, k) }
			case 4:
				sql, args = "DELETE FROM pkk WHERE id >= $1 AND id < $1 + 3", []any{k}
				apply = func(m map[int64]int64) {
					for j := k; j < k+3; j++ {
						delete(m, j)
					}
				}
			}
			if i == killAfter {
				killed.Add(1)
				delay := time.Duration(rng.Int63n(int64(20 * time.Millisecond)))
				go func() {
					defer killed.Done()
					time.Sleep(delay)
					n.kill()
				}()
			}
			if _, err := conn.Exec(ctx, sql, args...); err != nil {
				if i < killAfter {
					t.Fatalf("%s %v: %v", sql, args, err)
				}
				inFlight = apply
				break
			}
			apply(model)
			if i > killAfter+1000 {
				t.Fatal("the server survived SIGKILL")
			}
		}
		killed.Wait()
		n.start()
		n.waitHealthy()
		n.waitSQL()
		conn = connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
		got := readKV(t, conn, "SELECT id, v FROM pkk")
		with := map[int64]int64{}
		for k, v := range model {
			with[k] = v
		}
		inFlight(with)
		// The interrupted statement happened or not for each key it
		// touches (a statement is atomic per bucket, not across buckets).
		happened, notHappened := 0, 0
		for k := int64(0); k < keys+3; k++ {
			g, gok := got[k]
			m, mok := model[k]
			w, wok := with[k]
			switch {
			case gok == mok && g == m && (gok != wok || g != w):
				notHappened++
			case gok == wok && g == w && (gok != mok || g != m):
				happened++
			case gok == mok && g == m:
			default:
				t.Fatalf("round %d: after restart key %d is %d (present %v); the model says %d (%v), or %d (%v) with the interrupted statement\ntable %v\nmodel %v",
					round, k, g, gok, m, mok, w, wok, sortedKV(got), sortedKV(model))
			}
		}
		t.Logf("round %d: the interrupted statement happened for %d keys, not for %d", round, happened, notHappened)
		model = got
		folded := map[int64]int64{}
		rows, err := conn.Query(ctx, `SELECT _change_type, id, v FROM "pkk$changelog" ORDER BY _bucket, _offset`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var ct string
			var id, v int64
			if err := rows.Scan(&ct, &id, &v); err != nil {
				t.Fatal(err)
			}
			switch ct {
			case "+I", "+U":
				folded[id] = v
			case "-D":
				delete(folded, id)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(folded, model) {
			t.Fatalf("round %d: the changelog folds to %v, want %v", round, sortedKV(folded), sortedKV(model))
		}
		// Point lookups agree with the model.
		for k := int64(0); k < keys; k++ {
			var v int64
			err := conn.QueryRow(ctx, "SELECT v FROM pkk WHERE id = $1", k).Scan(&v)
			want, ok := model[k]
			if (err == pgx.ErrNoRows) == ok || (ok && (err != nil || v != want)) {
				t.Fatalf("round %d: lookup %d: %d %v, want %d (present %v)", round, k, v, err, want, ok)
			}
		}
	}
}

func readKV(t *testing.T, conn *pgx.Conn, query string) map[int64]int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	for rows.Next() {
		var k, v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKV(m map[int64]int64) string {
	var keys []int64
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%d:%d ", k, m[k])
	}
	return b.String()
}

// Two nodes: a primary-key table whose buckets are spread over both is
// written, updated, deleted, scanned, looked up and its changelog read
// through either node, the other node's buckets through Flight.
func TestPKTwoNodes(t *testing.T) {
	etcd := startTestEtcd(t)
	extra := []string{"--object-store", "file://" + t.TempDir(), "--coordinator-tick", "200ms"}
	nodes := make([]*node, 2)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOpts{nodeID: i + 1, etcd: strings.Join(etcd.Endpoints(), ","), leaseTTL: "3s", extra: extra})
		nodes[i].start()
		nodes[i].waitHealthy()
	}
	waitFor(t, 30*time.Second, "two live nodes", func() bool {
		live := 0
		for _, n := range clusterStatus(t, nodes[1].admin).Nodes {
			if n.Live {
				live++
			}
		}
		return live == 2
	})
	ctx := context.Background()
	c1 := connect(t, nodes[0].pgURL(), pgx.QueryExecModeCacheStatement)
	c2 := connect(t, nodes[1].pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c1, "CREATE TABLE pk2n (id bigint PRIMARY KEY, v bigint) WITH (buckets = 6)")
	st := clusterStatus(t, nodes[0].admin)
	for _, n := range st.Nodes {
		if n.BucketsLed == 0 {
			t.Fatalf("node %d leads no bucket: %+v", n.ID, st.Nodes)
		}
	}
	model := map[int64]int64{}
	for i := int64(0); i < 60; i++ {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		mustExec(t, c, "INSERT INTO pk2n VALUES ($1, $2)", i, i*10)
		model[i] = i * 10
	}
	if _, err := c2.Exec(ctx, "INSERT INTO pk2n VALUES (7, 0)"); sqlState(err) != "23505" {
		t.Fatalf("duplicate through node 2: %v", err)
	}
	if tag := mustExec(t, c1, "INSERT INTO pk2n SELECT i, -i FROM generate_series(50, 69) AS s(i) ON CONFLICT (id) DO UPDATE SET v = excluded.v").String(); tag != "INSERT 0 20" {
		t.Fatal(tag)
	}
	for i := int64(50); i < 70; i++ {
		model[i] = -i
	}
	if tag := mustExec(t, c2, "UPDATE pk2n SET v = v + 1 WHERE id % 3 = 0").String(); tag != fmt.Sprintf("UPDATE %d", 24) {
		t.Fatal(tag)
	}
	for k := range model {
		if k%3 == 0 {
			model[k]++
		}
	}
	if tag := mustExec(t, c1, "DELETE FROM pk2n WHERE id % 5 = 0").String(); tag != "DELETE 14" {
		t.Fatal(tag)
	}
	for k := range model {
		if k%5 == 0 {
			delete(model, k)
		}
	}
	for i, c := range []*pgx.Conn{c1, c2} {
		if got := readKV(t, c, "SELECT id, v FROM pk2n"); !reflect.DeepEqual(got, model) {
			t.Fatalf("node %d scans %v, want %v", i+1, sortedKV(got), sortedKV(model))
		}
		for k := int64(0); k < 70; k++ {
			var v int64
			err := c.QueryRow(ctx, "SELECT v FROM pk2n WHERE id = $1", k).Scan(&v)
			want, ok := model[k]
			if (err == pgx.ErrNoRows) == ok || (ok && (err != nil || v != want)) {
				t.Fatalf("node %d: lookup %d: %d %v, want %d (present %v)", i+1, k, v, err, want, ok)
			}
		}
		folded := map[int64]int64{}
		rows, err := c.Query(ctx, `SELECT _change_type, id, v FROM "pk2n$changelog" ORDER BY _bucket, _offset`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var ct string
			var id, v int64
			if err := rows.Scan(&ct, &id, &v); err != nil {
				t.Fatal(err)
			}
			switch ct {
			case "+I", "+U":
				folded[id] = v
			case "-D":
				delete(folded, id)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(folded, model) {
			t.Fatalf("node %d: the changelog folds to %v", i+1, sortedKV(folded))
		}
	}
}
