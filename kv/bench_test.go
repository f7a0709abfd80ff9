package kv

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

// The benchmark table: id bigint primary key, name text, payload text,
// amount bigint. About 130 bytes a row encoded; random payloads, so the
// sstables hold about 100 MB at 1M rows.
var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "payload", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

const benchRows = 1_000_000

// benchTablet is the loaded 1M-row tablet shared by the benchmarks.
var benchTablet struct {
	once  sync.Once
	root  string
	tab   *Tablet
	codec *kvcodec.Codec
	err   error
	// load is the time to apply 1M rows; settle the time the background
	// compactions took after it.
	load, settle time.Duration
}

func loadBenchTablet(b *testing.B) (*Tablet, *kvcodec.Codec, string) {
	benchTablet.once.Do(func() {
		root, err := os.MkdirTemp("", "kv-bench-")
		if err != nil {
			benchTablet.err = err
			return
		}
		benchTablet.root = root
		c, err := kvcodec.NewCodec(benchSchema, []int{0})
		if err != nil {
			benchTablet.err = err
			return
		}
		benchTablet.codec = c
		opts := Options{Logger: testLogger()}
		if mb, err := strconv.Atoi(os.Getenv("KV_BENCH_CACHE_MB")); err == nil {
			opts.CacheSize = int64(mb) << 20
		}
		tab, err := Open(filepath.Join(root, "tablet"), opts)
		if err != nil {
			benchTablet.err = err
			return
		}
		benchTablet.tab = tab
		start := time.Now()
		rng := rand.New(rand.NewPCG(1, 1))
		raw := make([]byte, 60)
		const batch = 10_000
		for from := 0; from < benchRows; from += batch {
			bld := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
			for id := from; id < from+batch; id++ {
				bld.Field(0).(*array.Int64Builder).Append(int64(id))
				bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer-%08d", id))
				for i := range raw {
					raw[i] = byte(rng.Uint32())
				}
				bld.Field(2).(*array.StringBuilder).Append(base64.StdEncoding.EncodeToString(raw))
				bld.Field(3).(*array.Int64Builder).Append(rng.Int64N(1e9))
			}
			rec := bld.NewRecordBatch()
			bld.Release()
			records := make([]kvcodec.ChangeRecord, batch)
			for i := range records {
				k, _ := c.AppendKey(nil, rec, i)
				v, _ := c.AppendRow(nil, rec, i)
				records[i] = kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: k, Row: v}
			}
			rec.Release()
			if err := tab.Apply(records, uint64(from+batch)); err != nil {
				benchTablet.err = err
				return
			}
		}
		if err := tab.db.Flush(); err != nil {
			benchTablet.err = err
			return
		}
		benchTablet.load = time.Since(start)
		// Let the background compactions of the load finish, so that the
		// lookups measure a settled tablet and not the compactions.
		for quiet := 0; quiet < 5; time.Sleep(100 * time.Millisecond) {
			if tab.db.Metrics().Compact.NumInProgress == 0 {
				quiet++
			} else {
				quiet = 0
			}
		}
		benchTablet.settle = time.Since(start) - benchTablet.load
		if os.Getenv("KV_BENCH_METRICS") != "" {
			fmt.Println(tab.db.Metrics())
		}
	})
	if benchTablet.err != nil {
		b.Fatal(benchTablet.err)
	}
	return benchTablet.tab, benchTablet.codec, benchTablet.root
}

