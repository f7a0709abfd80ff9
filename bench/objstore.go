package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/objstore"
)

// Backends measured by RunObjstore.
const (
	// BackendRaw is the peer: each put creates a plain file, writes it and
	// fsyncs it (no temp file, no link, no directory fsync); each get reads
	// the file. It bounds what the local directory store could reach.
	BackendRaw = "raw-disk"
	// BackendDir is objstore.Dir.
	BackendDir = "local-dir"
	// BackendVersityGW is objstore.S3 against a versitygw (posix backend)
	// on loopback, started for the run.
	BackendVersityGW = "versitygw"
)

// ObjstoreConfig configures RunObjstore. Zero values mean the defaults.
type ObjstoreConfig struct {
	// Dir is where the stores keep their data; a fresh subdirectory is
	// created in it and removed afterwards. Default: os.TempDir(). Put it on
	// the disk you want to measure.
	Dir string
	// Sizes are the object sizes in bytes. Default: 4 KiB and 1 MiB.
	Sizes []int
	// Concurrency is the number of goroutines issuing operations.
	// Default: 8.
	Concurrency int
	// Ops is the number of puts (and then gets) per backend and size,
	// rounded up to a multiple of Rounds. Default: 256 MiB worth of
	// objects, between 128 and 2048.
	Ops int
	// Rounds is how many turns the backends take per size and op (see
	// MeasureObjstore). Default: 4.
	Rounds int
	// Backends selects which of BackendRaw, BackendDir and BackendVersityGW
	// to run, in that order. Default: all three. The versitygw backend needs
	// the binary (scripts/install-versitygw.sh).
	Backends []string
}

func (c *ObjstoreConfig) fill() error {
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{4 << 10, 1 << 20}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Rounds <= 0 {
		c.Rounds = 4
	}
	if len(c.Backends) == 0 {
		c.Backends = []string{BackendRaw, BackendDir, BackendVersityGW}
	}
	for _, b := range c.Backends {
		switch b {
		case BackendRaw, BackendDir, BackendVersityGW:
		default:
			return fmt.Errorf("unknown backend %q (want %s, %s or %s)", b, BackendRaw, BackendDir, BackendVersityGW)
		}
	}
	for _, size := range c.Sizes {
		if size <= 0 {
			return fmt.Errorf("object size %d must be positive", size)
		}
	}
	return nil
}

func (c *ObjstoreConfig) opsFor(size int) int {
	if c.Ops > 0 {
		return c.Ops
	}
	return min(max((256<<20)/size, 128), 2048)
}

// ObjstoreResult is one row of the report: one operation on one backend at
// one object size.
type ObjstoreResult struct {
	Backend     string
	Size        int
	Op          string // "put" or "get"
	Concurrency int
	Ops         int
	Elapsed     time.Duration
	P50, P99    time.Duration
}

// OpsPerSec is the throughput in operations per second.
func (r ObjstoreResult) OpsPerSec() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// MBPerSec is the throughput in MB (10^6 bytes) per second.
func (r ObjstoreResult) MBPerSec() float64 { return r.OpsPerSec() * float64(r.Size) / 1e6 }

// RunObjstore measures create-only put and get throughput and latency of
// the object stores and the raw disk peer, and writes a markdown table to
// w. Each backend gets Ops puts of distinct keys, then Ops gets of those
// keys in random order, from Concurrency goroutines, in turns with the
// other backends. Gets are served from
// the page cache on every backend: they measure the store's overhead, not
// the disk.
func RunObjstore(ctx context.Context, w io.Writer, cfg ObjstoreConfig) error {
	results, err := MeasureObjstore(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "objstore: create-only put and get, concurrency %d, GOMAXPROCS %d, %s/%s, data dir %s\n\n",
		results[0].Concurrency, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, dirOrDefault(cfg.Dir))
	WriteObjstoreTable(w, results)
	return nil
}

