package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/minktest"
)

// RustClientConfig configures RunRustClient. Zero values mean the defaults.
type RustClientConfig struct {
	// Dir holds mink's data (a fresh subdirectory, removed afterwards).
	// Default: the temp dir.
	Dir string
	// Rows each client appends per append run. Default 2 M.
	Rows int
	// AppendRuns is how often each client appends Rows rows, the clients
	// taking turns (Go first in even runs, Rust first in odd ones); the
	// median is reported. Default 3.
	AppendRuns int
	// BatchRows is the rows per AppendTable call (Go) and per append and
	// flush (Rust). Default 256 K.
	BatchRows int
	// Writers is the number of concurrent writers of each client. Default 4.
	Writers int
	// Runs is how often each scan is repeated; the median is reported.
	// Default 3.
	Runs int
	// Examples is the directory of the Rust client's built examples
	// (clients/rust, `cargo build --release --examples`).
	Examples string
}

func (c *RustClientConfig) fill() error {
	if c.Rows == 0 {
		c.Rows = 2_000_000
	}
	if c.AppendRuns == 0 {
		c.AppendRuns = 3
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
	if c.Examples == "" {
		return fmt.Errorf("rust client bench: no examples directory")
	}
	if c.Rows <= 0 || c.BatchRows <= 0 || c.Writers <= 0 || c.Runs <= 0 || c.AppendRuns <= 0 {
		return fmt.Errorf("rust client bench: bad configuration %+v", *c)
	}
	return nil
}

// RustClientReport is the outcome of MeasureRustClient: each transfer by
// the Go client and by the Rust client, on the same table in one run.
type RustClientReport struct {
	Config  RustClientConfig
	Started time.Time
	// Appends: Go, then Rust. Scans: Go, then Rust (medians).
	Appends, Scans []FlightResult
}

// RustClientDDL is the table both clients write: the facts columns, hashed
// on id over 4 buckets, so that both clients route and split every batch.
const RustClientDDL = `CREATE TABLE rust_vs_go (id bigint, store integer, amount double precision, name text, ` +
	`ts timestamptz, flag boolean, user_id bigint, day date) WITH (buckets = 4, bucket_key = 'id')`

// RunRustClient measures bulk append and scan throughput of the Rust
// client (clients/rust) against the Go client on one mink node and writes
// a markdown table to w.
func RunRustClient(ctx context.Context, w io.Writer, cfg RustClientConfig) error {
	rep, err := MeasureRustClient(ctx, cfg)
	if err != nil {
		return err
	}
	WriteRustClientTable(w, rep)
	return nil
}

// MeasureRustClient appends Rows rows with the Go client (Writers
// goroutines calling AppendTable with BatchRows rows each) and Rows more
// with the Rust client's `load` example (Writers tasks, a flush per
// BatchRows), AppendRuns times each, taking turns, with distinct ids and
// the same generated values (the Rust example's generator, mirrored by
// rustRows), into one table; then both clients scan the whole table Runs
// times, taking turns. Batches are
// built inside the timed region by both. The Rust client runs as its own
// process; its times are the ones it reports (from before it connects).
func MeasureRustClient(ctx context.Context, cfg RustClientConfig) (*RustClientReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	rep := &RustClientReport{Config: cfg, Started: time.Now().UTC()}
	base, err := os.MkdirTemp(cfg.Dir, "mink-bench-rust-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	node, err := minktest.StartNode(minktest.Options{DataDir: filepath.Join(base, "mink")}, nil)
	if err != nil {
		return nil, fmt.Errorf("start mink: %w", err)
	}
	defer node.Server.Close()
	conn, err := pgx.Connect(ctx, node.URL)
	if err != nil {
		return nil, fmt.Errorf("connect to mink: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, RustClientDDL); err != nil {
		return nil, err
	}
	flightAddr := node.Config.FlightAddr
	c, err := client.DialOptions(ctx, client.Options{ScanParallelism: 8}, flightAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()

	appends := [2][]FlightResult{}
	for run := 0; run < cfg.AppendRuns; run++ {
		for j := 0; j < 2; j++ {
			k := (j + run) % 2
			from := int64(2*run+k)*int64(cfg.Rows) + 1
			var r FlightResult
			var err error
			if k == 0 {
				r, err = goAppendRows(ctx, c, from, cfg)
			} else {
				r, err = runRustExample(ctx, cfg.Examples, "load", "acknowledged", "--server", flightAddr, "--table", "rust_vs_go",
					"--from", strconv.FormatInt(from, 10), "--rows", strconv.Itoa(cfg.Rows), "--batch-rows", strconv.Itoa(cfg.BatchRows),
					"--flush-rows", strconv.Itoa(cfg.BatchRows), "--writers", strconv.Itoa(cfg.Writers))
				r.Target = fmt.Sprintf("Rust client, Writer append + flush (%d tasks)", cfg.Writers)
			}
			if err != nil {
				return nil, err
			}
			if r.Rows != int64(cfg.Rows) {
				return nil, fmt.Errorf("%s acknowledged %d rows, want %d", r.Target, r.Rows, cfg.Rows)
			}
			appends[k] = append(appends[k], r)
		}
	}
	rep.Appends = medians(appends[:])
	var n, distinct int64
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM rust_vs_go").Scan(&n, &distinct); err != nil {
		return nil, err
	}
	if want := int64(2 * cfg.AppendRuns * cfg.Rows); n != want || distinct != n {
		return nil, fmt.Errorf("rust_vs_go has %d rows (%d distinct ids), want %d", n, distinct, want)
	}

	scans := [2][]FlightResult{}
	for run := 0; run < cfg.Runs; run++ {
		for j := 0; j < 2; j++ {
			k := (j + run) % 2
			var r FlightResult
			var err error
			if k == 0 {
				r, err = goScan(ctx, c)
				r.Target = "Go client, Scan (8 buckets at a time)"
			} else {
				r, err = runRustExample(ctx, cfg.Examples, "scan", "rows", "--server", flightAddr, "--table", "rust_vs_go")
				r.Target = "Rust client, scan stream (8 buckets at a time)"
			}
			if err != nil {
				return nil, err
			}
			if r.Rows != n {
				return nil, fmt.Errorf("%s read %d rows, want %d", r.Target, r.Rows, n)
			}
			scans[k] = append(scans[k], r)
		}
	}
	rep.Scans = medians(scans[:])
	return rep, nil
}

// medians returns the median of each reader's (or client's) runs, with
// every run's time.
func medians(runs [][]FlightResult) []FlightResult {
	var out []FlightResult
	for _, rs := range runs {
		var times []time.Duration
		for _, r := range rs {
			times = append(times, r.Elapsed)
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].Elapsed < rs[j].Elapsed })
		median := rs[len(rs)/2]
		median.Runs = times
		out = append(out, median)
	}
	return out
}

// flightReader is one way of reading a table in a read benchmark.
type flightReader struct {
	name string
	read func() (FlightResult, error)
}

// takeTurns runs each reader n times, the readers taking turns (reader k
// starts run r when (k+r) mod len(readers) comes up, so that drift in a
// shared machine's load hits all alike), checks that each read returns
// rows rows, and returns each reader's results, named after it.
func takeTurns(readers []flightReader, n int, rows int64) ([][]FlightResult, error) {
	runs := make([][]FlightResult, len(readers))
	for run := range n {
		for j := range readers {
			k := (j + run) % len(readers)
			r, err := readers[k].read()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", readers[k].name, err)
			}
			if r.Rows != rows {
				return nil, fmt.Errorf("%s: read %d rows, want %d", readers[k].name, r.Rows, rows)
			}
			r.Target = readers[k].name
			runs[k] = append(runs[k], r)
		}
	}
	return runs, nil
}

var rustArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "store", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "user_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
}, nil)

// rustRows is rows [from, to) of the table as the Rust `load` example
// generates them (clients/rust/examples/common/mod.rs) for these types.
func rustRows(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, rustArrowSchema)
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
		id.UnsafeAppend(i)
		store.UnsafeAppend(int32(i))
		amount.UnsafeAppend(float64(i) * 0.25)
		name.Append("v" + strconv.FormatInt(i, 10))
		ts.UnsafeAppend(arrow.Timestamp(1_700_000_000_000_000 + i*1_000_000))
		flag.UnsafeAppend(i%2 == 0)
		user.UnsafeAppend(i * 7)
		day.UnsafeAppend(arrow.Date32(19000 + i%1000))
	}
	return b.NewRecordBatch()
}

// goAppendRows appends ids from..from+Rows-1 with AppendTable from Writers
// goroutines.
func goAppendRows(ctx context.Context, c *client.Client, from int64, cfg RustClientConfig) (FlightResult, error) {
	ranges := make(chan [2]int64)
	errs := make(chan error, cfg.Writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.Writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range ranges {
				rec := rustRows(r[0], r[1])
				err := c.AppendTable(ctx, "rust_vs_go", rec)
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var sendErr error
	end := from + int64(cfg.Rows)
send:
	for lo := from; lo < end; lo += int64(cfg.BatchRows) {
		select {
		case ranges <- [2]int64{lo, min(lo+int64(cfg.BatchRows), end)}:
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
	return FlightResult{Target: fmt.Sprintf("Go client, AppendTable (%d goroutines)", cfg.Writers), Rows: int64(cfg.Rows), Elapsed: elapsed}, nil
}

func goScan(ctx context.Context, c *client.Client) (FlightResult, error) {
	start := time.Now()
	rdr, err := c.Scan(ctx, "rust_vs_go", client.ScanOptions{})
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

// rustTime is what the Rust examples print on stderr: "N rows in S.SSSs".
var rustTime = regexp.MustCompile(`(\d+) rows in ([0-9.]+)s`)

// runRustExample runs one of the Rust client's examples and returns the
// rows it printed after word ("acknowledged N", "rows N") and the time it
// reported.
func runRustExample(ctx context.Context, dir, name, word string, args ...string) (FlightResult, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, name), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return FlightResult{}, fmt.Errorf("rust %s: %v\n%s%s", name, err, out.String(), errb.String())
	}
	var r FlightResult
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, word+" "); ok {
			r.Rows, _ = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	m := rustTime.FindStringSubmatch(errb.String())
	if m == nil {
		return FlightResult{}, fmt.Errorf("rust %s printed no time: %s", name, errb.String())
	}
	secs, _ := strconv.ParseFloat(m[2], 64)
	r.Elapsed = time.Duration(secs * float64(time.Second))
	return r, nil
}

// WriteRustClientTable writes the report as markdown.
func WriteRustClientTable(w io.Writer, rep *RustClientReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "One mink node (in the driver's process), table `rust_vs_go` (%s) hashed on id over 4 buckets; "+
		"each client appends %d rows (batches of %d rows, %d concurrent writers) into the same table %d times (median, taking turns), then both scan all %d rows "+
		"(median of %d, taking turns). Started %s.\n\n",
		"bigint, int, double, text, timestamptz, bool, bigint, date", cfg.Rows, cfg.BatchRows, cfg.Writers, cfg.AppendRuns, 2*cfg.AppendRuns*cfg.Rows, cfg.Runs, rep.Started.Format(time.RFC3339))
	fmt.Fprintln(w, "| transfer | client | rows | time | rows/s | Rust ÷ Go |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: |")
	row := func(what string, rs []FlightResult) {
		if len(rs) != 2 {
			return
		}
		for i, r := range rs {
			ratio := ""
			if i == 1 {
				ratio = fmt.Sprintf("%.2f×", r.RowsPerSec()/rs[0].RowsPerSec())
			}
			runs := ""
			if len(r.Runs) > 1 {
				var ts []string
				for _, d := range r.Runs {
					ts = append(ts, fmt.Sprintf("%.2f", d.Seconds()))
				}
				runs = " (runs " + strings.Join(ts, ", ") + " s)"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.2f s%s | %.0f | %s |\n", what, r.Target, r.Rows, r.Elapsed.Seconds(), runs, r.RowsPerSec(), ratio)
		}
	}
	row("bulk append", rep.Appends)
	row("scan", rep.Scans)
}
