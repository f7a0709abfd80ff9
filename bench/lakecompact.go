package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/tiering"
)

// LakeCompactConfig configures the lake compaction benchmark.
type LakeCompactConfig struct {
	// Dir is where the object store (a local directory) and the peer's
	// file go; default the temp dir.
	Dir string
	// Rows of the facts table, tiered by Rounds rounds over Buckets
	// buckets (each round adds one file per bucket). Defaults 2 M, 240
	// (four hours of rounds at the default freshness of one minute), 4.
	Rows    int
	Rounds  int
	Buckets int
}

func (c *LakeCompactConfig) fill() {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Rows == 0 {
		c.Rows = 2_000_000
	}
	if c.Rounds == 0 {
		c.Rounds = 240
	}
	if c.Buckets == 0 {
		c.Buckets = 4
	}
}

// LakeCompactReport is what MeasureLakeCompact measured.
type LakeCompactReport struct {
	Config LakeCompactConfig
	// Compact is mink's compaction (read the small files, write the
	// compacted ones, commit the replace snapshot, record it).
	Compact tiering.CompactResult
	Mink    time.Duration
	// ScanBefore and ScanAfter: a full read of the lake (one column)
	// through mink's LakeReader, before and after the compaction.
	ScanBefore, ScanAfter time.Duration
	// DuckDB: COPY of the same rows (from memory) to one zstd Parquet file.
	DuckDB        time.Duration
	DuckDBBytes   int64
	DuckDBVersion string
}

// RunLakeCompact runs MeasureLakeCompact and prints its table.
func RunLakeCompact(ctx context.Context, w io.Writer, cfg LakeCompactConfig) error {
	rep, err := MeasureLakeCompact(ctx, cfg)
	if err != nil {
		return err
	}
	WriteLakeCompactTable(w, rep)
	return nil
}

// MeasureLakeCompact tiers the facts table in Rounds rounds (Rounds small
// files per bucket), then times one compaction of the lake (the default
// policy: 128 MiB target, more than 16 small files per bucket) and a full
// lake read before and after it; the peer is DuckDB writing the same rows
// to one Parquet file.
func MeasureLakeCompact(ctx context.Context, cfg LakeCompactConfig) (*LakeCompactReport, error) {
	cfg.fill()
	rep := &LakeCompactReport{Config: cfg}
	base, err := os.MkdirTemp(cfg.Dir, "minkbench-lakecompact-")
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

	// Rounds rounds, each adding one batch to every bucket.
	var all []arrow.RecordBatch
	defer func() {
		for _, r := range all {
			r.Release()
		}
	}()
	ends := map[catalog.BucketID]uint64{}
	perBatch := max(1, cfg.Rows/(cfg.Rounds*cfg.Buckets))
	next := 0
	for range cfg.Rounds {
		for _, b := range created.Buckets {
			rec := factsBatch(int64(next), int64(next+perBatch))
			next += perBatch
			all = append(all, rec)
			rec.Retain()
			src.mu.Lock()
			src.batches[b] = append(src.batches[b], tiering.Batch{Offset: ends[b], Record: rec})
			src.mu.Unlock()
			n := uint64(rec.NumRows())
			if _, err := propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1,
				Objects: []catalog.StreamObject{{Key: fmt.Sprintf("bench/%d/%d", b, ends[b]), Start: ends[b], End: ends[b] + n, Size: 1}}}); err != nil {
				return nil, err
			}
			ends[b] += n
		}
		if _, err := tr.Round(ctx, created.Table, coord.Epoch); err != nil {
			return nil, fmt.Errorf("tiering round: %w", err)
		}
	}
	rep.Config.Rows = next

	scan := func() (time.Duration, error) {
		var snap int64
		cat.Read(func(v *catalog.View) { snap = v.Tables[created.Table].Tiering.LakeSnapshotID })
		lr := tiering.NewLakeReader(store, "file://"+storeDir, nil)
		var rows int64
		start := time.Now()
		err := lr.Scan(ctx, tiering.ScanRequest{Table: created.Table, Snapshot: snap,
			Schema: arrow.NewSchema([]arrow.Field{factsArrowSchema.Field(2)}, nil)}, func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			return nil
		})
		d := time.Since(start)
		if err == nil && rows != int64(next) {
			err = fmt.Errorf("the lake read returned %d rows, want %d", rows, next)
		}
		return d, err
	}
	if rep.ScanBefore, err = scan(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep.Compact, err = tr.Compact(ctx, created.Table, coord.Epoch, tiering.CompactPolicy{
		TargetFileSize: tiering.DefaultTargetFileSize, MinFiles: tiering.DefaultCompactMinFiles})
	rep.Mink = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("compaction: %w", err)
	}
	if rep.Compact.Rows != int64(next) {
		return nil, fmt.Errorf("the compaction rewrote %d rows, want %d", rep.Compact.Rows, next)
	}
	if rep.ScanAfter, err = scan(); err != nil {
		return nil, err
	}

	// DuckDB: the same rows to one Parquet file.
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
	return rep, nil
}

// WriteLakeCompactTable prints the report as markdown.
func WriteLakeCompactTable(w io.Writer, rep *LakeCompactReport) {
	c, r := rep.Config, rep.Compact
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	rate := func(d time.Duration) float64 { return float64(c.Rows) / d.Seconds() }
	fmt.Fprintf(w, "facts table (%s), %d rows in %d buckets tiered by %d rounds (one file per bucket per round); object store: local directory; policy: target %d MiB, runs of more than %d files of similar size\n\n",
		factsTypes, c.Rows, c.Buckets, c.Rounds, tiering.DefaultTargetFileSize>>20, tiering.DefaultCompactMinFiles)
	fmt.Fprintln(w, "| system | data files before → after | time | rows/s | MiB read | MiB written | time vs DuckDB |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	fmt.Fprintf(w, "| mink lake compaction (parquet-go rewrite, Iceberg replace commit) | %d → %d | %s | %.0f | %.1f | %.1f | %.2f× |\n",
		r.FilesBefore, r.FilesAfter, rep.Mink.Round(time.Millisecond), rate(rep.Mink), mb(r.BytesRead), mb(r.BytesWritten), rep.Mink.Seconds()/rep.DuckDB.Seconds())
	fmt.Fprintf(w, "| DuckDB %s COPY of the rows (from memory) to one Parquet file (zstd) | - → 1 | %s | %.0f | - | %.1f | 1.00× (peer) |\n\n",
		rep.DuckDBVersion, rep.DuckDB.Round(time.Millisecond), rate(rep.DuckDB), mb(rep.DuckDBBytes))
	fmt.Fprintf(w, "Full lake read (one column, mink's LakeReader, no cache): %s over %d files before, %s over %d files after (%.2f×).\n",
		rep.ScanBefore.Round(time.Millisecond), r.FilesBefore, rep.ScanAfter.Round(time.Millisecond), r.FilesAfter, rep.ScanBefore.Seconds()/rep.ScanAfter.Seconds())
}