func dirOrDefault(dir string) string {
	if dir == "" {
		return os.TempDir()
	}
	return dir
}

// MeasureObjstore runs the measurements of RunObjstore and returns the
// rows, ordered by size, op and backend.
//
// The backends take turns: each size's puts (then gets) are split into
// Rounds rounds, and every round runs each backend once. A machine shared
// with other work drifts over a run; interleaving spreads that drift over
// all backends instead of charging it to whichever ran last.
func MeasureObjstore(ctx context.Context, cfg ObjstoreConfig) ([]ObjstoreResult, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("objstore bench: %w", err)
	}
	base, err := os.MkdirTemp(cfg.Dir, "mink-objstore-bench-")
	if err != nil {
		return nil, fmt.Errorf("objstore bench: %w", err)
	}
	defer os.RemoveAll(base)

	targets := make([]target, 0, len(cfg.Backends))
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	for _, backend := range cfg.Backends {
		t, err := openTarget(ctx, backend, filepath.Join(base, backend))
		if err != nil {
			return nil, fmt.Errorf("objstore bench: %s: %w", backend, err)
		}
		targets = append(targets, t)
	}

	var results []ObjstoreResult
	for _, size := range cfg.Sizes {
		rows, err := measureSize(ctx, cfg, targets, size)
		if err != nil {
			return nil, fmt.Errorf("objstore bench: %w", err)
		}
		results = append(results, rows...)
	}
	return results, nil
}

func measureSize(ctx context.Context, cfg ObjstoreConfig, targets []target, size int) ([]ObjstoreResult, error) {
	perRound := (cfg.opsFor(size) + cfg.Rounds - 1) / cfg.Rounds
	ops := perRound * cfg.Rounds
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	keyOf := func(i int) string { return fmt.Sprintf("obj/%d/%08d", size, i) }
	// Warm up: directories, connections, the server's first requests.
	for b, t := range targets {
		for i := range cfg.Concurrency {
			if err := t.put(ctx, fmt.Sprintf("warmup/%d/%d", size, i), data); err != nil {
				return nil, fmt.Errorf("%s: warm-up put: %w", cfg.Backends[b], err)
			}
		}
	}
	getOrder := rand.New(rand.NewPCG(uint64(size), 2)).Perm(ops)
	var rows []ObjstoreResult
	for _, phase := range []string{"put", "get"} {
		stats := make([]runStats, len(targets))
		for round := range cfg.Rounds {
			first := round * perRound
			for b, t := range targets {
				var op func(ctx context.Context, i int) error
				if phase == "put" {
					op = func(ctx context.Context, i int) error { return t.put(ctx, keyOf(first+i), data) }
				} else {
					op = func(ctx context.Context, i int) error {
						got, err := t.get(ctx, keyOf(getOrder[first+i]))
						if err == nil && len(got) != size {
							err = fmt.Errorf("got %d bytes, want %d", len(got), size)
						}
						return err
					}
				}
				st, err := runOps(ctx, cfg.Concurrency, perRound, op)
				if err != nil {
					return nil, fmt.Errorf("%s: %s %d B: %w", cfg.Backends[b], phase, size, err)
				}
				stats[b].elapsed += st.elapsed
				stats[b].latencies = append(stats[b].latencies, st.latencies...)
			}
		}
		for b := range targets {
			slices.Sort(stats[b].latencies)
			rows = append(rows, stats[b].result(cfg.Backends[b], size, phase, cfg.Concurrency))
		}
	}
	return rows, nil
}

// target is one backend's put and get.
type target struct {
	put   func(ctx context.Context, key string, data []byte) error
	get   func(ctx context.Context, key string) ([]byte, error)
	close func()
}

