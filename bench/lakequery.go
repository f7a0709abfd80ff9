package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/tiering"
)

// LakeQueryConfig configures RunLakeQuery. Zero values mean the defaults.
type LakeQueryConfig struct {
	// Dir holds mink's data (a fresh subdirectory, removed afterwards).
	Dir string
	// Rows in the facts table. Default 10 M.
	Rows int
	// ChunkRows is the number of rows per COPY of the load. Default 1 M.
	ChunkRows int
	// Runs is the number of timed runs per query and system, after one
	// warm-up run. Default 5.
	Runs int
}

// LakeQueryReport is what MeasureLakeQuery measured.
type LakeQueryReport struct {
	Config  LakeQueryConfig
	Results []QueryResult // Postgres unused
	// Selective: SelectiveLakeQueries on the union read (mirrors off),
	// with the lake data files each read and skipped (/metrics).
	Selective []SelectiveResult
	// Mirrored: the same after a restart with the engine's mirrors on (the
	// default); MirrorFill is the first statement, which fills them from
	// the lake.
	Mirrored   []QueryResult
	MirrorFill time.Duration
	// Files and Bytes of the facts table's lake snapshot.
	Files         int
	Bytes         int64
	TierTime      time.Duration
	DuckDBVersion string
	Threads       int
}

// RunLakeQuery runs MeasureLakeQuery and writes its table to w.
func RunLakeQuery(ctx context.Context, w io.Writer, cfg LakeQueryConfig) error {
	rep, err := MeasureLakeQuery(ctx, cfg)
	if err != nil {
		return err
	}
	WriteLakeQueryTable(w, rep)
	return nil
}

