package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/etcdlog"
)

// MetadataConfig configures RunMetadata. Zero values mean the defaults.
type MetadataConfig struct {
	// Dir is where the embedded etcd keeps its data (a fresh subdirectory,
	// removed afterwards). Default: os.TempDir(). Put it on the disk you want
	// to measure: every proposal is an fsync'd etcd write.
	Dir string
	// Proposals is the number of proposals (and of raw puts) per concurrency
	// level. Default 2000.
	Proposals int
	// Concurrency lists the numbers of concurrent proposers. Default 1, 16.
	Concurrency []int
	// SnapshotEvery is passed to the Catalog. Default: the Catalog's (1000).
	SnapshotEvery uint64
	// Logger receives the catalog's and etcd's log lines. Default: none.
	Logger *slog.Logger
}

func (c *MetadataConfig) fill() {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Proposals <= 0 {
		c.Proposals = 2000
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 16}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Workloads measured by RunMetadata.
const (
	// WorkloadPropose is Catalog.Propose of a CommitStreamObjects record
	// (two stream objects) on its own stream per proposer: append to the
	// etcd log (one transaction comparing and writing the head and the
	// entry), tail it back through the watch, apply it, return the outcome.
	WorkloadPropose = "propose CommitStreamObjects"
	// WorkloadRawPut is the peer: a plain etcd Put of the same number of
	// bytes to a fresh key, through the same client.
	WorkloadRawPut = "raw etcd put"
)

// MetadataResult is one measured row.
type MetadataResult struct {
	Workload    string
	Concurrency int
	Ops         int
	// EntryBytes is the size of one log entry (or raw value).
	EntryBytes int
	Elapsed    time.Duration
	P50, P99   time.Duration
}

// OpsPerSec is the throughput.
func (r MetadataResult) OpsPerSec() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// RunMetadata starts an embedded etcd, opens a Catalog on it, measures
// Propose throughput and latency at each concurrency against raw etcd puts of
// the same size, and writes a markdown table to w.
func RunMetadata(ctx context.Context, w io.Writer, cfg MetadataConfig) error {
	cfg.fill()
	results, err := MeasureMetadata(ctx, cfg)
	if err != nil {
		return err
	}
	WriteMetadataTable(w, results)
	return nil
}

// MeasureMetadata runs the workloads and returns one result per workload and
// concurrency, the proposals first.
func MeasureMetadata(ctx context.Context, cfg MetadataConfig) ([]MetadataResult, error) {
	cfg.fill()
	dir, err := os.MkdirTemp(cfg.Dir, "mink-bench-metadata-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	port, err := freeLoopbackPortPair()
	if err != nil {
		return nil, err
	}
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{
		Dir:        filepath.Join(dir, "etcd"),
		ClientAddr: fmt.Sprintf("127.0.0.1:%d", port),
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer etcd.Close()
	client, err := etcdlog.Dial(ctx, etcd.Endpoints(), cfg.Logger, 30*time.Second)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	cat, err := metalog.Open(ctx, etcdlog.New(client, "bench"), metalog.Options{
		SnapshotEvery: cfg.SnapshotEvery,
		Logger:        cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer cat.Close()

	streams, err := openBenchStreams(ctx, cat, slices.Max(cfg.Concurrency))
	if err != nil {
		return nil, fmt.Errorf("set up streams: %w", err)
	}
	body, err := catalog.EncodeRecord(streams[0].next())
	if err != nil {
		return nil, err
	}
	// The log entry is the record plus the 17-byte proposal envelope.
	entryBytes := len(body) + 17

	var results []MetadataResult
	for _, conc := range cfg.Concurrency {
		res, err := measureOps(ctx, conc, cfg.Proposals, func(ctx context.Context, worker, i int) error {
			s := streams[worker]
			out, err := cat.Propose(ctx, s.next())
			if err != nil {
				return err
			}
			s.end = out.End
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("propose with %d proposers: %w", conc, err)
		}
		res.Workload, res.EntryBytes = WorkloadPropose, entryBytes
		results = append(results, res)

		value := make([]byte, entryBytes)
		rand.Read(value)
		res, err = measureOps(ctx, conc, cfg.Proposals, func(ctx context.Context, worker, i int) error {
			key := fmt.Sprintf("/bench-raw/%02d/%020d", conc, worker*cfg.Proposals+i)
			_, err := client.Put(ctx, key, string(value))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("raw put with %d clients: %w", conc, err)
		}
		res.Workload, res.EntryBytes = WorkloadRawPut, entryBytes
		results = append(results, res)
		if _, err := client.Delete(ctx, "/bench-raw/", clientv3.WithPrefix()); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// benchStream is one proposer's stream, open on node 1 at epoch.
type benchStream struct {
	stream catalog.StreamID
	epoch  uint64
	end    uint64
}

// next is the CommitStreamObjects record continuing the stream: two objects
// of 512 offsets, keys shaped like s3stream's.
func (s *benchStream) next() catalog.Record {
	objects := make([]catalog.StreamObject, 2)
	start := s.end
	for i := range objects {
		objects[i] = catalog.StreamObject{
			Key:   fmt.Sprintf("streams/%d/%d/%020d-%020d", s.stream, s.epoch, start, start+512),
			Start: start,
			End:   start + 512,
			Size:  4 << 20,
		}
		start += 512
	}
	return catalog.CommitStreamObjects{Stream: s.stream, Epoch: s.epoch, Objects: objects}
}

// openBenchStreams registers node 1 as node and coordinator, creates a table
// with n buckets led by node 1 and opens their streams.
func openBenchStreams(ctx context.Context, cat *metalog.Catalog, n int) ([]*benchStream, error) {
	node, err := cat.Propose(ctx, catalog.RegisterNode{Node: 1})
	if err != nil {
		return nil, err
	}
	coord, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: node.Epoch})
	if err != nil {
		return nil, err
	}
	table, err := cat.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{
		Name:    "bench",
		Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}},
		Buckets: n,
	}})
	if err != nil {
		return nil, err
	}
	var streams []*benchStream
	for _, b := range table.Buckets {
		lead, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: coord.Epoch})
		if err != nil {
			return nil, err
		}
		open, err := cat.Propose(ctx, catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: lead.Epoch, Node: 1, NodeEpoch: node.Epoch})
		if err != nil {
			return nil, err
		}
		streams = append(streams, &benchStream{stream: catalog.StreamID(b), epoch: lead.Epoch, end: open.End})
	}
	if len(streams) != n {
		return nil, fmt.Errorf("table has %d buckets, want %d", len(streams), n)
	}
	return streams, nil
}

