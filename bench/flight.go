package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
)

// FlightConfig configures RunFlight. Zero values mean the defaults.
type FlightConfig struct {
	// Dir holds mink's and PostgreSQL's data (a fresh subdirectory, removed
	// afterwards). Default: the temp dir. When running as root it must be
	// searchable by the postgres user.
	Dir string
	// Rows in the facts table. Default 10 M.
	Rows int
	// ChunkRows is the number of rows per COPY when loading. Default 1 M.
	ChunkRows int
	// BatchRows is the number of rows per AppendTable call. Default 256 K.
	BatchRows int
	// Writers is the number of goroutines calling AppendTable. Default 4.
	Writers int
	// Runs is how often each read is repeated; the median is reported.
	// Default 3.
	Runs int
	// SkipPostgres leaves the PostgreSQL peer out (reported as not measured).
	SkipPostgres bool
}

func (c *FlightConfig) fill() error {
	if c.Rows == 0 {
		c.Rows = 10_000_000
	}
	if c.ChunkRows == 0 {
		c.ChunkRows = 1_000_000
	}
	if c.BatchRows == 0 {
		c.BatchRows = 256 << 10
	}
	if c.Writers == 0 {
		c.Writers = 4
	}
	if c.Runs == 0 {
		c.Runs = 3
	}
	if c.Rows < 0 || c.ChunkRows <= 0 || c.BatchRows <= 0 || c.Writers <= 0 || c.Runs <= 0 {
		return fmt.Errorf("flight bench: bad configuration %+v", *c)
	}
	return nil
}

// FlightResult is one transfer: Bytes is what crossed the connection's
// payload (Arrow buffers for Flight, COPY data for COPY).
type FlightResult struct {
	Target  string
	Rows    int64
	Bytes   int64
	Elapsed time.Duration
	// Runs are the times of every run of a read, in run order (Elapsed is
	// their median).
	Runs []time.Duration
}

// RowsPerSec is the throughput in rows.
func (r FlightResult) RowsPerSec() float64 { return float64(r.Rows) / r.Elapsed.Seconds() }

// MBPerSec is the throughput in bytes (10⁶ a MB).
func (r FlightResult) MBPerSec() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6 }

// FlightReport is the outcome of MeasureFlight.
type FlightReport struct {
	Config FlightConfig
	// Reads: Flight, then COPY TO STDOUT from mink, then from PostgreSQL
	// if measured; each the median of Runs.
	Reads []FlightResult
	// Writes: AppendTable into mink, binary COPY into mink, binary COPY
	// into PostgreSQL if measured.
	Writes          []FlightResult
	PostgresSkipped string
	Started         time.Time
}

// RunFlight measures bulk reads and writes over Arrow Flight against
// binary COPY through pgx, from and into mink's own Postgres front end and
// PostgreSQL, and writes markdown tables to w.
func RunFlight(ctx context.Context, w io.Writer, cfg FlightConfig) error {
	rep, err := MeasureFlight(ctx, cfg)
	if err != nil {
		return err
	}
	WriteFlightTables(w, rep)
	return nil
}

// MeasureFlight runs the transfers of RunFlight.
//
// The facts table is loaded into mink and PostgreSQL with binary COPY (the
// COPY write numbers, as in the ingest workload), and the same rows into a
// second mink table, facts_arrow, with client.AppendTable from Writers
// goroutines (each building its Arrow batches in the timed region, as COPY
// builds its rows). Then every system's facts rows are read Runs times,
// systems taking turns: over Flight with client.Scan (a DoGet per bucket,
// all buckets in parallel), and with COPY (SELECT * FROM facts) TO STDOUT
// (FORMAT binary) through pgx.
func MeasureFlight(ctx context.Context, cfg FlightConfig) (*FlightReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	rep := &FlightReport{Config: cfg, Started: time.Now().UTC()}
	env, err := startLoadEnv(ctx, cfg.Dir, "flight", cfg.SkipPostgres)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx)
	rep.PostgresSkipped = env.pgSkipped

	targets, err := env.loadFacts(ctx, cfg.Rows, cfg.ChunkRows)
	if err != nil {
		return nil, err
	}
	c, err := client.DialOptions(ctx, client.Options{ScanParallelism: 8}, env.node.Config.FlightAddr)
	if err != nil {
		return nil, fmt.Errorf("dial mink's Flight service: %w", err)
	}
	defer c.Close()

	if err := execAll(ctx, env.mink, strings.Replace(factsDDL, "facts", "facts_arrow", 1)+minkFactsOptions); err != nil {
		return nil, fmt.Errorf("mink: %w", err)
	}
	appended, err := appendFacts(ctx, c, cfg)
	if err != nil {
		return nil, err
	}
	rep.Writes = append(rep.Writes, appended)
	for _, t := range targets {
		r := t.result()
		rep.Writes = append(rep.Writes, FlightResult{Target: "binary COPY into " + r.Target, Rows: r.Rows,
			Bytes: r.Rows * int64(copyRowBytes()), Elapsed: r.Elapsed})
	}
	var n int64
	if err := env.mink.QueryRow(ctx, "SELECT count(*) FROM facts_arrow").Scan(&n); err != nil || n != int64(cfg.Rows) {
		return nil, fmt.Errorf("mink: facts_arrow has %d rows after appending %d (%v)", n, cfg.Rows, err)
	}

	readers := []flightReader{
		{"mink Flight DoGet (all buckets in parallel)", func() (FlightResult, error) { return scanFacts(ctx, c) }},
		{"mink COPY TO STDOUT (binary)", func() (FlightResult, error) { return copyOutFacts(ctx, env.mink) }},
	}
	if env.pgConn != nil {
		readers = append(readers, flightReader{env.pg.peerName() + " COPY TO STDOUT (binary)", func() (FlightResult, error) { return copyOutFacts(ctx, env.pgConn) }})
	}
	runs, err := takeTurns(readers, cfg.Runs, int64(cfg.Rows))
	if err != nil {
		return nil, err
	}
	rep.Reads = medians(runs)
	return rep, nil
}

