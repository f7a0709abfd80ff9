package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/sqlfront/engine"
)

// The stores table: the small side of the join, one row per store of the
// facts table.
const storesDDL = `CREATE TABLE stores (store integer, region text)`

var storesColumns = []string{"store", "region"}

const storeRegions = 25

func storeRegion(store int) string { return fmt.Sprintf("region-%02d", store%storeRegions) }

func storesRows() [][]any {
	rows := make([][]any, factStores)
	for i := range rows {
		rows[i] = []any{int32(i), storeRegion(i)}
	}
	return rows
}

// BenchQuery is one query of the query benchmark. The SQL runs unchanged on
// mink, DuckDB and PostgreSQL, and every query's result is deterministic
// (ORDER BY on unique keys), so the systems' results are compared.
type BenchQuery struct{ Name, SQL string }

// Queries are the query benchmark's queries over facts and stores.
var Queries = []BenchQuery{
	{"count", "SELECT count(*) FROM facts"},
	{"group-by", "SELECT day, count(*), sum(amount), avg(amount), max(user_id) FROM facts GROUP BY day ORDER BY day"},
	{"group-by top-10", "SELECT name, count(*), sum(amount) FROM facts GROUP BY name ORDER BY 2 DESC, 1 LIMIT 10"},
	{"filter+top-N", "SELECT id, name, amount, ts FROM facts WHERE store = 7 AND flag ORDER BY amount DESC, id LIMIT 10"},
	{"join small", "SELECT s.region, count(*), sum(f.amount) FROM facts f JOIN stores s ON f.store = s.store GROUP BY s.region ORDER BY s.region"},
}

// QueryConfig configures RunQuery. Zero values mean the defaults.
type QueryConfig struct {
	// Dir holds mink's and PostgreSQL's data (a fresh subdirectory, removed
	// afterwards). Default: the temp dir.
	Dir string
	// Rows in the facts table. Default 10 M.
	Rows int
	// ChunkRows is the number of rows per COPY of the load. Default 1 M.
	ChunkRows int
	// Runs is the number of timed runs per query and system, after one
	// warm-up run. Default 5.
	Runs int
	// SkipPostgres leaves the PostgreSQL column out (reported as not
	// measured).
	SkipPostgres bool
	// CPUProfile, if set, is a file for a CPU profile of Runs extra runs of
	// every query on mink alone, after the timed runs.
	CPUProfile string
}

func (c *QueryConfig) fill() error {
	if c.Rows == 0 {
		c.Rows = 10_000_000
	}
	if c.ChunkRows == 0 {
		c.ChunkRows = 1_000_000
	}
	if c.Runs == 0 {
		c.Runs = 5
	}
	if c.Rows < 0 || c.ChunkRows < 0 || c.Runs < 0 {
		return fmt.Errorf("rows %d, chunk rows %d and runs %d must be positive", c.Rows, c.ChunkRows, c.Runs)
	}
	return nil
}

// QueryResult is one query's median times; Postgres is 0 when the peer was
// not measured.
type QueryResult struct {
	BenchQuery
	Mink, DuckDB, Postgres time.Duration
}

// QueryReport is the outcome of MeasureQuery.
type QueryReport struct {
	Config  QueryConfig
	Results []QueryResult
	// Loads of the facts table.
	MinkLoad     IngestResult
	PostgresLoad *IngestResult
	DuckDBLoad   time.Duration
	// PostgresName names the peer; PostgresSkipped says why it was not
	// measured when it was not.
	PostgresName, PostgresSkipped string
	DuckDBVersion                 string
	Threads                       int
	// MinkPeakRSS is this process's peak RSS while mink ran one warm-up
	// round of the queries, before the DuckDB peer was loaded (bytes).
	MinkPeakRSS int64
}

// RunQuery loads Rows facts rows into an in-process mink node (and
// PostgreSQL), the same rows into native tables of a DuckDB opened through
// sqlfront/engine, runs Queries on each, and writes a markdown table of the
// median times and ratios to w.
func RunQuery(ctx context.Context, w io.Writer, cfg QueryConfig) error {
	rep, err := MeasureQuery(ctx, cfg)
	if err != nil {
		return err
	}
	WriteQueryTable(w, rep)
	return nil
}

