package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// The pgbench workload (issue 15): small writes at PostgreSQL's rate.
// Debian's pgbench runs a one-statement script with prepared statements
// against a single node of mink and against PostgreSQL, in turns, at 1, 8
// and 64 clients: a single-row INSERT into a 4-bucket log table, and a
// single-row upsert into a primary-key table. Every transaction's latency
// comes from pgbench's per-transaction log, so the p99 is a real one.

// PgbenchConfig configures RunPgbench. Zero values mean the defaults.
type PgbenchConfig struct {
	// Dir holds mink's and PostgreSQL's data (a fresh subdirectory,
	// removed afterwards). Default: the temp dir.
	Dir string
	// Rows loaded into the primary-key table. Default 100 k.
	Rows int
	// Duration of each pgbench run. Default 15 s.
	Duration time.Duration
	// Clients are the client counts. Default 1, 8, 64.
	Clients []int
	// Runs of every workload and client count on each system, the systems
	// taking turns; the median tps is reported. Default 2.
	Runs int
	// SkipPostgres leaves the PostgreSQL peer out.
	SkipPostgres bool
	// CPUProfile, if set, is a file to write a CPU profile of this process
	// (the mink node runs in it) to during mink's 8-client INSERT runs
	// (the last one's); the upsert's goes to CPUProfile + ".upsert".
	CPUProfile string
}

func (c *PgbenchConfig) fill() {
	if c.Rows == 0 {
		c.Rows = 100_000
	}
	if c.Duration == 0 {
		c.Duration = 15 * time.Second
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{1, 8, 64}
	}
	if c.Runs == 0 {
		c.Runs = 2
	}
}

// The tables: a log table of 4 buckets in mink (a heap with no index in
// PostgreSQL), and the primary-key table of the pk workload.
const (
	pgbenchLogDDL  = "CREATE TABLE inslog (id bigint, v text, n bigint)"
	pgbenchMinkLog = " WITH (buckets = 4)"
	pgbenchPKDDL   = "CREATE TABLE upsert (id integer PRIMARY KEY, v text, n bigint)"
)

// pgbenchWorkloads are the scripts; table is the table the statement
// writes, log whether every transaction adds one row to it.
func pgbenchWorkloads(rows int) []struct {
	name, table, script string
	log                 bool
} {
	return []struct {
		name, table, script string
		log                 bool
	}{
		{"INSERT, 1 row", "inslog", "\\set id random(1, 1000000000)\nINSERT INTO inslog VALUES (:id, 'value', :id);\n", true},
		{"upsert, 1 row", "upsert", fmt.Sprintf("\\set id random(1, %d)\nINSERT INTO upsert VALUES (:id, 'upserted', :id) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n;\n", rows), false},
	}
}

// PgbenchRun is one pgbench run.
type PgbenchRun struct {
	Target       string
	TPS          float64
	Transactions int64
	Mean, P99    time.Duration
}

// PgbenchResult is one workload at one client count: each system's runs
// (mink first, then the peer when measured).
type PgbenchResult struct {
	Workload string
	Clients  int
	Systems  [][]PgbenchRun
}

// PgbenchReport is the outcome of MeasurePgbench.
type PgbenchReport struct {
	Config          PgbenchConfig
	Peer            string
	PostgresSkipped string
	Results         []PgbenchResult
}

// RunPgbench measures the workloads and writes a markdown table.
func RunPgbench(ctx context.Context, w io.Writer, cfg PgbenchConfig) error {
	rep, err := MeasurePgbench(ctx, cfg)
	if err != nil {
		return err
	}
	WritePgbenchTable(w, rep)
	return nil
}