// appendFacts appends the facts rows to facts_arrow with AppendTable from
// cfg.Writers goroutines, BatchRows rows a call.
func appendFacts(ctx context.Context, c *client.Client, cfg FlightConfig) (FlightResult, error) {
	ranges := make(chan [2]int64)
	errs := make(chan error, cfg.Writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.Writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range ranges {
				rec := factsBatch(r[0], r[1])
				err := c.AppendTable(ctx, "facts_arrow", rec)
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var sendErr error
send:
	for from := int64(0); from < int64(cfg.Rows); from += int64(cfg.BatchRows) {
		select {
		case ranges <- [2]int64{from, min(from+int64(cfg.BatchRows), int64(cfg.Rows))}:
		case sendErr = <-errs:
			break send
		}
	}
	close(ranges)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if sendErr == nil {
		sendErr = <-errs
	}
	if sendErr != nil {
		return FlightResult{}, fmt.Errorf("AppendTable: %w", sendErr)
	}
	return FlightResult{Target: fmt.Sprintf("client.AppendTable into mink (%d writers)", cfg.Writers), Rows: int64(cfg.Rows),
		Bytes: int64(cfg.Rows) * int64(copyRowBytes()), Elapsed: elapsed}, nil
}

// scanFacts reads every facts row over Flight.
func scanFacts(ctx context.Context, c *client.Client) (FlightResult, error) {
	start := time.Now()
	rdr, err := c.Scan(ctx, "facts", client.ScanOptions{})
	if err != nil {
		return FlightResult{}, err
	}
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

// recordBytes is the size of a batch's Arrow buffers, about what its IPC
// body takes on the wire.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		for _, b := range col.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// copyOutFacts reads every facts row with binary COPY TO STDOUT.
func copyOutFacts(ctx context.Context, conn *pgx.Conn) (FlightResult, error) {
	var cw countingWriter
	start := time.Now()
	tag, err := conn.PgConn().CopyTo(ctx, &cw, "COPY (SELECT * FROM facts) TO STDOUT (FORMAT binary)")
	if err != nil {
		return FlightResult{}, err
	}
	return FlightResult{Rows: tag.RowsAffected(), Bytes: cw.n, Elapsed: time.Since(start)}, nil
}

// WriteFlightTables writes rep as markdown tables with a header line saying
// what was measured.
func WriteFlightTables(w io.Writer, rep *FlightReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "flight: %s rows of 8 columns (%s) in a mink log table with 4 buckets (in-process single node, "+
		"embedded etcd, local-directory object store) and in PostgreSQL (unindexed, default settings); "+
		"reads: median of %d, systems taking turns; data dir %s; GOMAXPROCS %d; started %s\n\n",
		commas(int64(cfg.Rows)), factsTypes, cfg.Runs, dirOrDefault(cfg.Dir), runtime.GOMAXPROCS(0), rep.Started.Format(time.RFC3339))
	if rep.PostgresSkipped != "" {
		fmt.Fprintf(w, "**PostgreSQL peer not measured: %s.**\n\n", rep.PostgresSkipped)
	}
	var pgRead *FlightResult
	for i := range rep.Reads {
		if strings.HasPrefix(rep.Reads[i].Target, "PostgreSQL") {
			pgRead = &rep.Reads[i]
		}
	}
	fmt.Fprintln(w, "Bulk read (MB/s: Arrow buffers received for Flight, COPY data bytes for COPY)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| read | rows | time (median) | runs | rows/s | MB/s | rows/s vs PostgreSQL COPY |")
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
	fmt.Fprintf(w, "Bulk write (AppendTable: %d writers, %s rows a call, Arrow batches built in the timed region; "+
		"COPY: %s rows a COPY, one connection; MB/s at the binary COPY size of a row, %d bytes)\n\n",
		cfg.Writers, commas(int64(cfg.BatchRows)), commas(int64(cfg.ChunkRows)), copyRowBytes())
	fmt.Fprintln(w, "| write | rows | time | rows/s | MB/s |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, r := range rep.Writes {
		fmt.Fprintf(w, "| %s | %s | %.2f s | %s | %.1f |\n", r.Target, commas(r.Rows), r.Elapsed.Seconds(),
			commas(int64(r.RowsPerSec())), r.MBPerSec())
	}
	fmt.Fprintln(w)
}