func openTarget(ctx context.Context, backend, dir string) (target, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return target{}, err
	}
	switch backend {
	case BackendRaw:
		return rawTarget(dir), nil
	case BackendDir:
		d, err := objstore.NewDir(dir)
		if err != nil {
			return target{}, err
		}
		return storeTarget(d, func() {}), nil
	case BackendVersityGW:
		startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		srv, err := s3test.StartProcess(startCtx, dir)
		if err != nil {
			return target{}, err
		}
		s, err := objstore.NewS3(ctx, objstore.S3Config{
			Bucket: srv.Bucket, Prefix: "bench", Endpoint: srv.Endpoint, Region: srv.Region,
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		})
		if err != nil {
			srv.Stop()
			return target{}, err
		}
		return storeTarget(s, srv.Stop), nil
	}
	return target{}, fmt.Errorf("unknown backend %q", backend)
}

func storeTarget(s objstore.Store, stop func()) target {
	return target{
		put:   s.PutIfAbsent,
		get:   s.Get,
		close: func() { s.Close(); stop() },
	}
}

// rawTarget writes each object as a plain file: create exclusively, write,
// fsync, close. Keys map to paths as in objstore.Dir; the parent directories
// are created untimed, on first use, and not fsynced.
func rawTarget(dir string) target {
	var mkdirs sync.Map // parent dir -> struct{}
	return target{
		put: func(ctx context.Context, key string, data []byte) error {
			path := filepath.Join(dir, filepath.FromSlash(key))
			parent := filepath.Dir(path)
			if _, ok := mkdirs.Load(parent); !ok {
				if err := os.MkdirAll(parent, 0o755); err != nil {
					return err
				}
				mkdirs.Store(parent, struct{}{})
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
		get: func(ctx context.Context, key string) ([]byte, error) {
			return os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
		},
		close: func() {},
	}
}

type runStats struct {
	elapsed   time.Duration
	latencies []time.Duration
}

func (s runStats) result(backend string, size int, op string, conc int) ObjstoreResult {
	return ObjstoreResult{
		Backend: backend, Size: size, Op: op, Concurrency: conc,
		Ops: len(s.latencies), Elapsed: s.elapsed,
		P50: percentile(s.latencies, 50), P99: percentile(s.latencies, 99),
	}
}

// runOps calls op(i) for i in [0, ops) from conc goroutines and records
// each call's latency. The first error stops the run.
func runOps(ctx context.Context, conc, ops int, op func(ctx context.Context, i int) error) (runStats, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	latencies := make([]time.Duration, ops)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= ops || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					cancel(fmt.Errorf("op %d: %w", i, err))
					return
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Only a failed op or the caller's ctx can have canceled ctx by now.
	if ctx.Err() != nil {
		return runStats{}, context.Cause(ctx)
	}
	slices.Sort(latencies)
	return runStats{elapsed: elapsed, latencies: latencies}, nil
}

// percentile returns the p-th percentile (nearest rank) of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100 // ceil(n*p/100)
	return sorted[max(rank, 1)-1]
}

// WriteObjstoreTable writes results as a markdown table. The "vs raw"
// column is the backend's ops/s divided by the raw-disk peer's for the same
// size and op, when the peer was measured.
func WriteObjstoreTable(w io.Writer, results []ObjstoreResult) {
	raw := map[string]float64{}
	for _, r := range results {
		if r.Backend == BackendRaw {
			raw[fmt.Sprint(r.Size, r.Op)] = r.OpsPerSec()
		}
	}
	fmt.Fprintln(w, "| backend | size | op | conc | ops | ops/s | MB/s | p50 | p99 | vs raw |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		vsRaw := "-"
		if peer, ok := raw[fmt.Sprint(r.Size, r.Op)]; ok && peer > 0 {
			vsRaw = fmt.Sprintf("%.2f", r.OpsPerSec()/peer)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.0f | %.1f | %s | %s | %s |\n",
			r.Backend, formatSize(r.Size), r.Op, r.Concurrency, r.Ops, r.OpsPerSec(), r.MBPerSec(),
			formatLatency(r.P50), formatLatency(r.P99), vsRaw)
	}
}

func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func formatLatency(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}