// MeasurePgbench starts mink and PostgreSQL, creates and loads the tables
// on both, and runs every workload at every client count Runs times on
// each, the systems taking turns. A run with a failed transaction is an
// error, and after each INSERT run the log table must hold exactly one
// more row for every transaction pgbench counted.
func MeasurePgbench(ctx context.Context, cfg PgbenchConfig) (*PgbenchReport, error) {
	cfg.fill()
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return nil, fmt.Errorf("pgbench workload needs pgbench (Debian: apt-get install -y postgresql-client): %w", err)
	}
	base, err := os.MkdirTemp(cfg.Dir, "mink-bench-pgbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	node, err := minktest.StartNode(minktest.Options{DataDir: filepath.Join(base, "mink")}, nil)
	if err != nil {
		return nil, fmt.Errorf("start mink: %w", err)
	}
	defer node.Server.Close()
	type system struct {
		name, dsn string
		conn      *pgx.Conn
	}
	systems := []*system{{name: "mink", dsn: node.DSN}}
	rep := &PgbenchReport{Config: cfg}
	if cfg.SkipPostgres {
		rep.PostgresSkipped = "skipped by configuration"
	} else {
		pg, err := StartPostgres(ctx, base)
		switch {
		case errors.Is(err, ErrNoPostgres):
			rep.PostgresSkipped = err.Error()
		case err != nil:
			return nil, fmt.Errorf("start PostgreSQL: %w", err)
		default:
			defer pg.Stop()
			rep.Peer = pg.peerName()
			systems = append(systems, &system{name: rep.Peer, dsn: pg.DSN})
		}
	}
	for _, s := range systems {
		if s.conn, err = pgx.Connect(ctx, s.dsn); err != nil {
			return nil, fmt.Errorf("connect to %s: %w", s.name, err)
		}
		defer s.conn.Close(context.WithoutCancel(ctx))
		logDDL := pgbenchLogDDL
		if s.name == "mink" {
			logDDL += pgbenchMinkLog
		}
		if err := execAll(ctx, s.conn, logDDL, pgbenchPKDDL); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		const chunk = 100_000
		for lo := 1; lo <= cfg.Rows; lo += chunk {
			hi := min(lo+chunk-1, cfg.Rows)
			rows := make([][]any, 0, hi-lo+1)
			for id := lo; id <= hi; id++ {
				rows = append(rows, []any{int32(id), "value-" + strconv.Itoa(id), int64(id) * 7})
			}
			if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{"upsert"}, []string{"id", "v", "n"}, pgx.CopyFromRows(rows)); err != nil {
				return nil, fmt.Errorf("%s: COPY: %w", s.name, err)
			}
		}
		if s.name != "mink" {
			if err := execAll(ctx, s.conn, "VACUUM ANALYZE upsert"); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	for _, wl := range pgbenchWorkloads(cfg.Rows) {
		script := filepath.Join(base, strings.NewReplacer(" ", "_", ",", "").Replace(wl.name)+".sql")
		if err := os.WriteFile(script, []byte(wl.script), 0o644); err != nil {
			return nil, err
		}
		for _, clients := range cfg.Clients {
			res := PgbenchResult{Workload: wl.name, Clients: clients, Systems: make([][]PgbenchRun, len(systems))}
			for run := range cfg.Runs {
				for j := range systems {
					k := (j + run) % len(systems)
					s := systems[k]
					var before int64
					if wl.log {
						if err := s.conn.QueryRow(ctx, "SELECT count(*) FROM "+wl.table).Scan(&before); err != nil {
							return nil, fmt.Errorf("%s: %w", s.name, err)
						}
					}
					var stop func()
					if s.name == "mink" && clients == 8 && cfg.CPUProfile != "" {
						path := cfg.CPUProfile
						if !wl.log {
							path += ".upsert"
						}
						if stop, err = startCPUProfile(path); err != nil {
							return nil, err
						}
					}
					r, err := pgbenchOnce(ctx, pgbench, base, s.dsn, script, clients, cfg.Duration)
					if stop != nil {
						stop()
					}
					if err != nil {
						return nil, fmt.Errorf("%s: %s, %d clients: %w", s.name, wl.name, clients, err)
					}
					if wl.log {
						var after int64
						if err := s.conn.QueryRow(ctx, "SELECT count(*) FROM "+wl.table).Scan(&after); err != nil {
							return nil, fmt.Errorf("%s: %w", s.name, err)
						}
						if after-before != r.Transactions {
							return nil, fmt.Errorf("%s: %s, %d clients: pgbench counted %d transactions, the table gained %d rows",
								s.name, wl.name, clients, r.Transactions, after-before)
						}
					}
					r.Target = s.name
					res.Systems[k] = append(res.Systems[k], r)
				}
			}
			rep.Results = append(rep.Results, res)
		}
	}
	return rep, nil
}

var pgbenchProcessed = regexp.MustCompile(`number of transactions actually processed: (\d+)`)

// pgbenchOnce runs pgbench once with a per-transaction log under dir and
// returns its tps (pgbench's, without connection time), the number of
// transactions, and the mean and p99 latency from the log.
func pgbenchOnce(ctx context.Context, pgbench, dir, dsn, script string, clients int, d time.Duration) (PgbenchRun, error) {
	logDir, err := os.MkdirTemp(dir, "pgbench-log-")
	if err != nil {
		return PgbenchRun{}, err
	}
	defer os.RemoveAll(logDir)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-T", strconv.Itoa(max(1, int(d.Seconds()))), "-f", script, "--log", "--log-prefix", filepath.Join(logDir, "tx"), dsn}
	cmd := exec.CommandContext(ctx, pgbench, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return PgbenchRun{}, fmt.Errorf("pgbench %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	var r PgbenchRun
	m := pgbenchTPS.FindStringSubmatch(out.String())
	p := pgbenchProcessed.FindStringSubmatch(out.String())
	if m == nil || p == nil {
		return r, fmt.Errorf("pgbench printed no tps: %s", lastLines(out.String()+stderr.String(), 10))
	}
	if strings.Contains(out.String(), "number of failed transactions: ") && !strings.Contains(out.String(), "number of failed transactions: 0 ") {
		return r, fmt.Errorf("pgbench reports failed transactions: %s", lastLines(out.String(), 10))
	}
	r.TPS, _ = strconv.ParseFloat(m[1], 64)
	r.Transactions, _ = strconv.ParseInt(p[1], 10, 64)
	lat, err := pgbenchLatencies(logDir)
	if err != nil {
		return r, err
	}
	if int64(len(lat)) != r.Transactions {
		return r, fmt.Errorf("pgbench logged %d transactions, reported %d", len(lat), r.Transactions)
	}
	if len(lat) > 0 {
		var sum time.Duration
		for _, l := range lat {
			sum += l
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r.Mean = sum / time.Duration(len(lat))
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r, nil
}

// pgbenchLatencies reads the per-transaction logs in dir: lines of
// "client_id transaction_no time_us script_no time_epoch time_us", the
// third field the transaction's latency in microseconds.
func pgbenchLatencies(dir string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "tx.*"))
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %q: %w", name, sc.Text(), err)
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return lat, nil
}

// medianRun is the run with the median tps.
func medianRun(runs []PgbenchRun) PgbenchRun {
	rs := append([]PgbenchRun(nil), runs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].TPS < rs[j].TPS })
	return rs[len(rs)/2]
}

// WritePgbenchTable writes rep as a markdown table.
func WritePgbenchTable(w io.Writer, rep *PgbenchReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "pgbench: each cell `pgbench -n -M prepared -c C -j min(C,2) -T %d --log -f script`, %d runs per system, "+
		"systems in turns, the run of median tps reported (its mean and p99 latency from the per-transaction log); "+
		"mink: in-process single node (embedded etcd, local-directory object store), `%s%s` and `%s` with %s rows loaded by COPY; "+
		"PostgreSQL: the same tables (the log table a heap without index), default settings (fsync on); data dir %s; GOMAXPROCS %d\n\n",
		max(1, int(cfg.Duration.Seconds())), cfg.Runs, pgbenchLogDDL, pgbenchMinkLog, pgbenchPKDDL, commas(int64(cfg.Rows)),
		dirOrDefault(cfg.Dir), runtime.GOMAXPROCS(0))
	if rep.PostgresSkipped != "" {
		fmt.Fprintf(w, "**PostgreSQL peer not measured: %s.**\n\n", rep.PostgresSkipped)
	}
	peer := rep.Peer
	if peer == "" {
		peer = "PostgreSQL"
	}
	fmt.Fprintf(w, "| workload | clients | mink tps | mink mean / p99 | %[1]s tps | %[1]s mean / p99 | mink / %[1]s |\n", peer)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	for _, res := range rep.Results {
		m := medianRun(res.Systems[0])
		pgTPS, pgLat, ratio := "—", "—", "—"
		if len(res.Systems) > 1 {
			p := medianRun(res.Systems[1])
			pgTPS, pgLat = fmt.Sprintf("%.0f", p.TPS), ms(p.Mean)+" / "+ms(p.P99)+" ms"
			ratio = fmt.Sprintf("**%.2f×**", m.TPS/p.TPS)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %s / %s ms | %s | %s | %s |\n", res.Workload, res.Clients, m.TPS, ms(m.Mean), ms(m.P99), pgTPS, pgLat, ratio)
	}
	fmt.Fprintln(w)
	for _, wl := range pgbenchWorkloads(cfg.Rows) {
		fmt.Fprintf(w, "- %s: `%s`\n", wl.name, strings.ReplaceAll(strings.TrimSpace(wl.script), "\n", " "))
	}
}
