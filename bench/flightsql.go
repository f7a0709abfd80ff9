package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/sqlfront/engine"
)

// FlightSQLConfig configures RunFlightSQL. Zero values mean the defaults.
type FlightSQLConfig struct {
	// Dir holds mink's data (a fresh subdirectory, removed afterwards).
	// Default: the temp dir.
	Dir string
	// Rows in the facts table. Default 10 M.
	Rows int
	// ChunkRows is the number of rows per COPY when loading. Default 1 M.
	ChunkRows int
	// Runs is how often each read is repeated; the median is reported.
	// Default 3.
	Runs int
}

func (c *FlightSQLConfig) fill() error {
	if c.Rows == 0 {
		c.Rows = 10_000_000
	}
	if c.ChunkRows == 0 {
		c.ChunkRows = 1_000_000
	}
	if c.Runs == 0 {
		c.Runs = 3
	}
	if c.Rows < 0 || c.ChunkRows <= 0 || c.Runs <= 0 {
		return fmt.Errorf("flightsql bench: bad configuration %+v", *c)
	}
	return nil
}

// FlightSQLReport is the outcome of MeasureFlightSQL: the reads of the
// same SELECT, each the median of Runs, Flight SQL first.
type FlightSQLReport struct {
	Config  FlightSQLConfig
	Reads   []FlightResult
	Started time.Time
}

// flightSQLQuery is the statement every reader runs.
const flightSQLQuery = "SELECT * FROM facts"

// RunFlightSQL measures one SELECT of every facts row over Flight SQL,
// over the Postgres wire with pgx, and as DuckDB's own Arrow export of the
// same rows in a DuckDB table, and writes a markdown table to w.
func RunFlightSQL(ctx context.Context, w io.Writer, cfg FlightSQLConfig) error {
	rep, err := MeasureFlightSQL(ctx, cfg)
	if err != nil {
		return err
	}
	WriteFlightSQLTable(w, rep)
	return nil
}

// MeasureFlightSQL loads the facts rows into an in-process mink node with
// binary COPY, then reads SELECT * FROM facts Runs times per reader,
// readers taking turns:
//
//   - Flight SQL: arrow-go's flightsql.Client, Execute then DoGet of its
//     one endpoint (the batches the engine makes, as Arrow IPC over gRPC);
//   - pgx: Query over mink's Postgres front end (extended protocol, binary
//     results), rows read with RawValues, so the client decodes nothing:
//     the Postgres peer's time is a lower bound;
//   - DuckDB: the engine package alone (the DuckDB mink embeds, same
//     threads), QueryArrow of the same rows copied into a DuckDB table,
//     no network: the ceiling of an Arrow export.
func MeasureFlightSQL(ctx context.Context, cfg FlightSQLConfig) (*FlightSQLReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	rep := &FlightSQLReport{Config: cfg, Started: time.Now().UTC()}
	env, err := startLoadEnv(ctx, cfg.Dir, "flightsql", true)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx)
	if _, err := env.loadFacts(ctx, cfg.Rows, cfg.ChunkRows); err != nil {
		return nil, err
	}
	fc, err := flightsql.NewClient(env.node.Config.FlightAddr, nil, nil, flightwire.DialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("dial mink's Flight SQL: %w", err)
	}
	defer fc.Close()

	db, err := engine.Open(engine.Options{})
	if err != nil {
		return nil, fmt.Errorf("open DuckDB: %w", err)
	}
	defer db.Close()
	duck, err := db.Conn(ctx, engine.ConnOptions{})
	if err != nil {
		return nil, err
	}
	defer duck.Close()
	if err := copyIntoDuckDB(ctx, fc, duck); err != nil {
		return nil, err
	}

	readers := []flightReader{
		{"mink Flight SQL (Execute + DoGet)", func() (FlightResult, error) { return flightSQLRead(ctx, fc) }},
		{"mink Postgres wire (pgx Query, RawValues)", func() (FlightResult, error) { return pgxRead(ctx, env.mink) }},
		{"DuckDB Arrow export (QueryArrow of a DuckDB table, in process)", func() (FlightResult, error) {
			start := time.Now()
			rdr, err := duck.QueryArrow(ctx, flightSQLQuery)
			if err != nil {
				return FlightResult{}, err
			}
			return drainArrow(rdr, start)
		}},
	}
	runs, err := takeTurns(readers, cfg.Runs, int64(cfg.Rows))
	if err != nil {
		return nil, err
	}
	rep.Reads = medians(runs)
	return rep, nil
}

