package sqlfront_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/sqlfront"
)

// mirrorConn starts a node with a log table m of 3 buckets.
func mirrorConn(t *testing.T) (*pgx.Conn, *sqlfront.Frontend) {
	t.Helper()
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "CREATE TABLE m (id bigint, s text, j jsonb) WITH (buckets = 3, bucket_key = 'id')"); err != nil {
		t.Fatal(err)
	}
	return conn, n.Server.SQLFrontend().(*sqlfront.Frontend)
}

// How a statement must have read m.
const (
	anyPath    = iota
	mirrored   // over the mirror: no bucket reads
	fromBucket // from the buckets
)

// checkCount checks count(*) and sum(id) of m and how the statement read
// m.
func checkCount(t *testing.T, conn *pgx.Conn, front *sqlfront.Frontend, want int64, path int) {
	t.Helper()
	before := front.BucketScans()
	var n, sum int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*), coalesce(sum(id), 0) FROM m").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != want || sum != want*(want+1)/2 {
		t.Fatalf("count %d sum %d, want %d rows 1..%d", n, sum, want, want)
	}
	scans := front.BucketScans() - before
	if path == mirrored && scans != 0 || path == fromBucket && scans == 0 {
		t.Fatalf("%d bucket reads, want path %d", scans, path)
	}
}

func insertIDs(t *testing.T, conn *pgx.Conn, from, to int64) {
	t.Helper()
	sql := fmt.Sprintf(`INSERT INTO m SELECT i, 'x' || i, '{"k": 1}' FROM generate_series(%d, %d) AS g(i)`, from, to)
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// Statements over log tables read the mirrors, which follow every
// acknowledged write; writes pending in a block and tables without
// mirrors are read from the buckets, with the same results.
func TestMirrorFollowsWrites(t *testing.T) {
	conn, front := mirrorConn(t)
	ctx := context.Background()
	checkCount(t, conn, front, 0, anyPath) // the buckets may still be opening
	for i := int64(0); i < 5; i++ {
		insertIDs(t, conn, i*100+1, i*100+100)
		checkCount(t, conn, front, i*100+100, mirrored)
	}
	// A block's own pending rows are seen by reading the buckets.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	insertIDs(t, conn, 501, 510)
	checkCount(t, conn, front, 510, fromBucket)
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	checkCount(t, conn, front, 500, mirrored)
	// Types come out the same either way.
	var s, j string
	if err := conn.QueryRow(ctx, "SELECT s, j FROM m WHERE id = 7").Scan(&s, &j); err != nil || s != "x7" || j != `{"k": 1}` {
		t.Fatalf("row 7: %q %q %v", s, j, err)
	}
	front.SetMirrors(false)
	checkCount(t, conn, front, 500, fromBucket)
	front.SetMirrors(true)
	insertIDs(t, conn, 501, 600)
	checkCount(t, conn, front, 600, mirrored)
	// A dropped and re-created table starts a new mirror.
	for _, sql := range []string{"DROP TABLE m", "CREATE TABLE m (id bigint, s text, j jsonb)"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	checkCount(t, conn, front, 0, anyPath)
	insertIDs(t, conn, 1, 3)
	checkCount(t, conn, front, 3, mirrored)
}

// A mirror that fails to read a bucket half-way through catching up
// leaves the statement to the buckets, and the next statement catches up
// from where the mirror stopped: no row missing, none twice.
func TestMirrorRefreshFailsHalfway(t *testing.T) {
	conn, front := mirrorConn(t)
	insertIDs(t, conn, 1, 300)
	checkCount(t, conn, front, 300, anyPath)
	insertIDs(t, conn, 301, 600)
	var reads atomic.Int64
	sqlfront.SetMirrorReadFault(func(bucket uint64) error {
		if reads.Add(1) == 2 { // the first bucket caught up, the second fails
			return errors.New("injected read failure")
		}
		return nil
	})
	defer sqlfront.SetMirrorReadFault(nil)
	checkCount(t, conn, front, 600, fromBucket)
	if reads.Load() != 2 {
		t.Fatalf("%d mirror reads, want 2", reads.Load())
	}
	checkCount(t, conn, front, 600, mirrored)
	insertIDs(t, conn, 601, 700)
	checkCount(t, conn, front, 700, mirrored)
}

// A result column that is a table column carries the table's OID and the
// column's number in RowDescription (pgjdbc's isNullable reads them);
// an expression carries none.
func TestResultColumnOrigin(t *testing.T) {
	conn, _ := mirrorConn(t)
	ctx := context.Background()
	insertIDs(t, conn, 1, 2)
	var tableOID uint32
	if err := conn.QueryRow(ctx, "SELECT 'm'::regclass::oid").Scan(&tableOID); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"SELECT id, j, id + 1 FROM m",
		"SELECT x.id, x.j, 1 FROM (SELECT * FROM m) AS x",
	} {
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		fds := rows.FieldDescriptions()
		rows.Close()
		if fds[0].TableOID != tableOID || fds[0].TableAttributeNumber != 1 ||
			fds[1].TableOID != tableOID || fds[1].TableAttributeNumber != 3 || fds[1].DataTypeOID != 3802 ||
			fds[2].TableOID != 0 || fds[2].TableAttributeNumber != 0 {
			t.Errorf("%s: fields %+v, want id and j of table %d", sql, fds, tableOID)
		}
	}
}

// Writers insert while readers query over the mirrors: every reader sees
// at least every row acknowledged before its statement started, and never
// a row twice (concurrent catch-ups must not append a range twice).
func TestMirrorConcurrentWriters(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, n.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	if _, err := connect().Exec(ctx, "CREATE TABLE m (id bigint, s text) WITH (buckets = 3, bucket_key = 'id')"); err != nil {
		t.Fatal(err)
	}
	const writers, readers, statements, rowsPer = 2, 3, 30, 20
	var acked atomic.Int64
	errs := make(chan error, writers+readers)
	done := make(chan struct{})
	for w := 0; w < writers; w++ {
		c := connect()
		go func(w int) {
			for i := 0; i < statements; i++ {
				from := int64((w*statements+i)*rowsPer + 1)
				sql := fmt.Sprintf("INSERT INTO m SELECT i, 'w' FROM generate_series(%d, %d) AS g(i)", from, from+rowsPer-1)
				if _, err := c.Exec(ctx, sql); err != nil {
					errs <- err
					return
				}
				acked.Add(rowsPer)
			}
			errs <- nil
		}(w)
	}
	for r := 0; r < readers; r++ {
		c := connect()
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				before := acked.Load()
				var count, distinct int64
				if err := c.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM m").Scan(&count, &distinct); err != nil {
					errs <- err
					return
				}
				if count != distinct || count < before {
					errs <- fmt.Errorf("read %d rows (%d distinct) with %d acknowledged before the statement", count, distinct, before)
					return
				}
			}
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			close(done)
			t.Fatal(err)
		}
	}
	close(done)
	for r := 0; r < readers; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var count int64
	if err := connect().QueryRow(ctx, "SELECT count(DISTINCT id) FROM m").Scan(&count); err != nil || count != writers*statements*rowsPer {
		t.Fatalf("final count %d %v, want %d", count, err, writers*statements*rowsPer)
	}
}
