package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The insert-select workload (issue 17): statements that write the result
// of a query into a table, as dbt's table and incremental models do:
// CREATE TABLE … AS SELECT, INSERT … SELECT from a table, and INSERT …
// SELECT from a view, over the facts table, in mink and in PostgreSQL in
// turns.

// insertSelectView is a view over facts that keeps about half its rows.
const insertSelectView = "CREATE VIEW big_facts AS SELECT * FROM facts WHERE amount >= 5000"

// insertSelectStatements are the measured statements: each writes into
// table %[1]s, which the statement's setup creates (or the statement
// itself), and which is dropped after.
var insertSelectStatements = []struct {
	name, setup, stmt string
	// half: the statement writes the view's rows, not all of facts'.
	half bool
}{
	{name: "CREATE TABLE … AS SELECT * FROM facts", stmt: "CREATE TABLE %[1]s AS SELECT * FROM facts"},
	{name: "INSERT INTO … SELECT * FROM facts", setup: strings.Replace(factsDDL, "facts", "%[1]s", 1), stmt: "INSERT INTO %[1]s SELECT * FROM facts"},
	{name: "INSERT INTO … SELECT * FROM big_facts (a view)", setup: strings.Replace(factsDDL, "facts", "%[1]s", 1),
		stmt: "INSERT INTO %[1]s SELECT * FROM big_facts", half: true},
}

// InsertSelectConfig configures RunInsertSelect. Zero values mean the
// defaults.
type InsertSelectConfig struct {
	// Dir holds mink's and PostgreSQL's data (a fresh subdirectory).
	// Default: the temp dir.
	Dir string
	// Rows is the size of the facts table. Default 2 M.
	Rows int
	// Runs is how many times each statement runs on each system; the
	// median is reported. Default 3.
	Runs int
	// SkipPostgres leaves the PostgreSQL peer out.
	SkipPostgres bool
}

// InsertSelectResult is one statement's runs on one system.
type InsertSelectResult struct {
	Statement string
	Target    string
	Rows      int64 // rows the statement wrote (each run)
	Runs      []time.Duration
}

// RowsPerSec is the throughput of the median run.
func (r InsertSelectResult) RowsPerSec() float64 { return float64(r.Rows) / median(r.Runs).Seconds() }

// InsertSelectReport is the outcome of MeasureInsertSelect: per statement,
// mink's result and PostgreSQL's (nil when not measured).
type InsertSelectReport struct {
	Config          InsertSelectConfig
	Mink            []InsertSelectResult
	Postgres        []*InsertSelectResult
	PostgresSkipped string
}

// RunInsertSelect measures the statements and writes a markdown table.
func RunInsertSelect(ctx context.Context, w io.Writer, cfg InsertSelectConfig) error {
	rep, err := MeasureInsertSelect(ctx, cfg)
	if err != nil {
		return err
	}
	WriteInsertSelectTable(w, rep)
	return nil
}

