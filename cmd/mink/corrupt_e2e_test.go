package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/client"
)

// TestCorruptObjects: a flipped byte in a stream object, a KV snapshot
// file, a lake data file and a WAL object of one node, whose object store
// is a local directory. Each is detected by its checksum: the statements
// that need the object fail with XX001 naming it (DATA_LOSS over Flight),
// or the restore falls back to an older snapshot; no statement returns
// wrong or partial rows, and the node goes on serving the other tables.
// Restoring the object mends it.
func TestCorruptObjects(t *testing.T) {
	dataDir := t.TempDir()
	objects := filepath.Join(dataDir, "objects")
	var n *node
	for try := 0; ; try++ {
		n = newNode(t, nodeOpts{dataDir: dataDir, leaseTTL: "3s", extra: []string{"--coordinator-tick", "200ms",
			"--tiering-freshness", "1h", "--gc-interval", "1s", "--gc-delay", "1h", "--kv-snapshot-interval", "300ms"}})
		if distinctPorts(n.args) || try == 10 {
			break
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	// restart kills the node and starts it again; with loseTablets, its
	// local KV tablets go too (a new disk), so that its primary-key
	// buckets restore from their snapshots instead of reopening them.
	restartWith := func(loseTablets bool) {
		t.Helper()
		conn.Close(ctx)
		n.kill()
		if loseTablets {
			if err := os.RemoveAll(filepath.Join(dataDir, "kv")); err != nil {
				t.Fatal(err)
			}
		}
		n.start()
		n.waitHealthy()
		n.waitSQL()
		conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	}
	restart := func() { t.Helper(); restartWith(false) }
	// count reads every row's values (count(*) alone may be answered
	// from the lake's manifests without reading a file).
	count := func(table string) (int64, error) {
		var c int64
		err := conn.QueryRow(ctx, "SELECT count(msg) FROM "+table).Scan(&c)
		return c, err
	}
	wantCount := func(table string, want int64) {
		t.Helper()
		if c, err := count(table); err != nil || c != want {
			t.Fatalf("SELECT count(msg) FROM %s: %d, %v; want %d", table, c, err, want)
		}
	}
	// wantCorrupt: a SELECT of table fails at once with XX001 naming key.
	wantCorrupt := func(table, key string) {
		t.Helper()
		start := time.Now()
		c, err := count(table)
		if sqlState(err) != "XX001" || !strings.Contains(err.Error(), key) {
			t.Fatalf("SELECT of %s: %d rows, %v (SQLSTATE %q); want XX001 naming %s", table, c, err, sqlState(err), key)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("SELECT of %s took %v to fail: a damaged object is not worth waiting for", table, d)
		}
	}
	mustExec(t, conn, "CREATE TABLE other (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 1)")
	insertIDs(t, conn, "other", 0, 50, false)

	t.Run("stream object", func(t *testing.T) {
		mustExec(t, conn, "CREATE TABLE so (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2, bucket_key = 'id')")
		insertIDs(t, conn, "so", 0, 100, false)
		bs := tableBuckets(t, n, "so")
		waitFor(t, 20*time.Second, "the rows of so committed", func() bool {
			bs = tableBuckets(t, n, "so")
			return bs[0].End+bs[1].End == 100
		})
		keys := streamObjects(t, dataDir, uint64(bs[0].Bucket))
		if len(keys) == 0 {
			t.Fatalf("bucket %d has no stream object", bs[0].Bucket)
		}
		key := keys[0]
		orig := flipByte(t, filepath.Join(objects, key), -20) // in the last entry's Arrow payload
		wantCorrupt("so", key)
		wantCorrupt("so WHERE id >= 0", key)
		wantFlightDataLoss(t, n, "so", key, int(bs[1].End)) // the rows of the other bucket at most
		// The other bucket and table serve, and writes go on.
		wantCount("other", 50)
		insertIDs(t, conn, "so", 100, 120, false)
		insertIDs(t, conn, "other", 50, 60, false)
		wantCount("other", 60)
		wantCorrupt("so", key)
		if err := os.WriteFile(filepath.Join(objects, key), orig, 0o644); err != nil {
			t.Fatal(err)
		}
		wantCount("so", 120)
	})

	t.Run("KV snapshot file", func(t *testing.T) {
		mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, msg text) WITH (buckets = 1)")
		bucket := tableBuckets(t, n, "kv")[0].Bucket
		mustExec(t, conn, "INSERT INTO kv SELECT i, 'a' || i FROM generate_series(1, 100) AS g(i)")
		first := waitSnapshot(t, n, objects, uint64(bucket), "")
		mustExec(t, conn, "INSERT INTO kv SELECT i, 'b' || i FROM generate_series(50, 150) AS g(i) ON CONFLICT (id) DO UPDATE SET msg = excluded.msg")
		mustExec(t, conn, "DELETE FROM kv WHERE id % 10 = 0")
		newest := waitSnapshot(t, n, objects, uint64(bucket), first)
		want := dump(t, conn, "SELECT id, msg FROM kv ORDER BY id")
		// A file stored by the newest snapshot itself (not one it reuses).
		var victim string
		filepath.WalkDir(filepath.Join(objects, newest), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() != "snapshot.json" && (victim == "" || strings.HasSuffix(p, ".sst")) {
				victim = p
			}
			return nil
		})
		if victim == "" {
			t.Fatalf("the newest snapshot %s stores no file", newest)
		}
		key := strings.TrimPrefix(filepath.ToSlash(victim), filepath.ToSlash(objects)+"/")
		flipByte(t, victim, 0)
		restartWith(true)
		var got string
		waitFor(t, 30*time.Second, "kv to serve after the restart", func() bool {
			rows, err := conn.Query(ctx, "SELECT id, msg FROM kv ORDER BY id")
			if err != nil {
				return false
			}
			rows.Close()
			got = dump(t, conn, "SELECT id, msg FROM kv ORDER BY id")
			return true
		})
		if got != want {
			t.Fatalf("kv after a restore past a corrupt snapshot:\n%s\nwant:\n%s", got, want)
		}
		if l := n.log(); !strings.Contains(l, "KV snapshot unusable") || !strings.Contains(l, key) {
			t.Fatalf("the restore did not log the corrupt snapshot file %s:\n%s", key, lastLines(l, 40))
		}
		wantCount("other", 60)
	})

	t.Run("lake file", func(t *testing.T) {
		mustExec(t, conn, "CREATE TABLE lk (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 1, log_retention = '1s')")
		insertIDs(t, conn, "lk", 0, 80, false)
		waitFor(t, 20*time.Second, "the rows of lk committed", func() bool { return tableBuckets(t, n, "lk")[0].End == 80 })
		tierNow(t, n, "lk")
		waitFor(t, 20*time.Second, "lk's stream trimmed to its tiered offset", func() bool {
			b := tableBuckets(t, n, "lk")[0]
			return b.Start == 80
		})
		st := tableTiering(t, tieringStatus(t, n), "lk")
		var victim string
		filepath.WalkDir(filepath.Join(objects, "lake", fmt.Sprint(st.ID), "data"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && victim == "" && strings.HasSuffix(p, ".parquet") {
				victim = p
			}
			return nil
		})
		if victim == "" {
			t.Fatal("no data file in the lake of lk")
		}
		key := strings.TrimPrefix(filepath.ToSlash(victim), filepath.ToSlash(objects)+"/")
		orig := flipByte(t, victim, lastPageByte(t, victim))
		wantCorrupt("lk", key)
		wantCount("other", 60)
		insertIDs(t, conn, "lk", 80, 90, false)
		wantCorrupt("lk", key)
		if err := os.WriteFile(victim, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		wantCount("lk", 90)
	})

	t.Run("WAL object", func(t *testing.T) {
		mustExec(t, conn, "CREATE TABLE wa (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 1)")
		mustExec(t, conn, "CREATE TABLE wb (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 1)")
		wa := uint64(tableBuckets(t, n, "wa")[0].Bucket)
		// An object where wa's stream objects would go: its rows stay in
		// the WAL only (the flush fails and is retried), and the kill
		// below cannot race a flush.
		block := filepath.Join(objects, "streams", fmt.Sprint(wa))
		if err := os.MkdirAll(filepath.Dir(block), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(block, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		insertIDs(t, conn, "wa", 0, 30, false)
		insertIDs(t, conn, "wb", 0, 30, false) // acknowledged after wa's rows: in a later WAL object
		n.kill()
		if err := os.Remove(block); err != nil {
			t.Fatal(err)
		}
		key, orig := corruptWALOf(t, objects, wa)
		restart()
		// wa's acknowledged rows were in the damaged object: never served
		// without them. wb's continue after it: recovered. "other" has
		// nothing after it, so the object may hold writes of its too.
		waitFor(t, 20*time.Second, "wb to serve", func() bool { c, err := count("wb"); return err == nil && c == 30 })
		wantCorrupt("wa", key)
		wantCorrupt("other", key)
		wantFlightDataLoss(t, n, "wa", key, 0)
		out, _, _ := runMink(t, 30*time.Second, "table", "buckets", "wa", "--server", n.admin)
		if !strings.Contains(out, key) {
			t.Fatalf("mink table buckets wa does not name %s:\n%s", key, out)
		}
		if !strings.Contains(n.log(), key) {
			t.Fatalf("the log does not name %s", key)
		}
		insertIDs(t, conn, "wb", 30, 40, false)
		wantCount("wb", 40)
		mustExec(t, conn, "CREATE TABLE fresh (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2)")
		insertIDs(t, conn, "fresh", 0, 10, false)
		wantCount("fresh", 10)
		wantCorrupt("kv", key)
		// Restored, the object is replayed: everything serves.
		if err := os.WriteFile(filepath.Join(objects, key), orig, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "wa to serve once its WAL object is restored", func() bool {
			c, err := count("wa")
			if err != nil && sqlState(err) != "XX001" {
				t.Fatalf("SELECT of wa: %v", err)
			}
			return err == nil && c == 30
		})
		wantCount("other", 60)
		wantCount("kv", 135)
	})
}

// lastPageByte is the offset of the last byte of the first column chunk of
// a Parquet file: in the payload of its last page.
func lastPageByte(t *testing.T, path string) int {
	t.Helper()
	data := mustRead(t, path)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata().RowGroups[0].Columns[0].MetaData
	return int(md.DataPageOffset + md.TotalCompressedSize - 1)
}

// wantFlightDataLoss: a Flight scan of table with mink's Go client ends
// with DATA_LOSS naming key, having returned at most maxRows rows (those
// of the buckets it streamed before the damaged one; the reader's error
// says the scan is incomplete).
func wantFlightDataLoss(t *testing.T, n *node, table, key string, maxRows int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, n.flightAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rdr, err := cl.Scan(ctx, table, client.ScanOptions{Columns: []string{"id"}})
	rows := 0
	if err == nil {
		for rdr.Next() {
			rows += int(rdr.RecordBatch().NumRows())
		}
		err = rdr.Err()
		rdr.Release()
	}
	if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), key) || rows > maxRows {
		t.Fatalf("Flight scan of %s: %d rows, %v; want DATA_LOSS naming %s after at most %d rows", table, rows, err, key, maxRows)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flipByte flips one byte of the file at path (at off, or len+off for a
// negative off) and returns its original contents.
func flipByte(t *testing.T, path string, off int) []byte {
	t.Helper()
	orig := mustRead(t, path)
	if off < 0 {
		off += len(orig)
	}
	bad := slices.Clone(orig)
	bad[off] ^= 0x20
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	return orig
}

// waitSnapshot waits for a KV snapshot of bucket other than prev and
// returns its prefix (kv/<bucket>/<epoch>-<id>), the newest one.
func waitSnapshot(t *testing.T, n *node, objects string, bucket uint64, prev string) string {
	t.Helper()
	var newest string
	waitFor(t, 20*time.Second, "a new KV snapshot", func() bool {
		ms, _ := filepath.Glob(filepath.Join(objects, "kv", fmt.Sprint(bucket), "*", "snapshot.json"))
		sort.Strings(ms) // the attempt names sort by (leader epoch, id)
		if len(ms) == 0 {
			return false
		}
		newest = strings.TrimPrefix(filepath.ToSlash(filepath.Dir(ms[len(ms)-1])), filepath.ToSlash(objects)+"/")
		return newest != prev
	})
	// Its files are written before its CommitKVSnapshot: wait for the
	// commit, or a restart may restore from the snapshot before it.
	epoch, id, _ := strings.Cut(filepath.Base(newest), "-")
	committed := regexp.MustCompile(fmt.Sprintf(`"KV snapshot committed" .*bucket=%d leader_epoch=%d snapshot=%d `,
		bucket, mustAtoi(t, epoch), mustAtoi(t, id)))
	waitFor(t, 20*time.Second, "the commit of KV snapshot "+newest, func() bool { return committed.MatchString(n.log()) })
	return newest
}

func mustAtoi(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

// corruptWALOf flips a byte in the payload of the newest WAL object that
// holds an entry of stream and returns its key and original contents.
// (docs/format/s3stream.md: a 32-byte header, then per entry stream,
// stream epoch, offset (u64 each), count, payload length (u32) and the
// payload.)
func corruptWALOf(t *testing.T, objects string, stream uint64) (string, []byte) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(objects, "wal", "1", "*", "*"))
	sort.Strings(paths)
	// walEntryAt returns the offset in data of a byte inside the payload
	// of an entry of stream, in the WAL object at data[at:at+size].
	walEntryAt := func(data []byte, at, size int) (int, bool) {
		if size < 36 || string(data[at:at+4]) != "MKWL" {
			return 0, false
		}
		p := data[at+32 : at+size-4]
		for len(p) >= 32 {
			ln := int(binary.LittleEndian.Uint32(p[28:32]))
			if binary.LittleEndian.Uint64(p[0:8]) == stream && ln > 0 {
				return at + size - 4 - len(p) + 32 + ln/2, true
			}
			p = p[min(len(p), 32+ln):]
		}
		return 0, false
	}
	for i := len(paths) - 1; i >= 0; i-- {
		data := mustRead(t, paths[i])
		key := strings.TrimPrefix(filepath.ToSlash(paths[i]), filepath.ToSlash(objects)+"/")
		if !strings.HasSuffix(paths[i], ".seg") {
			if off, ok := walEntryAt(data, 0, len(data)); ok {
				return key, flipByte(t, paths[i], off)
			}
			continue
		}
		// A WAL segment: records [u32 length][WAL object], then zeros.
		for off := 0; off+4 <= len(data); {
			n := int(binary.LittleEndian.Uint32(data[off:]))
			if n == 0 || off+4+n > len(data) {
				break
			}
			if at, ok := walEntryAt(data, off+4, n); ok {
				return key, flipByte(t, paths[i], at)
			}
			off += 4 + n
		}
	}
	t.Fatalf("no WAL object holds an entry of stream %d", stream)
	return "", nil
}
