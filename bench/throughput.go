package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
)

// ThroughputConfig configures RunThroughput. Zero values mean the defaults.
type ThroughputConfig struct {
	// Dir holds the clusters' data (fresh subdirectories, removed
	// afterwards). Default: the temp dir.
	Dir string
	// Duration of each measurement. Default 10 s.
	Duration time.Duration
	// Conns is the number of SQL connections (spread over the nodes) and
	// of Go client writers. Default 8.
	Conns int
	// BatchRows is the rows per COPY and per AppendTable call. Default 10 K.
	BatchRows int
	// Buckets of the table. Default 6.
	Buckets int
	// SkipPostgres leaves the PostgreSQL peer out.
	SkipPostgres bool
}

func (c *ThroughputConfig) fill() {
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Conns == 0 {
		c.Conns = 8
	}
	if c.BatchRows == 0 {
		c.BatchRows = 10_000
	}
	if c.Buckets == 0 {
		c.Buckets = 6
	}
}

// ThroughputResult is one write path on one target.
type ThroughputResult struct {
	Path    string // "INSERT (1 row)", "COPY", "client.AppendTable"
	Target  string // "mink, 1 node", "mink, 3 nodes", "PostgreSQL 15.x"
	Nodes   int    // 0 for the peer
	Rows    int64
	Elapsed time.Duration
}

// RowsPerSec is the throughput.
func (r ThroughputResult) RowsPerSec() float64 { return float64(r.Rows) / r.Elapsed.Seconds() }

// RunThroughput measures and prints a markdown table.
func RunThroughput(ctx context.Context, w io.Writer, cfg ThroughputConfig) error {
	res, err := MeasureThroughput(ctx, cfg)
	if err != nil {
		return err
	}
	WriteThroughputTable(w, res)
	return nil
}

// MeasureThroughput writes through SQL (single-row INSERTs, binary COPY)
// and through the Go client (AppendTable) into a log table on a one-node
// and on a three-node cluster (processes on this machine, one etcd, one
// local object store), and into PostgreSQL as the peer.
func MeasureThroughput(ctx context.Context, cfg ThroughputConfig) (_ []ThroughputResult, err error) {
	cfg.fill()
	dir, err := os.MkdirTemp(cfg.Dir, "mink-bench-throughput")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(dir)
		} else {
			err = fmt.Errorf("%w (node logs kept in %s)", err, dir)
		}
	}()
	bin, err := buildMink(ctx, dir)
	if err != nil {
		return nil, err
	}
	var out []ThroughputResult
	for _, n := range []int{1, 3} {
		res, err := measureClusterThroughput(ctx, bin, fmt.Sprintf("%s/nodes%d", dir, n), n, cfg)
		if err != nil {
			return nil, fmt.Errorf("%d nodes: %w", n, err)
		}
		out = append(out, res...)
	}
	if !cfg.SkipPostgres {
		pg, err := StartPostgres(ctx, cfg.Dir)
		if errors.Is(err, ErrNoPostgres) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		defer pg.Stop()
		connect := func(context.Context, int) (*pgx.Conn, error) { return pgx.Connect(ctx, pg.DSN) }
		setup, err := pgx.Connect(ctx, pg.DSN)
		if err != nil {
			return nil, err
		}
		_, err = setup.Exec(ctx, "CREATE TABLE t (id bigint NOT NULL, v bigint)")
		setup.Close(ctx)
		if err != nil {
			return nil, err
		}
		for _, path := range []string{"INSERT (1 row)", "COPY"} {
			r, err := sqlThroughput(ctx, connect, path, cfg)
			if err != nil {
				return nil, fmt.Errorf("PostgreSQL %s: %w", path, err)
			}
			r.Target = pg.peerName()
			out = append(out, r)
		}
	}
	return out, nil
}

