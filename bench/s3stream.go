package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// S3StreamConfig configures RunS3Stream.
type S3StreamConfig struct {
	// Dir holds the local-directory store, versitygw's root and the raw-disk
	// peer's file, all on one disk. Default: a temp dir.
	Dir string
	// Backends: BackendDir and/or BackendVersityGW. Default both.
	Backends []string
	// Streams are the stream counts to measure. Default 1, 8, 64.
	Streams []int
	// Depth is the number of appends each stream has in flight. Default 4.
	Depth int
	// EntryBytes is the payload of one append. Default 16 KiB.
	EntryBytes int
	// Duration of each append run. Default 5 s.
	Duration time.Duration
}

func (c *S3StreamConfig) fill() {
	if len(c.Backends) == 0 {
		c.Backends = []string{BackendDir, BackendVersityGW}
	}
	if len(c.Streams) == 0 {
		c.Streams = []int{1, 8, 64}
	}
	if c.Depth == 0 {
		c.Depth = 4
	}
	if c.EntryBytes == 0 {
		c.EntryBytes = 16 << 10
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
}

// S3StreamResult is one append run and its raw-disk peer.
type S3StreamResult struct {
	Backend    string
	Streams    int
	Appends    int
	Bytes      int64
	Elapsed    time.Duration
	P50, P99   time.Duration
	WALObjects int
	// RawMBps is sequential write+fsync of the same bytes, in WAL-object-sized
	// chunks, to one file in the same directory, measured right after.
	RawMBps float64
	// ReadColdMBps and ReadCachedMBps read the committed data back through a
	// Reader with an empty and then a warm local cache.
	ReadColdMBps, ReadCachedMBps float64
}

func (r S3StreamResult) MBps() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// RunS3Stream measures s3stream append throughput and acknowledgement
// latency, with the raw disk measured in the same run, and prints a table.
func RunS3Stream(ctx context.Context, w io.Writer, cfg S3StreamConfig) error {
	cfg.fill()
	results, err := MeasureS3Stream(ctx, cfg)
	if err != nil {
		return err
	}
	WriteS3StreamTable(w, cfg, results)
	return nil
}

// MeasureS3Stream runs every backend × stream count.
func MeasureS3Stream(ctx context.Context, cfg S3StreamConfig) ([]S3StreamResult, error) {
	cfg.fill()
	base := cfg.Dir
	if base == "" {
		tmp, err := os.MkdirTemp("", "mink-bench-s3stream")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		base = tmp
	}
	var out []S3StreamResult
	for _, backend := range cfg.Backends {
		for _, n := range cfg.Streams {
			dir := filepath.Join(base, fmt.Sprintf("%s-%d", backend, n))
			r, err := measureS3StreamOnce(ctx, cfg, backend, n, dir)
			if err != nil {
				return nil, fmt.Errorf("%s with %d streams: %w", backend, n, err)
			}
			out = append(out, r)
			os.RemoveAll(dir)
		}
	}
	return out, nil
}

func measureS3StreamOnce(ctx context.Context, cfg S3StreamConfig, backend string, streams int, dir string) (S3StreamResult, error) {
	res := S3StreamResult{Backend: backend, Streams: streams}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	var store objstore.Store
	batchWindow := 2 * time.Millisecond
	switch backend {
	case BackendDir:
		d, err := objstore.NewDir(filepath.Join(dir, "objects"))
		if err != nil {
			return res, err
		}
		store = d
	case BackendVersityGW:
		root := filepath.Join(dir, "gw")
		os.MkdirAll(root, 0o755)
		startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		srv, err := s3test.StartProcess(startCtx, root)
		cancel()
		if err != nil {
			return res, err
		}
		defer srv.Stop()
		s, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: srv.Bucket, Prefix: "bench", Endpoint: srv.Endpoint,
			Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
		if err != nil {
			return res, err
		}
		store = s
		batchWindow = s3stream.DefaultS3BatchWindow
	default:
		return res, fmt.Errorf("unknown backend %q", backend)
	}
	defer store.Close()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	meta, err := metalog.Open(ctx, metalog.NewMemLog(), metalog.Options{Logger: quiet})
	if err != nil {
		return res, err
	}
	defer meta.Close()
	reg, err := meta.Propose(ctx, catalog.RegisterNode{Node: 1})
	if err != nil {
		return res, err
	}
	node, err := s3stream.NewNode(s3stream.Config{Node: 1, NodeEpoch: reg.Epoch, Store: store, Meta: meta,
		Logger: quiet, BatchWindow: batchWindow, MaxInflight: 8})
	if err != nil {
		return res, err
	}
	defer node.Close()
	handles := make([]*s3stream.Stream, streams)
	for i := range handles {
		if handles[i], err = node.OpenStream(ctx, catalog.StreamID(i+1), 1); err != nil {
			return res, err
		}
	}

	payload := make([]byte, cfg.EntryBytes)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	var mu sync.Mutex
	var latencies []time.Duration
	var firstErr error
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range handles {
		for range cfg.Depth {
			wg.Go(func() {
				var mine []time.Duration
				for runCtx.Err() == nil {
					t0 := time.Now()
					if _, err := s.Append(ctx, payload, 1); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	slices.Sort(latencies)
	res.Appends = len(latencies)
	res.Bytes = int64(res.Appends) * int64(cfg.EntryBytes)
	res.P50, res.P99 = percentile(latencies, 50), percentile(latencies, 99)
	res.WALObjects = int(node.WALObjects())

	// The physical limit, right after, on the same disk: the same bytes in
	// chunks the size of the WAL objects just written, each written and
	// fsynced in sequence.
	chunk := int(res.Bytes / int64(max(res.WALObjects, 1)))
	if res.RawMBps, err = rawSequentialFsync(filepath.Join(dir, "raw"), res.Bytes, max(chunk, 4096)); err != nil {
		return res, err
	}

	// Read back what was committed: cold (empty cache), then cached.
	if err := node.FlushAll(ctx); err != nil {
		return res, err
	}
	cache, err := s3stream.NewCache(filepath.Join(dir, "cache"), 8<<30)
	if err != nil {
		return res, err
	}
	reader := s3stream.NewReader(store, meta, cache)
	for pass := 0; pass < 2; pass++ {
		t0 := time.Now()
		var n int64
		for i := range handles {
			id := catalog.StreamID(i + 1)
			entries, err := reader.Read(ctx, id, 0, reader.CommittedEnd(id))
			if err != nil {
				return res, err
			}
			for _, e := range entries {
				n += int64(len(e.Payload))
			}
		}
		mbps := float64(n) / 1e6 / time.Since(t0).Seconds()
		if pass == 0 {
			res.ReadColdMBps = mbps
		} else {
			res.ReadCachedMBps = mbps
		}
	}
	return res, nil
}

// rawSequentialFsync writes total bytes to one new file in chunks, with an
// fsync after each chunk, and returns MB/s.
func rawSequentialFsync(path string, total int64, chunk int) (float64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	t0 := time.Now()
	for written := int64(0); written < total; written += int64(chunk) {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return float64(total) / 1e6 / time.Since(t0).Seconds(), nil
}

// WriteS3StreamTable prints results as a markdown table.
func WriteS3StreamTable(w io.Writer, cfg S3StreamConfig, results []S3StreamResult) {
	fmt.Fprintf(w, "entry %s, %d appends in flight per stream, %v per run\n\n", formatSize(cfg.EntryBytes), cfg.Depth, cfg.Duration)
	fmt.Fprintln(w, "| backend | streams | appends/s | MB/s | ack p50 | ack p99 | WAL objects | raw fsync MB/s | vs raw | read cold MB/s | read cached MB/s |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %s | %s | %d | %.1f | %.2f | %.0f | %.0f |\n",
			r.Backend, r.Streams, float64(r.Appends)/r.Elapsed.Seconds(), r.MBps(),
			formatLatency(r.P50), formatLatency(r.P99), r.WALObjects, r.RawMBps, r.MBps()/r.RawMBps,
			r.ReadColdMBps, r.ReadCachedMBps)
	}
}
