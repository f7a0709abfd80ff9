package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// The facts table: the narrow 8-column table that the ingest and query
// benchmarks load into mink and their peers. The DDL is accepted as written
// by mink, PostgreSQL and DuckDB.
const factsDDL = `CREATE TABLE facts (id bigint, store integer, amount double precision, name text, ` +
	`ts timestamptz, flag boolean, user_id bigint, day date)`

// minkFactsOptions follow factsDDL in mink: a log table, rows spread
// round-robin (per COPY batch) over its buckets.
const minkFactsOptions = " WITH (buckets = 4)"

var factsColumns = []string{"id", "store", "amount", "name", "ts", "flag", "user_id", "day"}

// factsTypes describes the columns in reports.
const factsTypes = "bigint, int, double, text(10), timestamptz, bool, bigint, date"

// Row i of the facts table is a pure function of i (factRow), so every
// system gets the same rows, whichever way they are loaded.
const (
	factStores = 1000    // store: 0…999, the join key of the stores table
	factNames  = 10_000  // name: "item-00000"…"item-09999"
	factUsers  = 100_000 // user_id: 0…99 999
	factDays   = 366     // day: 2024-01-01…2024-12-31
)

var (
	factsEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	// ts of row i is factsEpoch + i seconds.
	factsEpochMicros = factsEpoch.UnixMicro()
	factsEpochDays   = int32(factsEpoch.Unix() / 86400)
	factNameValues   = func() []string {
		names := make([]string, factNames)
		for i := range names {
			names[i] = fmt.Sprintf("item-%05d", i)
		}
		return names
	}()
)

type factRow struct {
	id       int64
	store    int32
	amount   float64 // whole cents, 0.00…9999.99
	name     string
	tsMicros int64
	flag     bool
	userID   int64
	day      int32 // days since 1970-01-01
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func factRowAt(i int64) factRow {
	h1 := splitmix64(uint64(i))
	h2 := splitmix64(h1)
	h3 := splitmix64(h2)
	return factRow{
		id:       i,
		store:    int32(h1 % factStores),
		amount:   float64(h2%1_000_000) / 100,
		name:     factNameValues[h3%factNames],
		tsMicros: factsEpochMicros + i*1_000_000,
		flag:     (h1>>32)&1 == 1,
		userID:   int64((h2 >> 32) % factUsers),
		day:      factsEpochDays + int32((h3>>32)%factDays),
	}
}

// factsSource feeds rows [next, end) to pgx's CopyFrom, generating them on
// the fly so that the client holds no more than pgx's buffer.
type factsSource struct {
	next, end int64
	values    [8]any
}

func (s *factsSource) Next() bool {
	if s.next >= s.end {
		return false
	}
	r := factRowAt(s.next)
	s.next++
	s.values = [8]any{r.id, r.store, r.amount, r.name, time.UnixMicro(r.tsMicros).UTC(), r.flag, r.userID,
		time.Unix(int64(r.day)*86400, 0).UTC()}
	return true
}

// Values returns the current row; pgx encodes it before calling Next again.
func (s *factsSource) Values() ([]any, error) { return s.values[:], nil }

func (s *factsSource) Err() error { return nil }

// IngestConfig configures RunIngest. Zero values mean the defaults.
type IngestConfig struct {
	// Dir holds mink's and PostgreSQL's data (a fresh subdirectory, removed
	// afterwards). Default: the temp dir. When running as root it must be
	// searchable by the postgres user.
	Dir string
	// Rows is the number of rows loaded into each system. Default 10 M.
	Rows int
	// ChunkRows is the number of rows per COPY; each COPY is one
	// transaction. mink stages a COPY's rows in memory until it commits, so
	// one huge COPY would hold the whole load. Default 1 M.
	ChunkRows int
	// SkipPostgres leaves the PostgreSQL peer out (reported as not measured).
	SkipPostgres bool
	// CPUProfile, if set, is a file for a CPU profile of the whole load
	// (mink's node runs in this process; the PostgreSQL chunks show only
	// the pgx client).
	CPUProfile string
}

func (c *IngestConfig) fill() error {
	if c.Rows == 0 {
		c.Rows = 10_000_000
	}
	if c.ChunkRows == 0 {
		c.ChunkRows = 1_000_000
	}
	if c.Rows < 0 || c.ChunkRows < 0 {
		return fmt.Errorf("rows %d and chunk rows %d must be positive", c.Rows, c.ChunkRows)
	}
	return nil
}

// IngestResult is one system's load.
type IngestResult struct {
	Target  string
	Rows    int64
	COPYs   int
	Elapsed time.Duration // sum of its COPYs' times
	// PeakRSS is the system's peak resident set size during the load, in
	// bytes, 0 if unknown: for mink, this process's (the node and the pgx
	// client) while mink's COPYs ran; for PostgreSQL, its backend
	// process's for the load's connection (shared buffers it touched
	// included; the postmaster, checkpointer and WAL writer not).
	PeakRSS int64
}

// RowsPerSec is the throughput.
func (r IngestResult) RowsPerSec() float64 { return float64(r.Rows) / r.Elapsed.Seconds() }

// IngestReport is the outcome of MeasureIngest.
type IngestReport struct {
	Config IngestConfig
	Mink   IngestResult
	// Postgres is nil when the peer was not measured; PostgresSkipped says
	// why.
	Postgres        *IngestResult
	PostgresSkipped string
	// MinkRSSAfter is this process's resident set size after the load,
	// with every row in mink (bytes, 0 if unknown).
	MinkRSSAfter int64
	DataDir      string
}

// RunIngest loads Rows narrow rows with binary COPY (pgx CopyFrom) into an
// in-process mink node and into PostgreSQL, and writes a markdown table of
// rows/s and the ratio to w.
func RunIngest(ctx context.Context, w io.Writer, cfg IngestConfig) error {
	rep, err := MeasureIngest(ctx, cfg)
	if err != nil {
		return err
	}
	WriteIngestTable(w, rep)
	return nil
}

// MeasureIngest runs the loads of RunIngest.
//
// Both systems get the same COPYs of ChunkRows rows over one connection
// each, in turns: chunk k goes to mink and to PostgreSQL before chunk k+1
// goes to either (the first of the pair alternating), so that drift in a
// shared machine's load hits both alike. A system's time is the sum of its
// COPYs' times.
func MeasureIngest(ctx context.Context, cfg IngestConfig) (*IngestReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("ingest bench: %w", err)
	}
	rep := &IngestReport{Config: cfg}
	env, err := startLoadEnv(ctx, cfg.Dir, "ingest", cfg.SkipPostgres)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx)
	rep.DataDir, rep.PostgresSkipped = env.base, env.pgSkipped

	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	targets, err := env.loadFacts(ctx, cfg.Rows, cfg.ChunkRows)
	if err != nil {
		return nil, err
	}
	rep.Mink = targets[0].result()
	rep.MinkRSSAfter = procStatus("self", "VmRSS")
	if len(targets) > 1 {
		r := targets[1].result()
		rep.Postgres = &r
	}
	var count int64
	if err := env.mink.QueryRow(ctx, "SELECT count(*) FROM facts").Scan(&count); err != nil {
		return nil, fmt.Errorf("mink: count after load: %w", err)
	}
	if count != int64(cfg.Rows) {
		return nil, fmt.Errorf("mink: %d rows after loading %d", count, cfg.Rows)
	}
	return rep, nil
}