// MeasureLakeQuery loads Rows facts rows into an in-process mink node whose
// SELECTs read buckets and lake files directly (--disable-sql-mirrors),
// tiers the whole table with one round, and runs Queries through pgx on
// mink (the union read: every row from the lake, none from the streams)
// and on a DuckDB opened through sqlfront/engine whose facts and stores are
// views over read_parquet of the very data files of the lake snapshots.
// Systems take turns query by query; the warm-up results are compared.
func MeasureLakeQuery(ctx context.Context, cfg LakeQueryConfig) (*LakeQueryReport, error) {
	if cfg.Rows == 0 {
		cfg.Rows = 10_000_000
	}
	if cfg.ChunkRows == 0 {
		cfg.ChunkRows = 1_000_000
	}
	if cfg.Runs == 0 {
		cfg.Runs = 5
	}
	rep := &LakeQueryReport{Config: cfg, Threads: runtime.NumCPU()}
	base, err := os.MkdirTemp(cfg.Dir, "mink-bench-lakequery-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	node, err := minktest.StartNode(minktest.Options{DataDir: filepath.Join(base, "mink"), Tweak: func(c *server.Config) {
		c.DisableSQLMirrors = true
		c.TieringFreshness = 24 * time.Hour
	}}, nil)
	if err != nil {
		return nil, fmt.Errorf("start mink: %w", err)
	}
	defer node.Server.Close()
	conn, err := pgx.Connect(ctx, node.URL)
	if err != nil {
		return nil, fmt.Errorf("connect to mink: %w", err)
	}
	defer conn.Close(ctx)
	if err := execAll(ctx, conn, factsDDL+minkFactsOptions, storesDDL); err != nil {
		return nil, fmt.Errorf("mink: %w", err)
	}
	env := &loadEnv{mink: conn}
	if _, err := env.loadFacts(ctx, cfg.Rows, cfg.ChunkRows); err != nil {
		return nil, err
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"stores"}, storesColumns, pgx.CopyFromRows(storesRows())); err != nil {
		return nil, fmt.Errorf("mink: COPY stores: %w", err)
	}

	// One round per table, then check that everything is tiered.
	admin := server.NewAdminClient(node.Config.AdminAddr)
	admin.HTTP.Timeout = 0
	t0 := time.Now()
	for _, table := range []string{"facts", "stores"} {
		if err := waitCommitted(ctx, admin, table); err != nil {
			return nil, err
		}
		if err := admin.TieringRun(ctx, table, true, func(server.TieringRunEvent) {}); err != nil {
			return nil, err
		}
	}
	rep.TierTime = time.Since(t0)
	st, err := admin.TieringStatus(ctx)
	if err != nil {
		return nil, err
	}
	ids := map[string]catalog.TableID{}
	for _, tt := range st.Tables {
		ids[tt.Table] = tt.ID
		if (tt.Table == "facts" || tt.Table == "stores") && (tt.LagRows != 0 || tt.Tiered == 0) {
			return nil, fmt.Errorf("table %s not fully tiered: %+v", tt.Table, tt)
		}
	}

	// The DuckDB peer reads the same Parquet files in place.
	objects := filepath.Join(node.Config.DataDir, "objects")
	store, err := objstore.Open(ctx, "file://"+objects, objstore.Options{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	lr := tiering.NewLakeReader(store, "file://"+objects, nil)
	duck, err := engine.Open(engine.Options{AllowedDirectories: []string{objects}})
	if err != nil {
		return nil, err
	}
	defer duck.Close()
	dconn, err := duck.Conn(ctx, engine.ConnOptions{})
	if err != nil {
		return nil, err
	}
	peer := &duckDBPeer{db: duck, conn: dconn}
	for table, cols := range map[string][]string{"facts": factsColumns, "stores": storesColumns} {
		keys, err := lr.DataFiles(ctx, ids[table], 0)
		if err != nil || len(keys) == 0 {
			return nil, fmt.Errorf("data files of %s: %v (%d files)", table, err, len(keys))
		}
		paths := make([]string, len(keys))
		for i, k := range keys {
			paths[i] = "'" + filepath.Join(objects, filepath.FromSlash(k)) + "'"
			if table == "facts" {
				fi, err := os.Stat(filepath.Join(objects, filepath.FromSlash(k)))
				if err != nil {
					return nil, err
				}
				rep.Files++
				rep.Bytes += fi.Size()
			}
		}
		q := fmt.Sprintf("CREATE VIEW %s AS SELECT %s FROM read_parquet([%s])", table, strings.Join(cols, ", "), strings.Join(paths, ", "))
		if err := dconn.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("DuckDB peer: %w", err)
		}
	}
	version, err := peer.run(ctx, "SELECT version()")
	if err != nil {
		return nil, err
	}
	rep.DuckDBVersion = fmt.Sprint(version[0][0])

	if rep.Results, err = runInterleaved(ctx, pgxRunner(conn), peer.run, Queries, cfg.Runs); err != nil {
		return nil, err
	}
	if rep.Selective, err = runSelective(ctx, node.Config.AdminAddr, pgxRunner(conn), peer.run, SelectiveLakeQueries(cfg.Rows), cfg.Runs); err != nil {
		return nil, err
	}

	// Default configuration: the node restarted with its mirrors on; the
	// first statement over a table fills its mirror from the lake.
	conn.Close(ctx)
	node.Server.Close()
	node, err = minktest.StartNode(minktest.Options{DataDir: node.Config.DataDir, Tweak: func(c *server.Config) {
		c.TieringFreshness = 24 * time.Hour
	}}, nil)
	if err != nil {
		return nil, fmt.Errorf("restart mink: %w", err)
	}
	defer node.Server.Close()
	if conn, err = pgx.Connect(ctx, node.URL); err != nil {
		return nil, fmt.Errorf("connect to mink: %w", err)
	}
	defer conn.Close(ctx)
	t0 = time.Now()
	if err := execAll(ctx, conn, "SELECT count(*) FROM facts JOIN stores USING (store)"); err != nil {
		return nil, fmt.Errorf("mink: %w", err)
	}
	rep.MirrorFill = time.Since(t0)
	if rep.Mirrored, err = runInterleaved(ctx, pgxRunner(conn), peer.run, Queries, cfg.Runs); err != nil {
		return nil, err
	}
	return rep, nil
}