// MeasureQuery runs the measurements of RunQuery.
//
// Each round runs every query once on every system, query by query, so
// that drift in a shared machine's load hits the systems alike. Round 0 is
// a warm-up whose results are compared across systems: a difference fails
// the run.
func MeasureQuery(ctx context.Context, cfg QueryConfig) (*QueryReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("query bench: %w", err)
	}
	rep := &QueryReport{Config: cfg, Threads: runtime.NumCPU()}
	env, err := startLoadEnv(ctx, cfg.Dir, "query", cfg.SkipPostgres)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx)
	rep.PostgresSkipped = env.pgSkipped

	type system struct {
		name string
		run  func(ctx context.Context, sql string) ([][]any, error)
	}
	minkSys := system{"mink", pgxRunner(env.mink)}
	if err := execAll(ctx, env.mink, storesDDL); err != nil {
		return nil, fmt.Errorf("mink: %w", err)
	}
	if env.pgConn != nil {
		if err := execAll(ctx, env.pgConn, storesDDL); err != nil {
			return nil, fmt.Errorf("PostgreSQL: %w", err)
		}
	}
	targets, err := env.loadFacts(ctx, cfg.Rows, cfg.ChunkRows)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if _, err := t.conn.CopyFrom(ctx, pgx.Identifier{"stores"}, storesColumns, pgx.CopyFromRows(storesRows())); err != nil {
			return nil, fmt.Errorf("%s: COPY stores: %w", t.name, err)
		}
	}
	rep.MinkLoad = targets[0].result()
	if len(targets) > 1 {
		r := targets[1].result()
		rep.PostgresLoad = &r
		rep.PostgresName = env.pg.peerName()
		// Hint bits, visibility map and statistics, as a DBA would after
		// a bulk load.
		if err := execAll(ctx, env.pgConn, "VACUUM ANALYZE facts", "VACUUM ANALYZE stores"); err != nil {
			return nil, fmt.Errorf("PostgreSQL: %w", err)
		}
	}

	resetPeakRSS()
	for _, q := range Queries {
		if _, err := minkSys.run(ctx, q.SQL); err != nil {
			return nil, fmt.Errorf("mink: %s: %w", q.Name, err)
		}
	}
	rep.MinkPeakRSS = procStatus("self", "VmHWM")

	t0 := time.Now()
	duck, err := openDuckDBPeer(ctx, cfg.Rows, cfg.ChunkRows)
	if err != nil {
		return nil, fmt.Errorf("DuckDB peer: %w", err)
	}
	defer duck.close()
	rep.DuckDBLoad = time.Since(t0)
	rep.DuckDBVersion = duck.version

	systems := []system{minkSys, {"DuckDB", duck.run}}
	if env.pgConn != nil {
		systems = append(systems, system{rep.PostgresName, pgxRunner(env.pgConn)})
	}
	times := make([][][]time.Duration, len(Queries)) // [query][system][run]
	for qi, q := range Queries {
		times[qi] = make([][]time.Duration, len(systems))
		for round := 0; round <= cfg.Runs; round++ {
			var want [][]any
			for si, s := range systems {
				start := time.Now()
				got, err := s.run(ctx, q.SQL)
				d := time.Since(start)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", s.name, q.Name, err)
				}
				if round > 0 {
					times[qi][si] = append(times[qi][si], d)
					continue
				}
				if si == 0 {
					want = got
				} else if err := sameResult(want, got); err != nil {
					return nil, fmt.Errorf("%s: %s returns a different result from %s: %w", q.Name, s.name, systems[0].name, err)
				}
			}
		}
		res := QueryResult{BenchQuery: q, Mink: median(times[qi][0]), DuckDB: median(times[qi][1])}
		if len(systems) > 2 {
			res.Postgres = median(times[qi][2])
		}
		rep.Results = append(rep.Results, res)
	}

	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return nil, err
		}
		for _, q := range Queries {
			for range cfg.Runs {
				if _, err := minkSys.run(ctx, q.SQL); err != nil {
					stop()
					return nil, fmt.Errorf("mink: %s: %w", q.Name, err)
				}
			}
		}
		stop()
	}
	return rep, nil
}

