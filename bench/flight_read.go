package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// FlightReadConfig configures RunFlightRead. Zero values mean the defaults.
type FlightReadConfig struct {
	// Dir holds mink's and PostgreSQL's data (see FlightConfig.Dir).
	Dir string
	// Rows in the facts table. Default 2 M.
	Rows int
	// ChunkRows is the number of rows per COPY when loading. Default 1 M.
	ChunkRows int
	// Runs is how often each read is repeated; the median is reported.
	// Default 5.
	Runs int
	// SkipPostgres leaves the PostgreSQL peer out (reported as not measured).
	SkipPostgres bool
	// CPUProfile, when set, is a file to which a CPU profile of this
	// process (mink's server and the Flight reader) is written while the
	// one-reader Flight read runs 4×Runs more times, after the measured
	// runs.
	CPUProfile string
}

func (c *FlightReadConfig) fill() error {
	if c.Rows == 0 {
		c.Rows = 2_000_000
	}
	if c.ChunkRows == 0 {
		c.ChunkRows = 1_000_000
	}
	if c.Runs == 0 {
		c.Runs = 5
	}
	if c.Rows < 0 || c.ChunkRows <= 0 || c.Runs <= 0 {
		return fmt.Errorf("flightread bench: bad configuration %+v", *c)
	}
	return nil
}

// FlightReadReport is the outcome of MeasureFlightRead: the reads, each the
// median of Runs, in the order of the readers.
type FlightReadReport struct {
	Config          FlightReadConfig
	Reads           []FlightResult
	PostgresSkipped string
	Started         time.Time
}

// RunFlightRead measures bulk reads of the facts table by an independent
// arrow-go Flight client (no mink client code: GetFlightInfo, then DoGet of
// the endpoints) against PostgreSQL's binary COPY TO STDOUT, and writes a
// markdown table to w.
func RunFlightRead(ctx context.Context, w io.Writer, cfg FlightReadConfig) error {
	rep, err := MeasureFlightRead(ctx, cfg)
	if err != nil {
		return err
	}
	WriteFlightReadTable(w, rep)
	return nil
}

// MeasureFlightRead loads the facts table into mink and PostgreSQL with
// binary COPY, then reads it Runs times in each way, the readers taking
// turns (reader k starts run r when (k+r) mod readers comes up):
//   - one arrow-go Flight client reading the endpoints one after another,
//   - the same client reading all endpoints in parallel,
//   - COPY (SELECT * FROM facts) TO STDOUT (FORMAT binary) from PostgreSQL.
//
// The Flight client dials with gRPC's defaults but for the receive message
// limit (mink's DoGet messages stay below 4 MiB for rows this narrow, but
// a generic client raises it anyway).
func MeasureFlightRead(ctx context.Context, cfg FlightReadConfig) (*FlightReadReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	rep := &FlightReadReport{Config: cfg, Started: time.Now().UTC()}
	env, err := startLoadEnv(ctx, cfg.Dir, "flightread", cfg.SkipPostgres)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx)
	rep.PostgresSkipped = env.pgSkipped
	if _, err := env.loadFacts(ctx, cfg.Rows, cfg.ChunkRows); err != nil {
		return nil, err
	}
	fc, err := flight.NewClientWithMiddleware(env.node.Config.FlightAddr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial mink's Flight service: %w", err)
	}
	defer fc.Close()

	flightRead := func(parallel bool) func() (FlightResult, error) {
		return func() (FlightResult, error) { return readEndpoints(ctx, fc, parallel) }
	}
	readers := []flightReader{
		{"mink Flight DoGet, one reader, endpoint after endpoint", flightRead(false)},
		{"mink Flight DoGet, one reader per endpoint, in parallel", flightRead(true)},
	}
	if env.pgConn != nil {
		readers = append(readers, flightReader{env.pg.peerName() + " COPY TO STDOUT (binary)", func() (FlightResult, error) {
			return copyOutFacts(ctx, env.pgConn)
		}})
	}
	// A warm-up read of each kind: mink's first read decodes stream
	// objects into its cache, PostgreSQL's fills its buffer cache.
	for _, r := range readers {
		if _, err := r.read(); err != nil {
			return nil, fmt.Errorf("%s (warm-up): %w", r.name, err)
		}
	}
	runs, err := takeTurns(readers, cfg.Runs, int64(cfg.Rows))
	if err != nil {
		return nil, err
	}
	if cfg.CPUProfile != "" {
		if err := profileReads(cfg.CPUProfile, 4*cfg.Runs, readers[0].read); err != nil {
			return nil, err
		}
	}
	rep.Reads = medians(runs)
	return rep, nil
}

