package sqlfront_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/sqlfront"
)

// A point lookup (every key column fixed by equality) skips the engine —
// it reads no bucket scan — and answers exactly what the engine answers:
// the same column names, types and values, in text and binary, through the
// simple and the extended protocol and prepared statements.
func TestPointLookup(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE TABLE lk (id bigint, s text, u uuid, d date, ts timestamptz, n numeric(10,2), f double precision,
		b bytea, j jsonb, iv interval, bo boolean, vc varchar(4), PRIMARY KEY (id, s)) WITH (buckets = 3)`)
	exec(`INSERT INTO lk VALUES (1, 'a', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '2024-01-02 03:04:05.123456+00', 12.5, 1.25, '\x00ff', '{"k": [1, 2]}', '1 day 2 hours', true, 'abcd')`)
	exec(`INSERT INTO lk VALUES (1, 'b', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`)
	exec(`INSERT INTO lk VALUES (-7, 'ü', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', '1999-12-31', '1970-01-01 00:00:00+00', -0.01, -1e300, '', '[]', '-1 mons', false, '')`)
	exec(`CREATE TABLE lkp (region text, id integer, v text, PRIMARY KEY (region, id)) PARTITION BY LIST (region) WITH (buckets = 2)`)
	exec(`INSERT INTO lkp VALUES ('eu', 1, 'one'), ('us', 1, 'uno'), ('eu', 2, 'two')`)
	exec(`CREATE TABLE lku (u uuid, d date, ts timestamptz, v text, PRIMARY KEY (u, d, ts))`)
	exec(`INSERT INTO lku VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '2024-01-02 03:04:05+00', 'found')`)
	front := n.Server.SQLFrontend().(*sqlfront.Frontend)

	type result struct {
		fields []string
		rows   [][]any
	}
	query := func(mode pgx.QueryExecMode, sql string, args ...any) result {
		t.Helper()
		rows, err := conn.Query(ctx, sql, append([]any{mode}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var res result
		for _, fd := range rows.FieldDescriptions() {
			res.fields = append(res.fields, fmt.Sprintf("%s:%d:%d:%d", fd.Name, fd.DataTypeOID, fd.DataTypeSize, fd.TypeModifier))
		}
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			res.rows = append(res.rows, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return res
	}
	cases := []struct {
		fast, slow string // the slow one has a condition the fast path does not take
		args       []any
		rows       int
	}{
		{"SELECT * FROM lk WHERE id = $1 AND s = $2", "SELECT * FROM lk WHERE id = $1 AND s = $2 AND true", []any{int64(1), "a"}, 1},
		{"SELECT * FROM lk WHERE id = $1 AND s = $2", "SELECT * FROM lk WHERE id = $1 AND s = $2 AND true", []any{int64(1), "b"}, 1},
		{"SELECT * FROM lk WHERE s = $2 AND id = $1", "SELECT * FROM lk WHERE id = $1 AND s = $2 AND true", []any{int64(-7), "ü"}, 1},
		{"SELECT * FROM lk WHERE id = $1 AND s = $2", "SELECT * FROM lk WHERE id = $1 AND s = $2 AND true", []any{int64(2), "a"}, 0},
		{"SELECT vc, id, x.s AS key FROM lk x WHERE x.id = 1 AND x.s = 'a'", "SELECT vc, id, x.s AS key FROM lk x WHERE x.id = 1 AND x.s = 'a' AND true", nil, 1},
		{"SELECT lk.* FROM lk WHERE 1 = id AND 'a' = s", "SELECT lk.* FROM lk WHERE 1 = id AND 'a' = s AND true", nil, 1},
		{"SELECT v FROM lkp WHERE region = $1 AND id = $2", "SELECT v FROM lkp WHERE region = $1 AND id = $2 AND true", []any{"us", int32(1)}, 1},
		{"SELECT v FROM lkp WHERE region = $1 AND id = $2", "SELECT v FROM lkp WHERE region = $1 AND id = $2 AND true", []any{"ap", int32(1)}, 0},
		{"SELECT * FROM lkp WHERE region = 'eu' AND id = 2", "SELECT * FROM lkp WHERE region = 'eu' AND id = 2 AND true", nil, 1},
		// Keys of other types, with string literals read as the key's type.
		{"SELECT v FROM lku WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AND d = '2024-02-29' AND ts = '2024-01-02 04:04:05+01'",
			"SELECT v FROM lku WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AND d = '2024-02-29' AND ts = '2024-01-02 04:04:05+01' AND true", nil, 1},
		{"SELECT v FROM lku WHERE u = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid AND d = '2024-02-29' AND ts = '2024-01-02 03:04:05+00'",
			"SELECT v FROM lku WHERE u = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid AND d = '2024-02-29' AND ts = '2024-01-02 03:04:05+00' AND true", nil, 1},
		{"SELECT v FROM lku WHERE u = $1 AND d = $2 AND ts = $3", "SELECT v FROM lku WHERE u = $1 AND d = $2 AND ts = $3 AND true",
			[]any{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2024-02-29", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}, 1},
		{"SELECT v FROM lku WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AND d = '2024-03-01' AND ts = '2024-01-02 03:04:05+00'",
			"SELECT v FROM lku WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AND d = '2024-03-01' AND ts = '2024-01-02 03:04:05+00' AND true", nil, 0},
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec, pgx.QueryExecModeSimpleProtocol}
	for _, c := range cases {
		for _, mode := range modes {
			before := front.BucketScans()
			fast := query(mode, c.fast, c.args...)
			if scans := front.BucketScans() - before; scans != 0 {
				t.Errorf("%s (mode %v): %d bucket scans, want the point-lookup path (0)", c.fast, mode, scans)
			}
			before = front.BucketScans()
			slow := query(mode, c.slow, c.args...)
			if front.BucketScans() == before && c.rows > 0 {
				t.Errorf("%s: the engine path scanned no bucket", c.slow)
			}
			if len(fast.rows) != c.rows {
				t.Errorf("%s %v (mode %v): %d rows, want %d", c.fast, c.args, mode, len(fast.rows), c.rows)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("%s %v (mode %v):\nfast %v\nslow %v", c.fast, c.args, mode, fast, slow)
			}
		}
	}
	// A prepared statement, executed many times, sees every change.
	if _, err := conn.Prepare(ctx, "get", "SELECT f FROM lk WHERE id = $1 AND s = $2"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		exec("UPDATE lk SET f = $1 WHERE id = 1 AND s = 'a'", float64(i))
		var f float64
		if err := conn.QueryRow(ctx, "get", int64(1), "a").Scan(&f); err != nil || f != float64(i) {
			t.Fatalf("prepared lookup %d: %v %v", i, f, err)
		}
	}
	exec("DELETE FROM lk WHERE id = 1 AND s = 'a'")
	if err := conn.QueryRow(ctx, "get", int64(1), "a").Scan(new(float64)); err != pgx.ErrNoRows {
		t.Fatalf("lookup of a deleted key: %v", err)
	}
	// A NULL key matches nothing, as in PostgreSQL.
	if err := conn.QueryRow(ctx, "get", nil, "a").Scan(new(float64)); err != pgx.ErrNoRows {
		t.Fatalf("lookup of a NULL key: %v", err)
	}
	// Errors are the engine's: a column that does not exist.
	_, err = conn.Exec(ctx, "SELECT nosuch FROM lk WHERE id = 1 AND s = 'a'")
	var pe *pgconn.PgError
	if !errorsAs(err, &pe) || pe.Code != "42703" {
		t.Fatalf("unknown column: %v", err)
	}
}

func errorsAs(err error, pe **pgconn.PgError) bool {
	e, ok := err.(*pgconn.PgError)
	if ok {
		*pe = e
	}
	return ok
}

// Read-modify-write statements on one row from several sessions at once
// lose no update: UPDATE and ON CONFLICT DO UPDATE write conditionally on
// the row they read and retry when another session got in between.
func TestPKConcurrentIncrements(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	setup, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close(ctx)
	for _, sql := range []string{
		"CREATE TABLE ctr (id integer PRIMARY KEY, v bigint NOT NULL)",
		"INSERT INTO ctr VALUES (1, 0)",
	} {
		if _, err := setup.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	const sessions, each = 4, 40
	errs := make(chan error, sessions)
	for s := 0; s < sessions; s++ {
		go func() {
			conn, err := pgx.Connect(ctx, n.URL)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for i := 0; i < each; i++ {
				if _, err := conn.Exec(ctx, "UPDATE ctr SET v = v + 1 WHERE id = 1"); err != nil {
					errs <- err
					return
				}
				if _, err := conn.Exec(ctx, "INSERT INTO ctr VALUES (2, 1) ON CONFLICT (id) DO UPDATE SET v = ctr.v + 1"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for s := 0; s < sessions; s++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for id := 1; id <= 2; id++ {
		var v int64
		if err := setup.QueryRow(ctx, "SELECT v FROM ctr WHERE id = $1", id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != sessions*each {
			t.Errorf("row %d: %d increments survived, want %d", id, v, sessions*each)
		}
	}
}

// A statement over several buckets whose write fails half-way: each
// bucket's part is there entirely or not at all, the client gets 40003
// when the outcome of a write is unknown (it may have been stored) and
// 57P03 when the bucket certainly stored nothing, and nothing is applied
// twice.
func TestPKWriteFailsHalfway(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	defer sqlfront.SetKVWriteHook(nil)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE fh (id bigint PRIMARY KEY, v text) WITH (buckets = 4)")
	exec("INSERT INTO fh SELECT i, 'a' FROM generate_series(0, 39) AS s(i)")
	// Which bucket holds which key, from the changelog.
	bucketOf := map[int64]uint64{}
	rows, err := conn.Query(ctx, `SELECT id, _bucket FROM "fh$changelog"`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var b uint64
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		bucketOf[id] = b
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	victim := bucketOf[0]
	state := func() map[int64]string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT id, v FROM fh")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]string{}
		for rows.Next() {
			var id int64
			var v string
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			out[id] = v
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return out
	}
	wantCode := func(err error, code string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errorsAs(err, &pe) || pe.Code != code {
			t.Fatalf("got %v, want SQLSTATE %s", err, code)
		}
	}

	// 1. The victim's write is stored but its answer is lost: 40003, and
	// every row is there once.
	sqlfront.SetKVWriteHook(func(b uint64, write func() error) error {
		err := write()
		if b == victim && err == nil {
			return fmt.Errorf("injected lost answer: %w", buckets.ErrUnknownOutcome)
		}
		return err
	})
	// perBucket checks that each bucket's rows 0..39 all have one value,
	// and returns it by bucket.
	perBucket := func(got map[int64]string) map[uint64]string {
		t.Helper()
		out := map[uint64]string{}
		for id := int64(0); id < 40; id++ {
			b := bucketOf[id]
			if v, ok := out[b]; ok && v != got[id] {
				t.Fatalf("bucket %d has rows %q and %q: a bucket's part of a statement must be all there or not at all", b, v, got[id])
			}
			out[b] = got[id]
		}
		return out
	}
	_, err = conn.Exec(ctx, "UPDATE fh SET v = 'b'")
	wantCode(err, "40003")
	if v := perBucket(state())[victim]; v != "b" {
		t.Fatalf("the victim bucket's rows are %q, want its write stored", v)
	}
	// 2. The victim stores nothing: 57P03; the victim's part is not there,
	// the other buckets' parts entirely or not at all.
	sqlfront.SetKVWriteHook(func(b uint64, write func() error) error {
		if b == victim {
			return fmt.Errorf("injected: nothing appended: %w", buckets.ErrUnavailable)
		}
		return write()
	})
	_, err = conn.Exec(ctx, "UPDATE fh SET v = 'c'")
	wantCode(err, "57P03")
	if v := perBucket(state())[victim]; v != "b" {
		t.Fatalf("the victim bucket's rows are %q, want them unchanged", v)
	}
	// 3. The same for an INSERT: a retry of the rows that were not stored
	// then succeeds, and stores none twice.
	_, err = conn.Exec(ctx, "INSERT INTO fh SELECT i, 'new' FROM generate_series(100, 139) AS s(i)")
	wantCode(err, "57P03")
	sqlfront.SetKVWriteHook(nil)
	got := state()
	stored := 0
	for id := int64(100); id < 140; id++ {
		if _, ok := got[id]; ok {
			stored++
		}
	}
	if stored == 0 || stored == 40 {
		t.Fatalf("%d of the 40 rows stored: want the other buckets' parts only", stored)
	}
	tag, err := conn.Exec(ctx, "INSERT INTO fh SELECT i, 'new' FROM generate_series(100, 139) AS s(i) ON CONFLICT DO NOTHING")
	if err != nil || tag.RowsAffected() != int64(40-stored) {
		t.Fatalf("retry: %v %v, want %d rows", tag, err, 40-stored)
	}
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM fh").Scan(&count); err != nil || count != 80 {
		t.Fatalf("count %d %v, want 80", count, err)
	}

	// 4. A transaction block writes no bucket before COMMIT; its COMMIT
	// writes the buckets in id order, each bucket's part at once: when the
	// victim stores nothing, the buckets before it have the block's rows,
	// the victim and the buckets after it none.
	before := state()
	for _, b := range bucketOf {
		victim = max(victim, b) // the last bucket COMMIT writes
	}
	calls := 0
	sqlfront.SetKVWriteHook(func(b uint64, write func() error) error {
		calls++
		if b == victim {
			return fmt.Errorf("injected: nothing appended: %w", buckets.ErrUnavailable)
		}
		return write()
	})
	exec("BEGIN")
	exec("UPDATE fh SET v = 'tx' WHERE id < 40")
	exec("DELETE FROM fh WHERE id >= 100")
	exec("INSERT INTO fh SELECT i, 'tx' FROM generate_series(200, 239) AS s(i)")
	if calls != 0 {
		t.Fatalf("%d bucket writes inside the block, want none before COMMIT", calls)
	}
	_, err = conn.Exec(ctx, "COMMIT")
	wantCode(err, "57P03")
	sqlfront.SetKVWriteHook(nil)
	got = state()
	for id, v := range before {
		b := bucketOf[id]
		if id >= 40 {
			continue // rows 100..139: counted below
		}
		want := v
		if b < victim {
			want = "tx"
		}
		if got[id] != want {
			t.Fatalf("row %d (bucket %d, victim %d) is %q after the failed COMMIT, want %q", id, b, victim, got[id], want)
		}
	}
	// The buckets before the victim have the block's deletes and inserts
	// too, the victim none.
	var inserted, deleted int
	for id := range got {
		if id >= 200 {
			inserted++
		}
	}
	for id := range before {
		if _, ok := got[id]; !ok {
			deleted++
		}
	}
	if inserted == 0 || inserted == 40 || deleted == 0 || deleted == 40 {
		t.Fatalf("after the failed COMMIT %d of 40 rows inserted and %d of 40 deleted: want the buckets before the victim's parts only", inserted, deleted)
	}
	// Retried, the block applies entirely.
	exec("BEGIN")
	exec("UPDATE fh SET v = 'tx' WHERE id < 40")
	exec("DELETE FROM fh WHERE id >= 100 AND id < 200")
	exec("INSERT INTO fh SELECT i, 'tx' FROM generate_series(200, 239) AS s(i) ON CONFLICT DO NOTHING")
	exec("COMMIT")
	got = state()
	if len(got) != 80 {
		t.Fatalf("%d rows after the retried block, want 80", len(got))
	}
	for id, v := range got {
		if v != "tx" || (id >= 40 && id < 200) {
			t.Fatalf("row %d = %q after the retried block", id, v)
		}
	}
}

// Parameters anywhere in INSERT … ON CONFLICT, UPDATE and DELETE, through
// the extended protocol (prepared) and the simple one (interpolated).
func TestPKParameters(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		for _, sql := range []string{"DROP TABLE IF EXISTS p", "CREATE TABLE p (id bigint PRIMARY KEY, v text, n integer)"} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			sql  string
			args []any
			tag  string
		}{
			{"INSERT INTO p VALUES ($1, $2, 0) ON CONFLICT (id) DO UPDATE SET v = $2", []any{int64(1), "a"}, "INSERT 0 1"},
			{"INSERT INTO p VALUES ($1, $2, 0) ON CONFLICT (id) DO UPDATE SET v = $2", []any{int64(1), "b"}, "INSERT 0 1"},
			{"INSERT INTO p VALUES ($1, $2, 0) ON CONFLICT (id) DO UPDATE SET v = $2, n = p.n + $3::integer", []any{int64(1), "c", int32(5)}, "INSERT 0 1"},
			{"INSERT INTO p VALUES ($1, 'x', 0) ON CONFLICT (id) DO UPDATE SET v = excluded.v WHERE p.v <> $2", []any{int64(1), "c"}, "INSERT 0 0"},
			{"INSERT INTO p VALUES ($1, 'x', 0) ON CONFLICT (id) DO UPDATE SET n = $3 WHERE p.v = $2", []any{int64(1), "c", int32(7)}, "INSERT 0 1"},
			{"UPDATE p SET v = $2 WHERE id = $1", []any{int64(1), "d"}, "UPDATE 1"},
			{"DELETE FROM p WHERE id = $1 AND v = $2", []any{int64(1), "nope"}, "DELETE 0"},
		}
		for _, st := range steps {
			tag, err := conn.Exec(ctx, st.sql, append([]any{mode}, st.args...)...)
			if err != nil || tag.String() != st.tag {
				t.Fatalf("%v: %s %v: %q %v, want %s", mode, st.sql, st.args, tag, err, st.tag)
			}
		}
		var v string
		var num int32
		if err := conn.QueryRow(ctx, "SELECT v, n FROM p WHERE id = 1").Scan(&v, &num); err != nil || v != "d" || num != 7 {
			t.Fatalf("%v: row is %q %d %v, want d 7", mode, v, num, err)
		}
	}
}

// TestPKBlockModel runs seeded random transaction blocks on a primary-key
// table against a map model: inside a block every statement's tag, error
// and the rows a scan and point lookups see follow the model of the
// committed state plus the block's writes; COMMIT makes them the committed
// state, ROLLBACK (or a 23505, which aborts the block) discards them.
func TestPKBlockModel(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE bm (id bigint PRIMARY KEY, v bigint NOT NULL) WITH (buckets = 3)"); err != nil {
		t.Fatal(err)
	}
	committed := map[int64]int64{}
	clone := func(m map[int64]int64) map[int64]int64 {
		out := make(map[int64]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	scan := func() map[int64]int64 {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT id, v FROM bm")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]int64{}
		for rows.Next() {
			var id, v int64
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			if _, dup := out[id]; dup {
				t.Fatalf("seed %d: key %d twice in a scan", seed, id)
			}
			out[id] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	tag := func(sql string, args ...any) (string, string) { // tag, SQLSTATE
		ct, err := conn.Exec(ctx, sql, args...)
		var pe *pgconn.PgError
		if errorsAs(err, &pe) {
			return "", pe.Code
		}
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, sql, err)
		}
		return ct.String(), ""
	}
	for round := 0; round < 25; round++ {
		if _, code := tag("BEGIN"); code != "" {
			t.Fatal(code)
		}
		model := clone(committed)
		aborted := false
		for op := 0; op < 12 && !aborted; op++ {
			k, v := rng.Int64N(12), rng.Int64N(1000)
			var sql, want, wantCode string
			var args []any
			switch rng.IntN(6) {
			case 0: // plain insert
				sql, args = "INSERT INTO bm VALUES ($1, $2)", []any{k, v}
				if _, ok := model[k]; ok {
					wantCode = "23505"
				} else {
					want, model[k] = "INSERT 0 1", v
				}
			case 1: // upsert
				sql, args, want = "INSERT INTO bm VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = bm.v + excluded.v", []any{k, v}, "INSERT 0 1"
				model[k] += v
			case 2: // insert if absent
				sql, args, want = "INSERT INTO bm VALUES ($1, $2) ON CONFLICT DO NOTHING", []any{k, v}, "INSERT 0 0"
				if _, ok := model[k]; !ok {
					want, model[k] = "INSERT 0 1", v
				}
			case 3: // update by predicate
				sql, args = "UPDATE bm SET v = v + 1 WHERE id % 3 = $1", []any{k % 3}
				c := 0
				for id := range model {
					if id%3 == k%3 {
						model[id]++
						c++
					}
				}
				want = fmt.Sprintf("UPDATE %d", c)
			case 4: // delete by key
				sql, args, want = "DELETE FROM bm WHERE id = $1", []any{k}, "DELETE 0"
				if _, ok := model[k]; ok {
					want = "DELETE 1"
					delete(model, k)
				}
			case 5: // point lookup
				var got int64
				err := conn.QueryRow(ctx, "SELECT v FROM bm WHERE id = $1", k).Scan(&got)
				mv, ok := model[k]
				if ok != (err == nil) || (ok && got != mv) {
					t.Fatalf("seed %d round %d: lookup %d = %d, %v; model %d, %v", seed, round, k, got, err, mv, ok)
				}
				continue
			}
			got, code := tag(sql, args...)
			if code != wantCode || got != want {
				t.Fatalf("seed %d round %d: %s %v: %q %s, want %q %s", seed, round, sql, args, got, code, want, wantCode)
			}
			if code != "" {
				aborted = true
				if _, code := tag("SELECT 1"); code != "25P02" {
					t.Fatalf("seed %d: after %s in a block: %s, want 25P02", seed, wantCode, code)
				}
				break
			}
			if got := scan(); !reflect.DeepEqual(got, model) {
				t.Fatalf("seed %d round %d: the block sees %v, model %v", seed, round, got, model)
			}
		}
		end := "COMMIT"
		if aborted || rng.IntN(4) == 0 {
			end = "ROLLBACK"
		}
		if _, code := tag(end); code != "" {
			t.Fatalf("seed %d: %s: %s", seed, end, code)
		}
		if end == "COMMIT" {
			committed = model
		}
		if got := scan(); !reflect.DeepEqual(got, committed) {
			t.Fatalf("seed %d round %d after %s: table %v, model %v", seed, round, end, got, committed)
		}
	}
}

// TestKeyScanUpdateDelete: an UPDATE or DELETE whose WHERE fixes the whole
// primary key reads that key's row, not the table (no bucket scan), in
// every protocol, and changes exactly what the full evaluation changes.
func TestKeyScanUpdateDelete(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	front := n.Server.SQLFrontend().(*sqlfront.Frontend)
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec, pgx.QueryExecModeSimpleProtocol}
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE ks (region text, id integer, n integer, PRIMARY KEY (region, id)) PARTITION BY LIST (region) WITH (buckets = 3)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO ks SELECT r, g, 0 FROM generate_series(1, 50) g, (VALUES ('eu'), ('us')) v(r)"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, r := range []string{"eu", "us"} {
		for g := 1; g <= 50; g++ {
			want[fmt.Sprintf("%s/%d", r, g)] = 0
		}
	}
	step := func(mode pgx.QueryExecMode, sql string, wantScan bool, args ...any) int64 {
		t.Helper()
		before := front.BucketScans()
		tag, err := conn.Exec(ctx, sql, append([]any{mode}, args...)...)
		if err != nil {
			t.Fatalf("%s (mode %v): %v", sql, mode, err)
		}
		if scanned := front.BucketScans() != before; scanned != wantScan {
			t.Errorf("%s (mode %v): scanned buckets %v, want %v", sql, mode, scanned, wantScan)
		}
		return tag.RowsAffected()
	}
	for i, mode := range modes {
		if got := step(mode, "UPDATE ks SET n = n + $1 WHERE region = $2 AND id = $3", false, 5, "eu", int32(i+1)); got != 1 {
			t.Fatalf("UPDATE by key: %d rows", got)
		}
		want[fmt.Sprintf("eu/%d", i+1)] += 5
		if got := step(mode, "UPDATE ks SET n = n + 1 WHERE id = $1 AND region = 'us'", false, int32(i+10)); got != 1 {
			t.Fatalf("UPDATE by key, constant region: %d rows", got)
		}
		want[fmt.Sprintf("us/%d", i+10)]++
		if got := step(mode, "UPDATE ks SET n = 7 WHERE region = 'ap' AND id = 1", false); got != 0 {
			t.Fatalf("UPDATE of a missing partition's key: %d rows", got)
		}
		if got := step(mode, "DELETE FROM ks WHERE region = $1 AND id = $2", false, "us", int32(i+20)); got != 1 {
			t.Fatalf("DELETE by key: %d rows", got)
		}
		delete(want, fmt.Sprintf("us/%d", i+20))
		if got := step(mode, "DELETE FROM ks WHERE region = $1 AND id = $2", false, "us", int32(i+20)); got != 0 {
			t.Fatalf("DELETE of a deleted key: %d rows", got)
		}
		// Not the whole key, or more than the key: the table is read.
		if got := step(mode, "UPDATE ks SET n = n + 1 WHERE region = 'eu' AND id = $1 AND n >= 0", true, int32(i+30)); got != 1 {
			t.Fatalf("UPDATE with another condition: %d rows", got)
		}
		want[fmt.Sprintf("eu/%d", i+30)]++
	}
	rows, err := conn.Query(ctx, "SELECT region, id, n FROM ks")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var r string
		var id, v int32
		if err := rows.Scan(&r, &id, &v); err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%s/%d", r, id)] = int(v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("table after the statements differs from the model:\n got %v\nwant %v", got, want)
	}
}