// WriteQueryTable writes rep as a markdown table, with what was measured
// above it and the queries below.
func WriteQueryTable(w io.Writer, rep *QueryReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "query: facts table of %s rows (%s) and stores table of %d rows; "+
		"mink: in-process single node, queried through pgx; DuckDB %s: native tables in an in-memory DuckDB opened in this process "+
		"through sqlfront/engine with the same settings as mink's (%d threads); ",
		commas(int64(cfg.Rows)), factsTypes, factStores, rep.DuckDBVersion, rep.Threads)
	if rep.PostgresName != "" {
		fmt.Fprintf(w, "%s: default settings, VACUUM ANALYZE after the load, queried through pgx; ", rep.PostgresName)
	}
	fmt.Fprintf(w, "median of %d runs after 1 warm-up, systems interleaved query by query; results compared across systems; GOMAXPROCS %d\n\n",
		cfg.Runs, runtime.GOMAXPROCS(0))
	if rep.PostgresName == "" {
		fmt.Fprintf(w, "**PostgreSQL peer not measured: %s.**\n\n", rep.PostgresSkipped)
	}
	header := "| query | mink | DuckDB | mink/DuckDB |"
	rule := "|---|---:|---:|---:|"
	if rep.PostgresName != "" {
		header += " " + rep.PostgresName + " | mink/PostgreSQL |"
		rule += "---:|---:|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	logSum := 0.0
	for _, r := range rep.Results {
		ratio := float64(r.Mink) / float64(r.DuckDB)
		logSum += math.Log(ratio)
		fmt.Fprintf(w, "| %s | %s | %s | %.2f× |", r.Name, formatLatency(r.Mink), formatLatency(r.DuckDB), ratio)
		if rep.PostgresName != "" {
			fmt.Fprintf(w, " %s | %.2f× |", formatLatency(r.Postgres), float64(r.Mink)/float64(r.Postgres))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if len(rep.Results) > 0 {
		fmt.Fprintf(w, "mink / DuckDB, geometric mean over the queries: **%.2f×** (goal ≤ 1.3× on each)\n\n",
			math.Exp(logSum/float64(len(rep.Results))))
	}
	fmt.Fprintf(w, "Load: mink %s rows/s", commas(int64(rep.MinkLoad.RowsPerSec())))
	if rep.PostgresLoad != nil {
		fmt.Fprintf(w, ", %s %s rows/s", rep.PostgresLoad.Target, commas(int64(rep.PostgresLoad.RowsPerSec())))
	}
	fmt.Fprintf(w, " (COPYs of %s rows); DuckDB native tables filled from Arrow in %.1f s. "+
		"Peak RSS of this process during a round of the queries on mink, before DuckDB's tables were loaded: %s.\n\n",
		commas(int64(cfg.ChunkRows)), rep.DuckDBLoad.Seconds(), formatBytes(rep.MinkPeakRSS))
	fmt.Fprintln(w, "| query | SQL |")
	fmt.Fprintln(w, "|---|---|")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "| %s | `%s` |\n", r.Name, r.SQL)
	}
}

// pgxRunner runs a query over a pgx connection and returns its rows.
func pgxRunner(conn *pgx.Conn) func(ctx context.Context, sql string) ([][]any, error) {
	return func(ctx context.Context, sql string) ([][]any, error) {
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][]any
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return nil, err
			}
			out = append(out, vals)
		}
		return out, rows.Err()
	}
}

// duckDBPeer is a DuckDB with the facts and stores tables as native
// tables, opened through sqlfront/engine (the only package that links
// DuckDB) with the same options as mink's engine.
type duckDBPeer struct {
	db      *engine.DB
	conn    *engine.Conn
	version string
}

var factsArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "store", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "user_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
}, nil)

var storesArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "store", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// openDuckDBPeer creates the tables with the same DDL as the other systems
// and fills them, chunk by chunk, from Arrow batches of the same rows.
func openDuckDBPeer(ctx context.Context, rows, chunk int) (p *duckDBPeer, err error) {
	db, err := engine.Open(engine.Options{})
	if err != nil {
		return nil, err
	}
	p = &duckDBPeer{db: db}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.conn, err = db.Conn(ctx, engine.ConnOptions{}); err != nil {
		return nil, err
	}
	version, err := p.run(ctx, "SELECT version()")
	if err != nil {
		return nil, err
	}
	p.version = fmt.Sprint(version[0][0])
	for _, s := range []string{factsDDL, storesDDL} {
		if err := p.conn.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	const batchRows = 64 << 10
	for start := 0; start < rows; start += chunk {
		var batches []arrow.RecordBatch
		for b := start; b < min(start+chunk, rows); b += batchRows {
			batches = append(batches, factsBatch(int64(b), int64(min(b+batchRows, start+chunk, rows))))
		}
		err := p.insertArrow(ctx, "facts", factsArrowSchema, batches)
		releaseBatches(batches)
		if err != nil {
			return nil, err
		}
	}
	stores := storesBatch()
	defer stores.Release()
	if err := p.insertArrow(ctx, "stores", storesArrowSchema, []arrow.RecordBatch{stores}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *duckDBPeer) insertArrow(ctx context.Context, table string, schema *arrow.Schema, batches []arrow.RecordBatch) error {
	release, err := p.conn.RegisterRecords(ctx, "load_"+table, schema, batches)
	if err != nil {
		return err
	}
	defer release()
	if err := p.conn.Exec(ctx, "INSERT INTO "+table+" SELECT * FROM load_"+table); err != nil {
		return fmt.Errorf("load %s: %w", table, err)
	}
	return nil
}

func (p *duckDBPeer) run(ctx context.Context, sql string) ([][]any, error) {
	rows, err := p.conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		out = append(out, slices.Clone(rows.Values()))
	}
	return out, rows.Err()
}

func (p *duckDBPeer) close() {
	if p.conn != nil {
		p.conn.Close()
	}
	p.db.Close()
}

// factsBatch returns rows [from, to) of the facts table as Arrow.
func factsBatch(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, factsArrowSchema)
	defer b.Release()
	n := int(to - from)
	for _, f := range b.Fields() {
		f.Reserve(n)
	}
	id := b.Field(0).(*array.Int64Builder)
	store := b.Field(1).(*array.Int32Builder)
	amount := b.Field(2).(*array.Float64Builder)
	name := b.Field(3).(*array.StringBuilder)
	ts := b.Field(4).(*array.TimestampBuilder)
	flag := b.Field(5).(*array.BooleanBuilder)
	user := b.Field(6).(*array.Int64Builder)
	day := b.Field(7).(*array.Date32Builder)
	for i := from; i < to; i++ {
		r := factRowAt(i)
		id.UnsafeAppend(r.id)
		store.UnsafeAppend(r.store)
		amount.UnsafeAppend(r.amount)
		name.Append(r.name)
		ts.UnsafeAppend(arrow.Timestamp(r.tsMicros))
		flag.UnsafeAppend(r.flag)
		user.UnsafeAppend(r.userID)
		day.UnsafeAppend(arrow.Date32(r.day))
	}
	return b.NewRecordBatch()
}

func storesBatch() arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, storesArrowSchema)
	defer b.Release()
	for i := range factStores {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		b.Field(1).(*array.StringBuilder).Append(storeRegion(i))
	}
	return b.NewRecordBatch()
}

func releaseBatches(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// sameResult compares two results row by row, with integers of any width
// equal, times compared as instants, and floating-point values equal to a
// relative 1e-9 (sums depend on the order of addition).
func sameResult(want, got [][]any) error {
	if len(want) != len(got) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if len(want[i]) != len(got[i]) {
			return fmt.Errorf("row %d: %d columns, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if !sameValue(normalize(want[i][j]), normalize(got[i][j])) {
				return fmt.Errorf("row %d: %v, want %v", i, formatRow(got[i]), formatRow(want[i]))
			}
		}
	}
	return nil
}

func sameValue(a, b any) bool {
	fa, aok := a.(float64)
	fb, bok := b.(float64)
	if aok && bok {
		return fa == fb || math.Abs(fa-fb) <= 1e-9*math.Max(math.Abs(fa), math.Abs(fb))
	}
	return a == b
}

func normalize(v any) any {
	switch x := v.(type) {
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case float32:
		return float64(x)
	case pgtype.Numeric:
		f, err := x.Float64Value()
		if err == nil && f.Valid {
			return f.Float64
		}
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}

func formatRow(row []any) string {
	parts := make([]string, len(row))
	for i, v := range row {
		parts[i] = fmt.Sprint(normalize(v))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
