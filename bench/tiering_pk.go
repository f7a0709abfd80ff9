package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/tiering"
)

// TieringPKConfig configures the primary-key tiering benchmark.
type TieringPKConfig struct {
	Dir string
	// Keys rows are loaded (+I) and tiered; then Rounds rounds each tier
	// Changes changelog records spread over all keys (updates as -U/+U
	// pairs, upserts as +U, deletes, new inserts). Buckets buckets.
	// Defaults 1 M, 4, 50 k, 4.
	Keys    int
	Rounds  int
	Changes int
	Buckets int
	Seed    uint64
}

func (c *TieringPKConfig) fill() {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Keys == 0 {
		c.Keys = 1_000_000
	}
	if c.Rounds == 0 {
		c.Rounds = 4
	}
	if c.Changes == 0 {
		c.Changes = 50_000
	}
	if c.Buckets == 0 {
		c.Buckets = 4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
}

// TieringPKRound is one measured round.
type TieringPKRound struct {
	Changes        int
	ChangelogBytes int64 // Arrow IPC bytes of the round's changelog entries
	ParquetWritten int64
	ParquetRead    int64 // the replaced files read back
	Time           time.Duration
	// DuckDB rewriting the same lake state (the table's files after the
	// round) into one zstd Parquet file: the peer for the rewrite cost.
	DuckDB time.Duration
}

// TieringPKReport is what MeasureTieringPK measured.
type TieringPKReport struct {
	Config        TieringPKConfig
	Load          TieringPKRound
	Rounds        []TieringPKRound
	DuckDBVersion string
}

var pkBenchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "_change_type", Type: arrow.BinaryTypes.String},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "store", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// MeasureTieringPK measures copy-on-write tiering of a primary-key table:
// the load round, then rounds of random changes; for each, the changelog
// bytes, the Parquet bytes written (write amplification = written /
// changelog), and the time against DuckDB rewriting the same state.
func MeasureTieringPK(ctx context.Context, cfg TieringPKConfig) (*TieringPKReport, error) {
	cfg.fill()
	rep := &TieringPKReport{Config: cfg}
	base, err := os.MkdirTemp(cfg.Dir, "minkbench-tiering-pk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed))

	spec := catalog.TableSpec{Name: "accounts", Buckets: cfg.Buckets, PrimaryKey: []string{"id"}, Columns: []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true}, {Name: "store", Type: "integer"},
		{Name: "amount", Type: "double precision"}, {Name: "name", Type: "text"},
	}}
	meta, err := newBenchMeta(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer meta.close()
	cat, propose, created, coord := meta.cat, meta.propose, meta.created, meta.coord
	src := &memSource{batches: map[catalog.BucketID][]tiering.Batch{}}
	defer src.release()
	ends := map[catalog.BucketID]uint64{}
	live := make([][]int64, len(created.Buckets)) // keys per bucket
	nextID := int64(0)

	type change struct {
		ct string
		id int64
	}
	// commit appends one changelog entry per bucket and returns its bytes.
	commit := func(per [][]change) (int64, error) {
		var total int64
		for i, cs := range per {
			if len(cs) == 0 {
				continue
			}
			b := created.Buckets[i]
			bld := array.NewRecordBuilder(memory.DefaultAllocator, pkBenchSchema)
			for _, c := range cs {
				bld.Field(0).(*array.StringBuilder).Append(c.ct)
				bld.Field(1).(*array.Int64Builder).Append(c.id)
				bld.Field(2).(*array.Int32Builder).Append(rng.Int32N(500))
				bld.Field(3).(*array.Float64Builder).Append(float64(rng.IntN(1e7)) / 100)
				bld.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("customer-%d-%d", c.id, rng.IntN(1000)))
			}
			rec := bld.NewRecordBatch()
			bld.Release()
			n, err := ipcSize(rec)
			if err != nil {
				return 0, err
			}
			total += n
			src.batches[b] = append(src.batches[b], tiering.Batch{Offset: ends[b], Record: rec})
			cnt := uint64(len(cs))
			if _, err := propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1,
				Objects: []catalog.StreamObject{{Key: fmt.Sprintf("bench/%d/%d", b, ends[b]), Start: ends[b], End: ends[b] + cnt, Size: 1}}}); err != nil {
				return 0, err
			}
			ends[b] += cnt
		}
		return total, nil
	}

	storeDir := filepath.Join(base, "objects")
	store, err := objstore.NewDir(storeDir)
	if err != nil {
		return nil, err
	}
	storeURL := "file://" + storeDir
	tr := tiering.New(tiering.Config{Store: store, StoreURL: storeURL, Meta: cat, Source: src, Logger: discardLogger()})

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

	round := func(per [][]change, k int) (TieringPKRound, error) {
		var r TieringPKRound
		for _, cs := range per {
			r.Changes += len(cs)
		}
		var err error
		if r.ChangelogBytes, err = commit(per); err != nil {
			return r, err
		}
		start := time.Now()
		res, err := tr.Round(ctx, created.Table, coord.Epoch)
		if err != nil {
			return r, fmt.Errorf("tiering round: %w", err)
		}
		r.Time = time.Since(start)
		r.ParquetWritten, r.ParquetRead = res.Bytes, res.BytesRead
		// The peer: DuckDB reads the lake's current files and writes them
		// as one zstd Parquet file.
		tbl, err := tiering.NewLake(store, storeURL).Load(ctx, created.Table)
		if err != nil {
			return r, err
		}
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return r, err
		}
		var files []string
		for _, t := range tasks {
			files = append(files, "'"+strings.TrimPrefix(t.File.FilePath(), "file://")+"'")
		}
		out := filepath.Join(base, fmt.Sprintf("duckdb-%d.parquet", k))
		start = time.Now()
		if err := conn.Exec(ctx, fmt.Sprintf("COPY (SELECT * FROM read_parquet([%s]) ORDER BY id) TO '%s' (FORMAT parquet, COMPRESSION zstd)",
			strings.Join(files, ", "), out)); err != nil {
			return r, fmt.Errorf("DuckDB rewrite: %w", err)
		}
		if err := syncFile(out); err != nil {
			return r, err
		}
		r.DuckDB = time.Since(start)
		return r, nil
	}

	// The load: Keys inserts.
	per := make([][]change, len(created.Buckets))
	for range cfg.Keys {
		i := int(nextID % int64(len(per)))
		per[i] = append(per[i], change{"+I", nextID})
		live[i] = append(live[i], nextID)
		nextID++
	}
	if rep.Load, err = round(per, 0); err != nil {
		return nil, err
	}
	for k := 1; k <= cfg.Rounds; k++ {
		per := make([][]change, len(created.Buckets))
		for n := 0; n < cfg.Changes; {
			i := rng.IntN(len(per))
			op := rng.IntN(10)
			switch {
			case op < 6 && len(live[i]) > 0: // update
				id := live[i][rng.IntN(len(live[i]))]
				per[i] = append(per[i], change{"-U", id}, change{"+U", id})
				n += 2
			case op < 8 && len(live[i]) > 0: // delete
				j := rng.IntN(len(live[i]))
				per[i] = append(per[i], change{"-D", live[i][j]})
				live[i][j] = live[i][len(live[i])-1]
				live[i] = live[i][:len(live[i])-1]
				n++
			default: // insert
				id := nextID*int64(len(per)) + int64(i)
				nextID++
				per[i] = append(per[i], change{"+I", id})
				live[i] = append(live[i], id)
				n++
			}
		}
		r, err := round(per, k)
		if err != nil {
			return nil, err
		}
		rep.Rounds = append(rep.Rounds, r)
	}
	return rep, nil
}