// profileReads writes a CPU profile of this process (mink's server and
// the Flight reader) to path while read runs n times.
func profileReads(path string, n int, read func() (FlightResult, error)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	for range n {
		if _, err := read(); err != nil {
			return fmt.Errorf("profiled read: %w", err)
		}
	}
	return nil
}

// readEndpoints reads the facts table with GetFlightInfo and a DoGet of
// every endpoint, in turn or all at once, counting rows and the bytes of
// the Arrow buffers received.
func readEndpoints(ctx context.Context, fc flight.Client, parallel bool) (FlightResult, error) {
	start := time.Now()
	info, err := fc.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"facts"}})
	if err != nil {
		return FlightResult{}, err
	}
	results := make([]FlightResult, len(info.Endpoint))
	errs := make([]error, len(info.Endpoint))
	readOne := func(i int) {
		stream, err := fc.DoGet(ctx, info.Endpoint[i].Ticket)
		if err != nil {
			errs[i] = err
			return
		}
		rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(memory.DefaultAllocator))
		if err != nil {
			errs[i] = err
			return
		}
		defer rdr.Release()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			results[i].Rows += rec.NumRows()
			results[i].Bytes += recordBytes(rec)
		}
		if err := rdr.Err(); err != nil && err != io.EOF {
			errs[i] = err
		}
	}
	if parallel {
		var wg sync.WaitGroup
		for i := range info.Endpoint {
			wg.Add(1)
			go func() {
				defer wg.Done()
				readOne(i)
			}()
		}
		wg.Wait()
	} else {
		for i := range info.Endpoint {
			readOne(i)
		}
	}
	var r FlightResult
	for i := range results {
		if errs[i] != nil {
			return FlightResult{}, fmt.Errorf("endpoint %d: %w", i, errs[i])
		}
		r.Rows += results[i].Rows
		r.Bytes += results[i].Bytes
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// WriteFlightReadTable writes rep as a markdown table with a header line
// saying what was measured.
func WriteFlightReadTable(w io.Writer, rep *FlightReadReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "flightread: %s rows of 8 columns (%s) in a mink log table with 4 buckets (in-process single node) "+
		"and in PostgreSQL; an arrow-go Flight client (gRPC defaults); median of %d after a warm-up read each, "+
		"readers taking turns; GOMAXPROCS %d; started %s\n\n",
		commas(int64(cfg.Rows)), factsTypes, cfg.Runs, runtime.GOMAXPROCS(0), rep.Started.Format(time.RFC3339))
	if rep.PostgresSkipped != "" {
		fmt.Fprintf(w, "**PostgreSQL peer not measured: %s.**\n\n", rep.PostgresSkipped)
	}
	var pgRead *FlightResult
	for i := range rep.Reads {
		if strings.HasPrefix(rep.Reads[i].Target, "PostgreSQL") {
			pgRead = &rep.Reads[i]
		}
	}
	fmt.Fprintln(w, "| read | rows | time (median) | runs | rows/s | MB/s | rows/s vs PostgreSQL COPY |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rep.Reads {
		ratio := "-"
		if pgRead != nil {
			ratio = fmt.Sprintf("%.2f×", r.RowsPerSec()/pgRead.RowsPerSec())
		}
		runs := make([]string, len(r.Runs))
		for i, d := range r.Runs {
			runs[i] = fmt.Sprintf("%.3f", d.Seconds())
		}
		fmt.Fprintf(w, "| %s | %s | %.3f s | %s s | %s | %.1f | %s |\n", r.Target, commas(r.Rows), r.Elapsed.Seconds(),
			strings.Join(runs, ", "), commas(int64(r.RowsPerSec())), r.MBPerSec(), ratio)
	}
	fmt.Fprintln(w)
}
