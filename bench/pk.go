package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// PKConfig configures RunPK. Zero values mean the defaults.
type PKConfig struct {
	// Dir holds mink's and PostgreSQL's data (a fresh subdirectory, removed
	// afterwards). Default: the temp dir.
	Dir string
	// Rows loaded into the table. Default 1 M.
	Rows int
	// Duration of each pgbench run. Default 30 s.
	Duration time.Duration
	// SkipPostgres leaves the PostgreSQL column out.
	SkipPostgres bool
	// Only, if set, runs only the workloads whose name starts with it
	// ("point lookup"; minkbench pk -pk-only).
	Only string
	// CPUProfile, if set, is a file to write a CPU profile of the process
	// (mink runs in it) to while pgbench runs against mink. Default: the
	// environment variable MINK_PK_CPUPROFILE.
	CPUProfile string
}

func (c *PKConfig) fill() {
	if c.Rows == 0 {
		c.Rows = 1_000_000
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.CPUProfile == "" {
		c.CPUProfile = os.Getenv("MINK_PK_CPUPROFILE")
	}
}

// pkDDL is the table of the primary-key benchmark, the same on both.
const pkDDL = `CREATE TABLE pkbench (id integer PRIMARY KEY, v text, n bigint)`

// PKRun is one pgbench run: the workload, the clients, and the tps of mink
// and of PostgreSQL (0 when not measured).
type PKRun struct {
	Name           string
	Clients        int
	Mink, Postgres float64
}

// pkWorkloads are the pgbench scripts: point lookups by key, and upserts
// of 1 and 100 rows per statement (INSERT … ON CONFLICT DO UPDATE).
func pkWorkloads(rows int) []struct {
	name, script string
	clients      []int
} {
	return []struct {
		name, script string
		clients      []int
	}{
		{"point lookup", fmt.Sprintf("\\set aid random(1, %d)\nSELECT id, v, n FROM pkbench WHERE id = :aid;\n", rows), []int{1, 4}},
		{"upsert, 1 row", fmt.Sprintf("\\set aid random(1, %d)\nINSERT INTO pkbench VALUES (:aid, 'upserted', :aid) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n;\n", rows), []int{1, 4}},
		{"upsert, 100 rows", fmt.Sprintf("\\set base random(0, %d)\nINSERT INTO pkbench SELECT g, 'batch', g FROM generate_series(CAST(:base AS integer) * 100 + 1, CAST(:base AS integer) * 100 + 100) AS s(g) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n;\n", rows/100-1), []int{1, 4}},
	}
}

// RunPK measures the primary-key workloads on mink and PostgreSQL with
// pgbench and writes a markdown table to w.
func RunPK(ctx context.Context, w io.Writer, cfg PKConfig) error {
	cfg.fill()
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return fmt.Errorf("pk bench needs pgbench (Debian: apt-get install -y postgresql-client): %w", err)
	}
	base, err := os.MkdirTemp(cfg.Dir, "mink-bench-pk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		return err
	}
	node, err := minktest.StartNode(minktest.Options{DataDir: filepath.Join(base, "mink")}, nil)
	if err != nil {
		return fmt.Errorf("start mink: %w", err)
	}
	defer node.Server.Close()
	type system struct {
		name string
		dsn  string
		conn *pgx.Conn
	}
	systems := []*system{{name: "mink", dsn: node.DSN}}
	pgName, pgSkipped := "", ""
	if cfg.SkipPostgres {
		pgSkipped = "skipped by configuration"
	} else {
		pg, err := StartPostgres(ctx, base)
		switch {
		case errors.Is(err, ErrNoPostgres):
			pgSkipped = err.Error()
		case err != nil:
			return fmt.Errorf("start PostgreSQL: %w", err)
		default:
			defer pg.Stop()
			pgName = pg.peerName()
			systems = append(systems, &system{name: pgName, dsn: pg.DSN})
		}
	}
	loads := map[string]time.Duration{}
	for _, s := range systems {
		if s.conn, err = pgx.Connect(ctx, s.dsn); err != nil {
			return fmt.Errorf("connect to %s: %w", s.name, err)
		}
		defer s.conn.Close(context.WithoutCancel(ctx))
		if _, err := s.conn.Exec(ctx, pkDDL); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		start := time.Now()
		const chunk = 100_000
		for lo := 1; lo <= cfg.Rows; lo += chunk {
			hi := min(lo+chunk-1, cfg.Rows)
			rows := make([][]any, 0, hi-lo+1)
			for id := lo; id <= hi; id++ {
				rows = append(rows, []any{int32(id), "value-" + strconv.Itoa(id), int64(id) * 7})
			}
			if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{"pkbench"}, []string{"id", "v", "n"}, pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("%s: COPY: %w", s.name, err)
			}
		}
		if s.name != "mink" {
			if _, err := s.conn.Exec(ctx, "VACUUM ANALYZE pkbench"); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		loads[s.name] = time.Since(start)
	}
	// Both answer the same for a few keys.
	for _, id := range []int{1, cfg.Rows / 2, cfg.Rows} {
		var want string
		for i, s := range systems {
			var v string
			var n int64
			if err := s.conn.QueryRow(ctx, "SELECT v, n FROM pkbench WHERE id = $1", int32(id)).Scan(&v, &n); err != nil {
				return fmt.Errorf("%s: lookup %d: %w", s.name, id, err)
			}
			got := fmt.Sprintf("%s/%d", v, n)
			if i == 0 {
				want = got
			} else if got != want {
				return fmt.Errorf("lookup %d: %s has %s, mink %s", id, s.name, got, want)
			}
		}
	}
	var runs []PKRun
	for _, wl := range pkWorkloads(cfg.Rows) {
		if !strings.HasPrefix(wl.name, cfg.Only) {
			continue
		}
		script := filepath.Join(base, strings.ReplaceAll(wl.name, " ", "_")+".sql")
		if err := os.WriteFile(script, []byte(wl.script), 0o644); err != nil {
			return err
		}
		for _, clients := range wl.clients {
			run := PKRun{Name: wl.name, Clients: clients}
			for _, s := range systems {
				var stop func()
				if s.name == "mink" && cfg.CPUProfile != "" {
					// One profile file: the last mink run's.
					if stop, err = startCPUProfile(cfg.CPUProfile); err != nil {
						return err
					}
				}
				tps, err := runPgbench(ctx, pgbench, s.dsn, script, clients, cfg.Duration)
				if stop != nil {
					stop()
				}
				if err != nil {
					return fmt.Errorf("%s: %s, %d clients: %w", s.name, wl.name, clients, err)
				}
				if s.name == "mink" {
					run.Mink = tps
				} else {
					run.Postgres = tps
				}
			}
			runs = append(runs, run)
		}
	}
	fmt.Fprintf(w, "pk: table `%s` with %s rows loaded by COPY (mink %.1f s", pkDDL, commas(int64(cfg.Rows)), loads["mink"].Seconds())
	if pgName != "" {
		fmt.Fprintf(w, ", %s %.1f s", pgName, loads[pgName].Seconds())
	}
	fmt.Fprintf(w, "); mink: in-process single node (local-directory object store); ")
	if pgName != "" {
		fmt.Fprintf(w, "%s: default settings (fsync on), VACUUM ANALYZE after the load; ", pgName)
	} else {
		fmt.Fprintf(w, "PostgreSQL not measured: %s; ", pgSkipped)
	}
	fmt.Fprintf(w, "each row is `pgbench -n -M prepared -c C -j min(C,2) -T %d -f script`, mink first, then the peer\n\n", int(cfg.Duration.Seconds()))
	peer := pgName
	if peer == "" {
		peer = "PostgreSQL"
	}
	fmt.Fprintf(w, "| workload | clients | mink tps | %s tps | mink / %s |\n|---|---:|---:|---:|---:|\n", peer, peer)
	for _, r := range runs {
		ratio := "not measured"
		pgTPS := "not measured"
		if r.Postgres > 0 {
			pgTPS = fmt.Sprintf("%.0f", r.Postgres)
			ratio = fmt.Sprintf("%.2f×", r.Mink/r.Postgres)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s |\n", r.Name, r.Clients, r.Mink, pgTPS, ratio)
	}
	fmt.Fprintln(w)
	for _, wl := range pkWorkloads(cfg.Rows) {
		if !strings.HasPrefix(wl.name, cfg.Only) {
			continue
		}
		fmt.Fprintf(w, "- %s: `%s`\n", wl.name, strings.ReplaceAll(strings.TrimSpace(wl.script), "\n", " "))
	}
	return nil
}

var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// runPgbench runs one pgbench and returns its tps. A run with failed
// transactions is an error.
func runPgbench(ctx context.Context, pgbench, dsn, script string, clients int, d time.Duration) (float64, error) {
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-T", strconv.Itoa(int(d.Seconds())), "-f", script, dsn}
	cmd := exec.CommandContext(ctx, pgbench, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("pgbench %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	m := pgbenchTPS.FindStringSubmatch(out.String())
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps: %s", lastLines(out.String()+stderr.String(), 10))
	}
	if strings.Contains(out.String(), "number of failed transactions: ") && !strings.Contains(out.String(), "number of failed transactions: 0 ") {
		return 0, fmt.Errorf("pgbench reports failed transactions: %s", lastLines(out.String(), 10))
	}
	return strconv.ParseFloat(m[1], 64)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