// MeasureInsertSelect loads Rows facts rows into mink and PostgreSQL, then
// runs each statement Runs times on each, the systems taking turns (the
// first of each pair alternating). Every run's row count must be the same
// on both systems, and the target table holds it after the statement.
func MeasureInsertSelect(ctx context.Context, cfg InsertSelectConfig) (*InsertSelectReport, error) {
	if cfg.Rows == 0 {
		cfg.Rows = 2_000_000
	}
	if cfg.Runs == 0 {
		cfg.Runs = 3
	}
	env, err := startLoadEnv(ctx, cfg.Dir, "insertselect", cfg.SkipPostgres)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx)
	rep := &InsertSelectReport{Config: cfg, PostgresSkipped: env.pgSkipped}
	if _, err := env.loadFacts(ctx, cfg.Rows, min(cfg.Rows, 1_000_000)); err != nil {
		return nil, err
	}
	type system struct {
		name string
		conn *pgx.Conn
	}
	systems := []system{{"mink", env.mink}}
	if env.pgConn != nil {
		systems = append(systems, system{env.pg.peerName(), env.pgConn})
	}
	for _, s := range systems {
		if err := execAll(ctx, s.conn, insertSelectView); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	var half int64
	if err := env.mink.QueryRow(ctx, "SELECT count(*) FROM big_facts").Scan(&half); err != nil {
		return nil, fmt.Errorf("mink: count the view: %w", err)
	}
	for si, st := range insertSelectStatements {
		want := int64(cfg.Rows)
		if st.half {
			want = half
		}
		results := make([]InsertSelectResult, len(systems))
		for i, s := range systems {
			results[i] = InsertSelectResult{Statement: st.name, Target: s.name, Rows: want}
		}
		for run := range cfg.Runs {
			for j := range systems {
				i := (j + run) % len(systems)
				s := systems[i]
				table := fmt.Sprintf("is_%d_%d", si, run)
				if st.setup != "" {
					if err := execAll(ctx, s.conn, fmt.Sprintf(st.setup, table)); err != nil {
						return nil, fmt.Errorf("%s: %w", s.name, err)
					}
				}
				t0 := time.Now()
				tag, err := s.conn.Exec(ctx, fmt.Sprintf(st.stmt, table))
				elapsed := time.Since(t0)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", s.name, st.name, err)
				}
				if tag.RowsAffected() != want {
					return nil, fmt.Errorf("%s: %s wrote %d rows (%s), want %d", s.name, st.name, tag.RowsAffected(), tag, want)
				}
				var n int64
				if err := s.conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != want {
					return nil, fmt.Errorf("%s: %s: the table holds %d rows (%v), want %d", s.name, st.name, n, err, want)
				}
				if err := execAll(ctx, s.conn, "DROP TABLE "+table); err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
				results[i].Runs = append(results[i].Runs, elapsed)
			}
		}
		rep.Mink = append(rep.Mink, results[0])
		if len(results) > 1 {
			rep.Postgres = append(rep.Postgres, &results[1])
		} else {
			rep.Postgres = append(rep.Postgres, nil)
		}
	}
	return rep, nil
}

// WriteInsertSelectTable writes rep as a markdown table.
func WriteInsertSelectTable(w io.Writer, rep *InsertSelectReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "insert-select: facts table of %s rows (%s), loaded by binary COPY; each statement %d times per system, "+
		"systems in turns, median reported; the written table dropped after each run; "+
		"mink: in-process single node (embedded etcd, local-directory object store), log tables of 4 buckets; "+
		"PostgreSQL: unindexed tables, default settings (fsync on); view big_facts: amount >= 5000 (about half the rows); "+
		"data dir %s; GOMAXPROCS %d\n\n",
		commas(int64(cfg.Rows)), factsTypes, cfg.Runs, dirOrDefault(cfg.Dir), runtime.GOMAXPROCS(0))
	if rep.PostgresSkipped != "" {
		fmt.Fprintf(w, "**PostgreSQL peer not measured: %s.**\n\n", rep.PostgresSkipped)
	}
	fmt.Fprintln(w, "| statement | rows | mink | mink rows/s | PostgreSQL | PostgreSQL rows/s | mink / PostgreSQL |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for i, m := range rep.Mink {
		pgTime, pgRate, ratio := "—", "—", "—"
		if p := rep.Postgres[i]; p != nil {
			pgTime, pgRate = fmt.Sprintf("%.2f s", median(p.Runs).Seconds()), commas(int64(p.RowsPerSec()))
			ratio = fmt.Sprintf("**%.2f×**", m.RowsPerSec()/p.RowsPerSec())
		}
		fmt.Fprintf(w, "| %s | %s | %.2f s | %s | %s | %s | %s |\n", m.Statement, commas(m.Rows),
			median(m.Runs).Seconds(), commas(int64(m.RowsPerSec())), pgTime, pgRate, ratio)
	}
	fmt.Fprintln(w)
}