// WriteIngestTable writes rep as a markdown table with a header line saying
// what was measured.
func WriteIngestTable(w io.Writer, rep *IngestReport) {
	cfg := rep.Config
	chunks := (cfg.Rows + cfg.ChunkRows - 1) / cfg.ChunkRows
	fmt.Fprintf(w, "ingest: %s rows of 8 columns (%s), binary COPY through pgx CopyFrom, %d COPYs of up to %s rows "+
		"(one transaction each), one connection per system, COPYs alternating between systems; "+
		"mink: in-process single node (embedded etcd, local-directory object store), log table with 4 buckets (rows round-robin by batch); "+
		"PostgreSQL: unindexed table, default settings (fsync on); data dir %s; GOMAXPROCS %d\n\n",
		commas(int64(cfg.Rows)), factsTypes, chunks, commas(int64(cfg.ChunkRows)), dirOrDefault(cfg.Dir), runtime.GOMAXPROCS(0))
	if rep.Postgres == nil {
		fmt.Fprintf(w, "**PostgreSQL peer not measured: %s.**\n\n", rep.PostgresSkipped)
	}
	fmt.Fprintln(w, "| system | rows | COPYs | time | rows/s | MB/s (binary COPY) | peak RSS |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	rowBytes := float64(copyRowBytes())
	for _, r := range []*IngestResult{&rep.Mink, rep.Postgres} {
		if r == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.2f s | %s | %.1f | %s |\n", r.Target, commas(r.Rows), r.COPYs, r.Elapsed.Seconds(),
			commas(int64(r.RowsPerSec())), r.RowsPerSec()*rowBytes/1e6, formatBytes(r.PeakRSS))
	}
	fmt.Fprintln(w)
	if rep.Postgres != nil {
		fmt.Fprintf(w, "mink / %s: **%.2f×** rows/s (goal ≥ 1.0×)\n\n", rep.Postgres.Target, rep.Mink.RowsPerSec()/rep.Postgres.RowsPerSec())
	}
	fmt.Fprintf(w, "Peak RSS: for mink, this process's while mink's COPYs ran (the node and the pgx client); "+
		"for PostgreSQL, the backend process of the loading connection (shared buffers it touched included). "+
		"RSS of this process after the load, every row in mink: %s.\n", formatBytes(rep.MinkRSSAfter))
}