func measureClusterThroughput(ctx context.Context, bin, dir string, n int, cfg ThroughputConfig) ([]ThroughputResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := startProcCluster(ctx, bin, dir, n, 30*time.Second, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.close()
	var setup *pgx.Conn
	if err := pollUntil(ctx, 30*time.Second, func() (bool, error) {
		setup, err = c.nodes[0].connect(ctx)
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	_, err = setup.Exec(ctx, fmt.Sprintf("CREATE TABLE t (id bigint NOT NULL, v bigint) WITH (buckets = %d, bucket_key = 'id')", cfg.Buckets))
	setup.Close(ctx)
	if err != nil {
		return nil, err
	}
	// The buckets open on their leaders.
	time.Sleep(2 * time.Second)
	target := fmt.Sprintf("mink, %d node", n)
	if n > 1 {
		target += "s"
	}
	// Connection i goes to node i % n.
	connect := func(ctx context.Context, i int) (*pgx.Conn, error) { return c.nodes[i%n].connect(ctx) }
	var out []ThroughputResult
	for _, path := range []string{"INSERT (1 row)", "COPY"} {
		r, err := sqlThroughput(ctx, connect, path, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r.Target, r.Nodes = target, n
		out = append(out, r)
	}
	var addrs []string
	for _, nd := range c.nodes {
		addrs = append(addrs, nd.flight)
	}
	cl, err := client.Dial(ctx, addrs...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r, err := appendThroughput(ctx, cl, cfg)
	if err != nil {
		return nil, fmt.Errorf("AppendTable: %w", err)
	}
	r.Target, r.Nodes = target, n
	return append(out, r), nil
}

// sqlThroughput runs cfg.Conns connections writing into table t for
// cfg.Duration: single-row INSERTs, or binary COPYs of cfg.BatchRows rows.
// Ids are unique across connections.
func sqlThroughput(ctx context.Context, connect func(context.Context, int) (*pgx.Conn, error), path string, cfg ThroughputConfig) (ThroughputResult, error) {
	var rows atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Conns)
	conns := make([]*pgx.Conn, cfg.Conns)
	for i := range conns {
		var err error
		if conns[i], err = connect(ctx, i); err != nil {
			return ThroughputResult{}, err
		}
		defer conns[i].Close(ctx)
	}
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	var base atomic.Int64
	base.Store(time.Now().UnixNano() / 1000 << 8) // unique across runs
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				switch path {
				case "COPY":
					from := base.Add(int64(cfg.BatchRows)) - int64(cfg.BatchRows)
					src := &seqSource{next: from, end: from + int64(cfg.BatchRows)}
					n, err := conn.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"id", "v"}, src)
					if err != nil {
						errs <- fmt.Errorf("connection %d: %w", i, err)
						return
					}
					rows.Add(n)
				default:
					id := base.Add(1)
					if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1, $2)", id, id); err != nil {
						errs <- fmt.Errorf("connection %d: %w", i, err)
						return
					}
					rows.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return ThroughputResult{}, err
	}
	return ThroughputResult{Path: path, Rows: rows.Load(), Elapsed: elapsed}, nil
}

// seqSource is a pgx.CopyFromSource of rows (id, id) for ids [next, end).
type seqSource struct {
	next, end int64
	row       [2]any
}

func (s *seqSource) Next() bool {
	if s.next >= s.end {
		return false
	}
	s.row = [2]any{s.next, s.next}
	s.next++
	return true
}

func (s *seqSource) Values() ([]any, error) { return s.row[:], nil }
func (s *seqSource) Err() error             { return nil }

// appendThroughput runs cfg.Conns goroutines calling AppendTable with
// batches of cfg.BatchRows rows for cfg.Duration. Each batch is built in the
// timed loop, as a COPY generates its rows.
func appendThroughput(ctx context.Context, cl *client.Client, cfg ThroughputConfig) (ThroughputResult, error) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	var rows atomic.Int64
	var base atomic.Int64
	base.Store(time.Now().UnixNano()/1000<<8 + 1<<60)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Conns)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for i := 0; i < cfg.Conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			defer b.Release()
			for time.Now().Before(deadline) {
				from := base.Add(int64(cfg.BatchRows)) - int64(cfg.BatchRows)
				ids := b.Field(0).(*array.Int64Builder)
				vs := b.Field(1).(*array.Int64Builder)
				for id := from; id < from+int64(cfg.BatchRows); id++ {
					ids.Append(id)
					vs.Append(id)
				}
				rec := b.NewRecordBatch()
				err := cl.AppendTable(ctx, "t", rec)
				rec.Release()
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", i, err)
					return
				}
				rows.Add(int64(cfg.BatchRows))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return ThroughputResult{}, err
	}
	return ThroughputResult{Path: "client.AppendTable", Rows: rows.Load(), Elapsed: elapsed}, nil
}

// WriteThroughputTable prints rows/s per path and target, with the ratio
// to mink on one node and to the peer.
func WriteThroughputTable(w io.Writer, res []ThroughputResult) {
	one := map[string]float64{}
	peer := map[string]float64{}
	for _, r := range res {
		if r.Nodes == 1 {
			one[r.Path] = r.RowsPerSec()
		}
		if r.Nodes == 0 {
			peer[r.Path] = r.RowsPerSec()
		}
	}
	fmt.Fprintln(w, "| write path | target | rows | time | rows/s | vs mink on 1 node | vs PostgreSQL |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, r := range res {
		ratio := func(base float64) string {
			if base == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f×", r.RowsPerSec()/base)
		}
		vsOne := ratio(one[r.Path])
		if r.Nodes == 0 {
			vsOne = "–"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.1f s | %s | %s | %s |\n", r.Path, r.Target, commas(r.Rows), r.Elapsed.Seconds(),
			commas(int64(r.RowsPerSec())), vsOne, ratio(peer[r.Path]))
	}
}