// runInterleaved runs Queries on mink and DuckDB in turns, query by query:
// one warm-up round whose results are compared, then runs timed rounds.
func runInterleaved(ctx context.Context, mink, duck func(ctx context.Context, sql string) ([][]any, error), queries []BenchQuery, runs int) ([]QueryResult, error) {
	systems := []struct {
		name string
		run  func(ctx context.Context, sql string) ([][]any, error)
	}{{"mink", mink}, {"DuckDB", duck}}
	var out []QueryResult
	for _, q := range queries {
		times := make([][]time.Duration, len(systems))
		for round := 0; round <= runs; round++ {
			var want [][]any
			for si, s := range systems {
				start := time.Now()
				got, err := s.run(ctx, q.SQL)
				d := time.Since(start)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", s.name, q.Name, err)
				}
				if round > 0 {
					times[si] = append(times[si], d)
					continue
				}
				if si == 0 {
					want = got
				} else if err := sameResult(want, got); err != nil {
					return nil, fmt.Errorf("%s: %s returns a different result from mink: %w", q.Name, s.name, err)
				}
			}
		}
		out = append(out, QueryResult{BenchQuery: q, Mink: median(times[0]), DuckDB: median(times[1])})
	}
	return out, nil
}

// waitCommitted waits until the table's rows are committed to stream
// objects (a round tiers only committed rows).
func waitCommitted(ctx context.Context, admin *server.AdminClient, table string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := admin.TieringStatus(ctx)
		if err != nil {
			return err
		}
		for _, tt := range st.Tables {
			if tt.Table == table && tt.End > 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no committed rows after 2 minutes", table)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WriteLakeQueryTable prints rep as markdown.
func WriteLakeQueryTable(w io.Writer, rep *LakeQueryReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "lakequery: facts table of %s rows (%s), fully tiered by one round (%.1f s) into %d Parquet files (%s), and stores (%d rows); "+
		"mink: in-process single node with --disable-sql-mirrors, so every SELECT is the union read (lake files through the lake cache, iceberg-go → Arrow → engine), queried through pgx; "+
		"DuckDB %s: views over read_parquet of the same data files, opened through sqlfront/engine (%d threads); "+
		"median of %d runs after 1 warm-up, systems interleaved query by query; results compared; GOMAXPROCS %d\n\n",
		commas(int64(cfg.Rows)), factsTypes, rep.TierTime.Seconds(), rep.Files, formatBytes(rep.Bytes), factStores,
		rep.DuckDBVersion, rep.Threads, cfg.Runs, runtime.GOMAXPROCS(0))
	writeRatios(w, "mink (union read)", rep.Results)
	if len(rep.Selective) > 0 {
		fmt.Fprintf(w, "\nSelective filters on the union read (mirrors off; lake files skipped by their column bounds, row groups by their Parquet statistics):\n\n")
		writeSelective(w, rep.Selective)
	}
	fmt.Fprintf(w, "\nThe same node restarted with its defaults (mirrors of log tables on): the first statement (a join of facts and stores) fills the mirrors from the lake in %.1f s; then:\n\n", rep.MirrorFill.Seconds())
	writeRatios(w, "mink (mirrors)", rep.Mirrored)
}

func writeRatios(w io.Writer, label string, results []QueryResult) {
	fmt.Fprintf(w, "| query | %s | DuckDB (Parquet) | mink/DuckDB |\n", label)
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	logSum := 0.0
	for _, r := range results {
		ratio := float64(r.Mink) / float64(r.DuckDB)
		logSum += math.Log(ratio)
		fmt.Fprintf(w, "| %s | %s | %s | %.2f× |\n", r.Name, formatLatency(r.Mink), formatLatency(r.DuckDB), ratio)
	}
	if len(results) > 0 {
		fmt.Fprintf(w, "\nmink / DuckDB, geometric mean: **%.2f×** (goal ≤ 1.3×)\n", math.Exp(logSum/float64(len(results))))
	}
}
