package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/tiering"
)

// TieringConfig configures the tiering benchmark.
type TieringConfig struct {
	// Dir is where the object store (a local directory) and the peers'
	// files go; default the temp dir.
	Dir string
	// Rows of the facts table, spread over Buckets buckets in batches of
	// BatchRows rows (what a COPY chunk or a Flight DoPut appends). Defaults
	// 4 M, 4, 64 Ki.
	Rows      int
	Buckets   int
	BatchRows int
}

func (c *TieringConfig) fill() {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Rows == 0 {
		c.Rows = 4_000_000
	}
	if c.Buckets == 0 {
		c.Buckets = 4
	}
	if c.BatchRows == 0 {
		c.BatchRows = 64 << 10
	}
}

// TieringReport is what MeasureTiering measured.
type TieringReport struct {
	Config TieringConfig
	// StreamBytes is the Arrow IPC size of the batches, which is what
	// stream objects hold (before s3stream's framing).
	StreamBytes int64
	// Mink: one tiering round of the whole table into an empty lake.
	Mink         time.Duration
	ParquetBytes int64
	Files        int
	// DuckDB: COPY of the same Arrow batches to one zstd Parquet file.
	DuckDB        time.Duration
	DuckDBBytes   int64
	DuckDBVersion string
	// Disk: writing and fsyncing StreamBytes to one file.
	Disk time.Duration
}

// RunTiering runs MeasureTiering and prints its table.
func RunTiering(ctx context.Context, w io.Writer, cfg TieringConfig) error {
	rep, err := MeasureTiering(ctx, cfg)
	if err != nil {
		return err
	}
	WriteTieringTable(w, rep)
	return nil
}

// MeasureTiering times one tiering round of the facts table (Rows rows in
// Buckets buckets, committed as BatchRows-row batches) from memory into a
// lake in a local-directory object store, and, on the same batches, DuckDB
// writing one zstd Parquet file and the raw disk writing the stream bytes.
// Reading the streams is not timed (the source serves batches from memory),
// so this is the cost of the lake write: Parquet encoding, the object
// store's durable puts and the Iceberg commit.
func MeasureTiering(ctx context.Context, cfg TieringConfig) (*TieringReport, error) {
	cfg.fill()
	rep := &TieringReport{Config: cfg}
	base, err := os.MkdirTemp(cfg.Dir, "minkbench-tiering-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)

	// The batches, bucket by bucket (batch k goes to bucket k % Buckets).
	src := &memSource{batches: map[catalog.BucketID][]tiering.Batch{}}
	defer src.release()
	var all []arrow.RecordBatch
	for from, k := 0, 0; from < cfg.Rows; from, k = from+cfg.BatchRows, k+1 {
		rec := factsBatch(int64(from), int64(min(from+cfg.BatchRows, cfg.Rows)))
		n, err := ipcSize(rec)
		if err != nil {
			return nil, err
		}
		rep.StreamBytes += n
		all = append(all, rec)
	}

	// The metadata log and table, as the coordinator would have them.
	spec := factsSpec(cfg.Buckets)
	meta, err := newBenchMeta(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer meta.close()
	cat, propose, created, coord := meta.cat, meta.propose, meta.created, meta.coord
	ends := map[catalog.BucketID]uint64{}
	for k, rec := range all {
		b := created.Buckets[k%len(created.Buckets)]
		rec.Retain()
		src.batches[b] = append(src.batches[b], tiering.Batch{Offset: ends[b], Record: rec})
		n := uint64(rec.NumRows())
		if _, err := propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1,
			Objects: []catalog.StreamObject{{Key: fmt.Sprintf("bench/%d/%d", b, ends[b]), Start: ends[b], End: ends[b] + n, Size: 1}}}); err != nil {
			return nil, err
		}
		ends[b] += n
	}

	// mink: one round.
	storeDir := filepath.Join(base, "objects")
	store, err := objstore.NewDir(storeDir)
	if err != nil {
		return nil, err
	}
	tr := tiering.New(tiering.Config{Store: store, StoreURL: "file://" + storeDir, Meta: cat, Source: src, Logger: discardLogger()})
	start := time.Now()
	res, err := tr.Round(ctx, created.Table, coord.Epoch)
	if err != nil {
		return nil, fmt.Errorf("tiering round: %w", err)
	}
	rep.Mink = time.Since(start)
	if res.Rows != int64(cfg.Rows) {
		return nil, fmt.Errorf("the round tiered %d rows, want %d", res.Rows, cfg.Rows)
	}
	rep.ParquetBytes, rep.Files = res.Bytes, res.Files

	// DuckDB: the same batches to one Parquet file.
	db, err := engine.Open(engine.Options{AllowedDirectories: []string{base}})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx, engine.ConnOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	p := &duckDBPeer{db: db, conn: conn}
	if v, err := p.run(ctx, "SELECT version()"); err == nil {
		rep.DuckDBVersion = fmt.Sprint(v[0][0])
	}
	release, err := conn.RegisterRecords(ctx, "load_facts", factsArrowSchema, all)
	if err != nil {
		return nil, err
	}
	defer release()
	out := filepath.Join(base, "duckdb.parquet")
	start = time.Now()
	if err := conn.Exec(ctx, fmt.Sprintf("COPY (SELECT * FROM load_facts) TO '%s' (FORMAT parquet, COMPRESSION zstd)", out)); err != nil {
		return nil, fmt.Errorf("DuckDB COPY TO Parquet: %w", err)
	}
	if err := syncFile(out); err != nil {
		return nil, err
	}
	rep.DuckDB = time.Since(start)
	if fi, err := os.Stat(out); err == nil {
		rep.DuckDBBytes = fi.Size()
	}

	// Raw disk: the stream bytes, written and fsynced.
	start = time.Now()
	if err := writeSynced(filepath.Join(base, "raw"), rep.StreamBytes); err != nil {
		return nil, err
	}
	rep.Disk = time.Since(start)
	return rep, nil
}