// TestMain closes the benchmarks' tablet and checks that nothing leaks a
// goroutine: every tablet a test opens (crashed ones included) is closed,
// and Snapshot and Restore wait for their transfers.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchTablet.tab != nil {
		benchTablet.tab.Close()
	}
	if benchTablet.root != "" {
		os.RemoveAll(benchTablet.root)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func benchKey(c *kvcodec.Codec, id int64) []byte {
	// The key of a single bigint column: what Codec.AppendKey yields.
	k, err := c.AppendKeyValues(nil, []any{id})
	if err != nil {
		panic(err)
	}
	return k
}

// BenchmarkTabletGet measures point lookups of random keys in the 1M-row
// tablet; it reports the latency percentiles of single lookups.
func BenchmarkTabletGet(b *testing.B) {
	tab, c, _ := loadBenchTablet(b)
	keys := make([][]byte, 1<<16)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range keys {
		keys[i] = benchKey(c, rng.Int64N(benchRows))
	}
	b.Logf("1M rows applied in %v, compactions settled %v later", benchTablet.load, benchTablet.settle)
	lat := make([]time.Duration, 0, 1<<20)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		start := time.Now()
		_, ok, err := tab.Get(keys[i&(len(keys)-1)])
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
		if err != nil || !ok {
			b.Fatalf("get: %v %v", ok, err)
		}
		i++
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkTabletGetParallel is BenchmarkTabletGet from GOMAXPROCS
// goroutines.
func BenchmarkTabletGetParallel(b *testing.B) {
	tab, c, _ := loadBenchTablet(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
		for pb.Next() {
			if _, ok, err := tab.Get(benchKey(c, rng.Int64N(benchRows))); err != nil || !ok {
				b.Fatalf("get: %v %v", ok, err)
			}
		}
	})
}

// BenchmarkSnapshotRestore measures a full snapshot of the 1M-row tablet
// (about 100 MB of sstables) to a local-directory object store, an
// incremental snapshot after 10,000 updates, and a restore. Run with
// -benchtime=1x.
func BenchmarkSnapshotRestore(b *testing.B) {
	tab, c, root := loadBenchTablet(b)
	ctx := context.Background()
	const bucket = catalog.BucketID(1)
	for n := range b.N {
		storeDir := filepath.Join(root, fmt.Sprintf("store-%d", n))
		store, err := objstore.NewDir(storeDir)
		if err != nil {
			b.Fatal(err)
		}
		// A full snapshot: forget what earlier iterations uploaded.
		tab.snapGate <- struct{}{}
		clear(tab.snap.files)
		<-tab.snapGate
		b.ResetTimer()
		start := time.Now()
		full, err := tab.Snapshot(ctx, store, SnapshotOptions{Bucket: bucket, LeaderEpoch: 1})
		if err != nil {
			b.Fatal(err)
		}
		fullTime := time.Since(start)

		// 10,000 updates, then an incremental snapshot.
		rng := rand.New(rand.NewPCG(uint64(n), 4))
		var records []kvcodec.ChangeRecord
		for range 10_000 {
			k := benchKey(c, rng.Int64N(benchRows))
			old, _, err := tab.Get(k)
			if err != nil {
				b.Fatal(err)
			}
			records = append(records, kvcodec.ChangeRecord{Type: kvcodec.UpdateBefore, Key: k, Row: old}, kvcodec.ChangeRecord{Type: kvcodec.UpdateAfter, Key: k, Row: old})
		}
		if err := tab.Apply(records, tab.AppliedOffset()+uint64(len(records))); err != nil {
			b.Fatal(err)
		}
		retained := []catalog.KVSnapshot{snapshotOf(full.Record)}
		start = time.Now()
		incr, err := tab.Snapshot(ctx, store, SnapshotOptions{Bucket: bucket, LeaderEpoch: 1, Retained: retained})
		if err != nil {
			b.Fatal(err)
		}
		incrTime := time.Since(start)
		retained = append(retained, snapshotOf(incr.Record))

		start = time.Now()
		restored, res, err := Restore(ctx, store, filepath.Join(root, fmt.Sprintf("restored-%d", n)), RestoreOptions{
			Bucket: bucket, Snapshots: retained, Tablet: Options{Logger: testLogger()}})
		if err != nil {
			b.Fatal(err)
		}
		restoreTime := time.Since(start)
		b.StopTimer()
		if res.LogOffset != tab.AppliedOffset() || len(res.Skipped) > 0 {
			b.Fatalf("restored at %d (skipped %v), tablet at %d", res.LogOffset, res.Skipped, tab.AppliedOffset())
		}
		restored.Close()
		os.RemoveAll(filepath.Join(root, fmt.Sprintf("restored-%d", n)))
		os.RemoveAll(storeDir)
		mb := func(n int64) float64 { return float64(n) / (1 << 20) }
		b.Logf("full snapshot: %d files, %.1f MB in %v (%.0f MB/s)", full.UploadedFiles, mb(full.UploadedBytes), fullTime, mb(full.UploadedBytes)/fullTime.Seconds())
		b.Logf("incremental snapshot after 10k updates: uploaded %d files %.1f MB, reused %d files %.1f MB, in %v",
			incr.UploadedFiles, mb(incr.UploadedBytes), incr.ReusedFiles, mb(incr.ReusedBytes), incrTime)
		b.Logf("restore: %d files, %.1f MB in %v (%.0f MB/s)", res.Files, mb(res.Bytes), restoreTime, mb(res.Bytes)/restoreTime.Seconds())
		b.ReportMetric(fullTime.Seconds(), "full-snapshot-s")
		b.ReportMetric(mb(full.UploadedBytes), "full-snapshot-MB")
		b.ReportMetric(incrTime.Seconds(), "incr-snapshot-s")
		b.ReportMetric(restoreTime.Seconds(), "restore-s")
	}
}
