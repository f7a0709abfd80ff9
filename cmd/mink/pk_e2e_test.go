package main

// End-to-end tests of primary-key tables: the real binary, driven by psql,
// kill -9 after acknowledged upserts and deletes, and two nodes.

import (
	"context"
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
)

// testPKPsql is TestSQLClients/psql-pk: psql's output of statements on a
// primary-key table with a composite key, its duplicate-key error with
// DETAIL, and \d. The statements' tags, rows and SQLSTATEs are
// sqlfront/testdata/logic/pk_statements.test.
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