func ipcSize(rec arrow.RecordBatch) (int64, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Write(rec); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func writeSynced(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := f.Write(chunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	return f.Sync()
}

// memSource serves committed batches from memory.
type memSource struct {
	mu      sync.Mutex
	batches map[catalog.BucketID][]tiering.Batch // guarded by mu
}

func (s *memSource) ReadCommitted(ctx context.Context, bucket catalog.BucketID, from, to uint64) ([]tiering.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tiering.Batch
	for _, b := range s.batches[bucket] {
		if b.Offset < to && b.Offset+uint64(b.Record.NumRows()) > from {
			b.Record.Retain()
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *memSource) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bs := range s.batches {
		for _, b := range bs {
			b.Record.Release()
		}
	}
}

// WriteTieringTable prints the report as markdown.
func WriteTieringTable(w io.Writer, rep *TieringReport) {
	c := rep.Config
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	rate := func(rows int, d time.Duration) float64 { return float64(rows) / d.Seconds() }
	fmt.Fprintf(w, "facts table (%s), %d rows in %d buckets, %d-row batches; stream (Arrow IPC) bytes %.1f MiB; object store: local directory\n\n",
		factsTypes, c.Rows, c.Buckets, c.BatchRows, mb(rep.StreamBytes))
	fmt.Fprintln(w, "| system | time | rows/s | stream MiB/s in | Parquet MiB | Parquet / stream bytes | files | time vs DuckDB |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	fmt.Fprintf(w, "| mink tiering round (parquet-go, Iceberg commit) | %s | %.0f | %.1f | %.1f | %.3f | %d | %.2f× |\n",
		rep.Mink.Round(time.Millisecond), rate(c.Rows, rep.Mink), mb(rep.StreamBytes)/rep.Mink.Seconds(),
		mb(rep.ParquetBytes), float64(rep.ParquetBytes)/float64(rep.StreamBytes), rep.Files, rep.Mink.Seconds()/rep.DuckDB.Seconds())
	fmt.Fprintf(w, "| DuckDB %s COPY TO Parquet (zstd) | %s | %.0f | %.1f | %.1f | %.3f | 1 | 1.00× (peer) |\n",
		rep.DuckDBVersion, rep.DuckDB.Round(time.Millisecond), rate(c.Rows, rep.DuckDB), mb(rep.StreamBytes)/rep.DuckDB.Seconds(),
		mb(rep.DuckDBBytes), float64(rep.DuckDBBytes)/float64(rep.StreamBytes))
	fmt.Fprintf(w, "| raw disk: write + fsync the stream bytes | %s | %.0f | %.1f | - | - | 1 | %.2f× |\n",
		rep.Disk.Round(time.Millisecond), rate(c.Rows, rep.Disk), mb(rep.StreamBytes)/rep.Disk.Seconds(), rep.Disk.Seconds()/rep.DuckDB.Seconds())
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TieringLagConfig configures the lake-lag benchmark.
type TieringLagConfig struct {
	Dir string
	// Rate is the ingest in rows/s, spread over Buckets buckets in batches
	// committed every 100 ms; Duration is how long it runs; Freshness is
	// the tiering_freshness of the table. Defaults 50 k, 4, 30 s, 1 s.
	Rate      int
	Buckets   int
	Duration  time.Duration
	Freshness time.Duration
}

// TieringLagReport is what MeasureTieringLag measured.
type TieringLagReport struct {
	Config     TieringLagConfig
	Rows       int64
	Rounds     int
	RoundTimes []time.Duration
	// Lags are, per committed batch, the time from its commit to the end
	// of the round that tiered it.
	Lags []time.Duration
	// Behind is the untiered rows when ingest stopped.
	Behind int64
}

// MeasureTieringLag commits batches of the facts table to the streams at
// Rate rows/s while a worker loop runs a round whenever the oldest untiered
// batch has waited Freshness and the last round started Freshness ago (the
// server's rule), and measures how old rows are when they reach the lake.
// Like MeasureTiering, the streams are in memory: this is the tiering
// worker's ability to keep up, on a local-directory object store.
func MeasureTieringLag(ctx context.Context, cfg TieringLagConfig) (*TieringLagReport, error) {
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
	}
	if cfg.Rate == 0 {
		cfg.Rate = 50_000
	}
	if cfg.Buckets == 0 {
		cfg.Buckets = 4
	}
	if cfg.Duration == 0 {
		cfg.Duration = 30 * time.Second
	}
	if cfg.Freshness == 0 {
		cfg.Freshness = time.Second
	}
	rep := &TieringLagReport{Config: cfg}
	base, err := os.MkdirTemp(cfg.Dir, "minkbench-tiering-lag-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	spec := factsSpec(cfg.Buckets)
	meta, err := newBenchMeta(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer meta.close()
	cat, propose, created, coord := meta.cat, meta.propose, meta.created, meta.coord
	storeDir := filepath.Join(base, "objects")
	store, err := objstore.NewDir(storeDir)
	if err != nil {
		return nil, err
	}
	src := &memSource{batches: map[catalog.BucketID][]tiering.Batch{}}
	defer src.release()
	tr := tiering.New(tiering.Config{Store: store, StoreURL: "file://" + storeDir, Meta: cat, Source: src, Logger: discardLogger()})

	// committed batches in order: (bucket, end offset, commit time)
	type commit struct {
		bucket catalog.BucketID
		end    uint64
		at     time.Time
	}
	var (
		mu      sync.Mutex
		commits []commit
	)
	ingestCtx, stopIngest := context.WithTimeout(ctx, cfg.Duration)
	defer stopIngest()
	ingestDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		ends := map[catalog.BucketID]uint64{}
		perTick := cfg.Rate / 10
		next := int64(0)
		for k := 0; ; k++ {
			select {
			case <-ingestCtx.Done():
				ingestDone <- nil
				return
			case <-tick.C:
			}
			b := created.Buckets[k%len(created.Buckets)]
			rec := factsBatch(next, next+int64(perTick))
			next += int64(perTick)
			src.mu.Lock()
			src.batches[b] = append(src.batches[b], tiering.Batch{Offset: ends[b], Record: rec})
			src.mu.Unlock()
			end := ends[b] + uint64(perTick)
			if _, err := propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1,
				Objects: []catalog.StreamObject{{Key: fmt.Sprintf("lag/%d/%d", b, ends[b]), Start: ends[b], End: end, Size: 1}}}); err != nil {
				ingestDone <- err
				return
			}
			ends[b] = end
			mu.Lock()
			commits = append(commits, commit{b, end, time.Now()})
			rep.Rows += int64(perTick)
			mu.Unlock()
		}
	}()

	// The worker: a round when the oldest untiered batch has waited
	// Freshness and the last round started Freshness ago.
	tiered := map[catalog.BucketID]uint64{}
	pending := 0 // index of the oldest commit not yet tiered
	var lastStart time.Time
	for ingestCtx.Err() == nil {
		mu.Lock()
		var oldest time.Time
		if pending < len(commits) {
			oldest = commits[pending].at
		}
		mu.Unlock()
		now := time.Now()
		if oldest.IsZero() || now.Sub(oldest) < cfg.Freshness || now.Sub(lastStart) < cfg.Freshness {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		lastStart = now
		res, err := tr.Round(ctx, created.Table, coord.Epoch)
		if err != nil {
			return nil, fmt.Errorf("tiering round: %w", err)
		}
		done := time.Now()
		rep.Rounds++
		rep.RoundTimes = append(rep.RoundTimes, done.Sub(now))
		for b, to := range res.To {
			tiered[b] = to
		}
		mu.Lock()
		for pending < len(commits) && commits[pending].end <= tiered[commits[pending].bucket] {
			rep.Lags = append(rep.Lags, done.Sub(commits[pending].at))
			pending++
		}
		mu.Unlock()
	}
	if err := <-ingestDone; err != nil {
		return nil, err
	}
	mu.Lock()
	rep.Behind = int64(len(commits)-pending) * int64(cfg.Rate/10)
	mu.Unlock()
	return rep, nil
}

// RunTieringLag runs MeasureTieringLag and prints its table.
func RunTieringLag(ctx context.Context, w io.Writer, cfg TieringLagConfig) error {
	rep, err := MeasureTieringLag(ctx, cfg)
	if err != nil {
		return err
	}
	WriteTieringLagTable(w, rep)
	return nil
}

// WriteTieringLagTable prints the report as markdown.
func WriteTieringLagTable(w io.Writer, rep *TieringLagReport) {
	c := rep.Config
	lags := slices.Clone(rep.Lags)
	slices.Sort(lags)
	rounds := slices.Clone(rep.RoundTimes)
	slices.Sort(rounds)
	pct := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(time.Millisecond)
	}
	fmt.Fprintf(w, "facts table, %d rows/s committed every 100 ms over %d buckets for %s, tiering_freshness %s; object store: local directory\n\n",
		c.Rate, c.Buckets, c.Duration, c.Freshness)
	fmt.Fprintln(w, "| rows | rounds | round p50 | round max | lag p50 | lag p99 | lag max | untiered at the end |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %d rows |\n", rep.Rows, rep.Rounds,
		pct(rounds, 0.5), pct(rounds, 1), pct(lags, 0.5), pct(lags, 0.99), pct(lags, 1), rep.Behind)
}