// copyRowBytes is the size of one facts row in PostgreSQL's binary COPY
// format: field count, then length and value of each field.
func copyRowBytes() int {
	return 2 + 8*4 + 8 + 4 + 8 + len("item-00000") + 8 + 1 + 8 + 4
}

// loadEnv is a mink node and, unless skipped or missing, a PostgreSQL
// server, each with the facts and stores tables created and a connection
// open.
type loadEnv struct {
	base      string
	node      *minktest.Node
	mink      *pgx.Conn
	pg        *Postgres
	pgConn    *pgx.Conn
	pgSkipped string
}

func startLoadEnv(ctx context.Context, dir, name string, skipPostgres bool) (env *loadEnv, err error) {
	base, err := os.MkdirTemp(dir, "mink-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	env = &loadEnv{base: base}
	defer func() {
		if err != nil {
			env.close(ctx)
		}
	}()
	// PostgreSQL's directory goes in here and may run as another user.
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	env.node, err = minktest.StartNode(minktest.Options{DataDir: filepath.Join(base, "mink")}, nil)
	if err != nil {
		return nil, fmt.Errorf("start mink: %w", err)
	}
	if env.mink, err = pgx.Connect(ctx, env.node.URL); err != nil {
		return nil, fmt.Errorf("connect to mink: %w", err)
	}
	if err := execAll(ctx, env.mink, factsDDL+minkFactsOptions); err != nil {
		return nil, fmt.Errorf("mink: %w", err)
	}
	switch {
	case skipPostgres:
		env.pgSkipped = "skipped by configuration"
	default:
		env.pg, err = StartPostgres(ctx, base)
		if errors.Is(err, ErrNoPostgres) {
			env.pgSkipped, err = err.Error(), nil
			break
		}
		if err != nil {
			return nil, fmt.Errorf("start PostgreSQL: %w", err)
		}
		if env.pgConn, err = pgx.Connect(ctx, env.pg.DSN); err != nil {
			return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		if err := execAll(ctx, env.pgConn, factsDDL); err != nil {
			return nil, fmt.Errorf("PostgreSQL: %w", err)
		}
	}
	return env, nil
}

func (env *loadEnv) close(ctx context.Context) {
	// The run's context may be cancelled already.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if env.pgConn != nil {
		env.pgConn.Close(ctx)
	}
	if env.pg != nil {
		env.pg.Stop()
	}
	if env.mink != nil {
		env.mink.Close(ctx)
	}
	if env.node != nil {
		env.node.Server.Close()
	}
	os.RemoveAll(env.base)
}

// copyTarget accumulates one system's COPYs.
type copyTarget struct {
	name    string
	conn    *pgx.Conn
	elapsed time.Duration
	copies  int
	rows    int64
	peakRSS int64
	// backendPID is the PostgreSQL server process serving conn; 0 for
	// mink, which runs in this process.
	backendPID uint32
}

func (t *copyTarget) result() IngestResult {
	return IngestResult{Target: t.name, Rows: t.rows, COPYs: t.copies, Elapsed: t.elapsed, PeakRSS: t.peakRSS}
}

// loadFacts loads rows facts rows into every system in COPYs of chunk
// rows, taking turns (see MeasureIngest). targets[0] is mink, targets[1]
// PostgreSQL if present.
func (env *loadEnv) loadFacts(ctx context.Context, rows, chunk int) ([]*copyTarget, error) {
	targets := []*copyTarget{{name: "mink", conn: env.mink}}
	if env.pgConn != nil {
		targets = append(targets, &copyTarget{name: env.pg.peerName(), conn: env.pgConn, backendPID: env.pgConn.PgConn().PID()})
	}
	for k, start := 0, 0; start < rows; k, start = k+1, start+chunk {
		end := min(start+chunk, rows)
		for j := range targets {
			t := targets[(j+k)%len(targets)]
			if t.backendPID == 0 {
				resetPeakRSS()
			}
			t0 := time.Now()
			n, err := t.conn.CopyFrom(ctx, pgx.Identifier{"facts"}, factsColumns, &factsSource{next: int64(start), end: int64(end)})
			t.elapsed += time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("%s: COPY rows %d…%d: %w", t.name, start, end-1, err)
			}
			if n != int64(end-start) {
				return nil, fmt.Errorf("%s: COPY of %d rows reported %d", t.name, end-start, n)
			}
			if t.backendPID == 0 {
				t.peakRSS = max(t.peakRSS, procStatus("self", "VmHWM"))
			} else {
				t.peakRSS = procStatus(strconv.Itoa(int(t.backendPID)), "VmHWM")
			}
			t.copies++
			t.rows += n
		}
	}
	return targets, nil
}

func execAll(ctx context.Context, conn *pgx.Conn, stmts ...string) error {
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// resetPeakRSS resets this process's VmHWM to its current RSS (Linux 4.0
// and later); without it, the peak is the process's peak so far.
func resetPeakRSS() {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// procStatus returns a memory line of /proc/<pid>/status in bytes, 0 if
// unknown.
func procStatus(pid, key string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func formatBytes(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