// RunTieringPK runs MeasureTieringPK and prints its table.
func RunTieringPK(ctx context.Context, w io.Writer, cfg TieringPKConfig) error {
	rep, err := MeasureTieringPK(ctx, cfg)
	if err != nil {
		return err
	}
	WriteTieringPKTable(w, rep)
	return nil
}

// WriteTieringPKTable prints the report as markdown.
func WriteTieringPKTable(w io.Writer, rep *TieringPKReport) {
	c := rep.Config
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	fmt.Fprintf(w, "primary-key table (id bigint, store int, amount double, name text), %d keys in %d buckets, then %d rounds of %d changelog records (60%% -U/+U updates, 20%% deletes, 20%% inserts, uniform over keys); object store: local directory; peer: DuckDB %s rewriting the same lake state (its files after the round) as one zstd Parquet file\n\n",
		c.Keys, c.Buckets, c.Rounds, c.Changes, rep.DuckDBVersion)
	fmt.Fprintln(w, "| round | changelog records | changelog MiB (Arrow IPC) | Parquet written MiB | Parquet read back MiB | write amplification (written / changelog) | mink time | DuckDB rewrite time | mink vs DuckDB |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	row := func(name string, r TieringPKRound) {
		fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %s | %s | %.2f× |\n", name, r.Changes, mb(r.ChangelogBytes),
			mb(r.ParquetWritten), mb(r.ParquetRead), float64(r.ParquetWritten)/float64(r.ChangelogBytes),
			r.Time.Round(time.Millisecond), r.DuckDB.Round(time.Millisecond), r.Time.Seconds()/r.DuckDB.Seconds())
	}
	row("load", rep.Load)
	for i, r := range rep.Rounds {
		row(fmt.Sprint(i+1), r)
	}
}