// measureOps runs ops calls of op spread over conc workers (worker w makes
// calls i = 0, 1, ...) and returns the elapsed time and latency percentiles.
func measureOps(ctx context.Context, conc, ops int, op func(ctx context.Context, worker, i int) error) (MetadataResult, error) {
	var mu sync.Mutex
	var latencies []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for worker := range conc {
		n := ops / conc
		if worker < ops%conc {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n)
			for i := range n {
				t0 := time.Now()
				if err := op(ctx, worker, i); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return MetadataResult{}, firstErr
	}
	slices.Sort(latencies)
	return MetadataResult{
		Concurrency: conc,
		Ops:         len(latencies),
		Elapsed:     elapsed,
		P50:         percentile(latencies, 50),
		P99:         percentile(latencies, 99),
	}, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// WriteMetadataTable writes results as a markdown table. "vs raw put" is the
// proposals' ops/s divided by the raw puts' at the same concurrency.
func WriteMetadataTable(w io.Writer, results []MetadataResult) {
	raw := map[int]float64{}
	for _, r := range results {
		if r.Workload == WorkloadRawPut {
			raw[r.Concurrency] = r.OpsPerSec()
		}
	}
	fmt.Fprintln(w, "| workload | entry | conc | ops | ops/s | p50 | p99 | vs raw put |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		vs := "-"
		if peer := raw[r.Concurrency]; peer > 0 && r.Workload != WorkloadRawPut {
			vs = fmt.Sprintf("%.2f", r.OpsPerSec()/peer)
		}
		fmt.Fprintf(w, "| %s | %d B | %d | %d | %.0f | %s | %s | %s |\n",
			r.Workload, r.EntryBytes, r.Concurrency, r.Ops, r.OpsPerSec(),
			formatLatency(r.P50), formatLatency(r.P99), vs)
	}
}

// freeLoopbackPortPair returns a free loopback port whose successor (the
// embedded etcd's peer port) is free too.
func freeLoopbackPortPair() (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		ln.Close()
		if err == nil {
			ln2.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port pair")
}