// copyIntoDuckDB reads the facts rows over Flight SQL and stores them in a
// DuckDB table facts of the engine connection.
func copyIntoDuckDB(ctx context.Context, fc *flightsql.Client, duck *engine.Conn) error {
	info, err := fc.Execute(ctx, flightSQLQuery)
	if err != nil {
		return err
	}
	var schema *arrow.Schema
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for _, ep := range info.Endpoint {
		r, err := fc.DoGet(ctx, ep.Ticket)
		if err != nil {
			return err
		}
		schema = r.Schema()
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			batches = append(batches, rec)
		}
		err = r.Err()
		r.Release()
		if err != nil {
			return err
		}
	}
	release, err := duck.RegisterRecords(ctx, "facts_src", schema, batches)
	if err != nil {
		return err
	}
	batches = nil // the registration owns them
	defer release()
	if err := duck.Exec(ctx, "CREATE TABLE facts AS SELECT * FROM facts_src"); err != nil {
		return fmt.Errorf("DuckDB: create facts: %w", err)
	}
	return nil
}

func flightSQLRead(ctx context.Context, fc *flightsql.Client) (FlightResult, error) {
	start := time.Now()
	info, err := fc.Execute(ctx, flightSQLQuery)
	if err != nil {
		return FlightResult{}, err
	}
	var r FlightResult
	for _, ep := range info.Endpoint {
		rdr, err := fc.DoGet(ctx, ep.Ticket)
		if err != nil {
			return FlightResult{}, err
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			r.Rows += rec.NumRows()
			r.Bytes += recordBytes(rec)
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return FlightResult{}, err
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

func pgxRead(ctx context.Context, conn *pgx.Conn) (FlightResult, error) {
	start := time.Now()
	rows, err := conn.Query(ctx, flightSQLQuery)
	if err != nil {
		return FlightResult{}, err
	}
	defer rows.Close()
	var r FlightResult
	for rows.Next() {
		r.Rows++
		for _, v := range rows.RawValues() {
			r.Bytes += int64(len(v))
		}
	}
	if err := rows.Err(); err != nil {
		return FlightResult{}, err
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

func drainArrow(rdr array.RecordReader, start time.Time) (FlightResult, error) {
	defer rdr.Release()
	var r FlightResult
	for rdr.Next() {
		rec := rdr.RecordBatch()
		r.Rows += rec.NumRows()
		r.Bytes += recordBytes(rec)
	}
	if err := rdr.Err(); err != nil {
		return FlightResult{}, err
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// WriteFlightSQLTable writes rep as a markdown table with a header line
// saying what was measured.
func WriteFlightSQLTable(w io.Writer, rep *FlightSQLReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "flightsql: %q of %s rows of 8 columns (%s) in a mink log table with 4 buckets (in-process single node, "+
		"embedded etcd, local-directory object store); median of %d, readers taking turns; data dir %s; GOMAXPROCS %d; started %s\n\n",
		flightSQLQuery, commas(int64(cfg.Rows)), factsTypes, cfg.Runs, dirOrDefault(cfg.Dir), runtime.GOMAXPROCS(0), rep.Started.Format(time.RFC3339))
	var pgRead *FlightResult
	for i := range rep.Reads {
		if strings.Contains(rep.Reads[i].Target, "Postgres wire") {
			pgRead = &rep.Reads[i]
		}
	}
	fmt.Fprintln(w, "| read | rows | time (median) | runs | rows/s | MB/s | rows/s vs the Postgres wire |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rep.Reads {
		ratio := "-"
		if pgRead != nil {
			ratio = fmt.Sprintf("%.2f×", r.RowsPerSec()/pgRead.RowsPerSec())
		}
		runs := make([]string, len(r.Runs))
		for i, d := range r.Runs {
			runs[i] = fmt.Sprintf("%.2f", d.Seconds())
		}
		fmt.Fprintf(w, "| %s | %s | %.2f s | %s s | %s | %.1f | %s |\n", r.Target, commas(r.Rows), r.Elapsed.Seconds(),
			strings.Join(runs, ", "), commas(int64(r.RowsPerSec())), r.MBPerSec(), ratio)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "MB/s: Arrow buffers received for Flight SQL and DuckDB, the rows' binary values for pgx.")
}
