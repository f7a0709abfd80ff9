package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// RecoveryConfig configures RunRecovery.
type RecoveryConfig struct {
	// Dir holds the local-directory object store, the node's data
	// directory and the raw-disk peer's copy, all on one disk. Default: a
	// temp dir.
	Dir string
	// StateBytes is the tablet state to build (rows × RowBytes).
	// Default 1 GiB.
	StateBytes int64
	// ChangelogBytes is the changelog written after the snapshot for the
	// second measurement: upserts of existing keys, each a -U and a +U
	// record carrying the old and the new row, so ChangelogBytes/2 of new
	// values. Default 100 MiB.
	ChangelogBytes int64
	// RowBytes is the size of a row's bytea value. Default 1 KiB.
	RowBytes int
	// BatchRows is the rows of one write (one stream entry). Default 1000.
	BatchRows int
}

func (c *RecoveryConfig) fill() {
	if c.StateBytes == 0 {
		c.StateBytes = 1 << 30
	}
	if c.ChangelogBytes == 0 {
		c.ChangelogBytes = 100 << 20
	}
	if c.RowBytes == 0 {
		c.RowBytes = 1 << 10
	}
	if c.BatchRows == 0 {
		c.BatchRows = 1000
	}
}

// RecoveryResult is one open of the bucket and its raw-disk peer.
type RecoveryResult struct {
	// ChangelogBytes is the payload written after the snapshot.
	ChangelogBytes int64
	// Open is from starting the node's bucket manager to the bucket
	// serving (restore + replay + the sync steps); Restore is the restore
	// step of that open (from the manager's "bucket open" log line), so
	// Open - Restore is the replay and the sync steps.
	Open, Restore time.Duration
	// SnapshotBytes and ReplayBytes are what the open read: the snapshot's
	// files and the stream objects after its offset.
	SnapshotBytes, ReplayBytes int64
	ReplayRecords              uint64
	// Copy is the peer: copying the same files (snapshot + replayed stream
	// objects) to a fresh directory, fsyncing each.
	Copy time.Duration
}

var recoverySpec = catalog.TableSpec{Name: "recovery", Columns: []catalog.Column{
	{Name: "k", Type: "bigint", NotNull: true}, {Name: "v", Type: "bytea"}}, PrimaryKey: []string{"k"}, Buckets: 1}

// RunRecovery measures the open time of a primary-key bucket (restore of
// its snapshot plus replay of the changelog after it) with no changelog
// after the snapshot and with ChangelogBytes of it, against copying the
// same bytes on the raw disk.
func RunRecovery(ctx context.Context, w io.Writer, cfg RecoveryConfig) error {
	cfg.fill()
	root, err := os.MkdirTemp(cfg.Dir, "mink-bench-recovery-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	store, err := objstore.NewDir(filepath.Join(root, "objects"))
	if err != nil {
		return err
	}
	log := metalog.NewMemLog()
	opens := &openLog{}
	logger := slog.New(opens)
	cat, err := metalog.Open(ctx, log, metalog.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer cat.Close()
	dataDir := filepath.Join(root, "data")
	start := func() (*buckets.Manager, error) {
		var expect uint64
		cat.Read(func(v *catalog.View) {
			if n, ok := v.Nodes[1]; ok {
				expect = n.Epoch
			}
		})
		out, err := cat.Propose(ctx, catalog.RegisterNode{Node: 1, ExpectEpoch: expect})
		if err != nil {
			return nil, err
		}
		return buckets.NewManager(buckets.Config{Node: 1, NodeEpoch: out.Epoch, Meta: cat, Store: store,
			Live: func(catalog.NodeID) bool { return true }, Logger: logger, SyncInterval: 10 * time.Millisecond,
			DataDir: dataDir, KVSnapshotInterval: 1000 * time.Hour})
	}
	waitOpen := func(m *buckets.Manager, id catalog.BucketID) (*buckets.KVBucket, error) {
		deadline := time.Now().Add(30 * time.Minute)
		for {
			b, err := m.KVBucket(id)
			if err == nil {
				return b, nil
			}
			if !errors.Is(err, buckets.ErrUnavailable) || time.Now().After(deadline) {
				return nil, err
			}
			time.Sleep(time.Millisecond)
		}
	}

	m, err := start()
	if err != nil {
		return err
	}
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		return err
	}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: recoverySpec})
	if err != nil {
		return err
	}
	id := out.Buckets[0]
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		return err
	}
	b, err := waitOpen(m, id)
	if err != nil {
		return err
	}
	rows := cfg.StateBytes / int64(cfg.RowBytes)
	loadStart := time.Now()
	if err := recoveryLoad(ctx, b, cfg, 0, rows, 1); err != nil {
		return err
	}
	load := time.Since(loadStart)
	snapStart := time.Now()
	if err := b.Snapshot(ctx); err != nil {
		return err
	}
	snapTook := time.Since(snapStart)
	fmt.Fprintf(w, "Loaded %d rows of %d B (%.0f MiB of values) in %v (%.1f MiB/s through KVBucket.Write); snapshot in %v.\n\n",
		rows, cfg.RowBytes, float64(rows*int64(cfg.RowBytes))/(1<<20), load.Round(time.Millisecond),
		float64(rows*int64(cfg.RowBytes))/(1<<20)/load.Seconds(), snapTook.Round(time.Millisecond))

	var results []RecoveryResult
	for i, clBytes := range []int64{0, cfg.ChangelogBytes} {
		if clBytes > 0 {
			n := clBytes / int64(2*cfg.RowBytes)
			if err := recoveryLoad(ctx, b, cfg, 0, min(n, rows), uint64(i+2)); err != nil {
				return err
			}
		}
		// Clean hand-over: every entry is in stream objects.
		if err := m.CloseBuckets(ctx); err != nil {
			return err
		}
		m.Close()
		var snaps []catalog.KVSnapshot
		var objects []catalog.StreamObject
		cat.Read(func(v *catalog.View) {
			snaps = append(snaps, v.Buckets[id].Snapshots...)
			objects = append(objects, v.Streams[catalog.StreamID(id)].Objects...)
		})
		snap := snaps[len(snaps)-1]
		res := RecoveryResult{ChangelogBytes: clBytes}
		files, err := recoveryFiles(ctx, store, snap, objects, &res)
		if err != nil {
			return err
		}

		// This measures the restore from the object store: without the
		// local tablet, which the open would reuse (restart measures that).
		if err := os.RemoveAll(filepath.Join(dataDir, "kv")); err != nil {
			return err
		}
		// Write back what the load left dirty, so that neither timed
		// step pays for it.
		syscall.Sync()
		t0 := time.Now()
		if m, err = start(); err != nil {
			return err
		}
		if b, err = waitOpen(m, id); err != nil {
			return err
		}
		res.Open = time.Since(t0)
		res.ReplayRecords = b.End() - snap.LogOffset

		res.Restore = opens.lastRestore()

		syscall.Sync()
		t0 = time.Now()
		if err := copyFiles(files, filepath.Join(root, "peer")); err != nil {
			return err
		}
		res.Copy = time.Since(t0)
		os.RemoveAll(filepath.Join(root, "peer"))
		results = append(results, res)
	}
	m.Close()

	fmt.Fprintln(w, "| changelog after snapshot | snapshot read | replayed | records | restore | open (restore + replay) | raw copy | open vs copy |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %.0f MiB | %.0f MiB | %.0f MiB | %d | %v | %v | %v | %.2f× |\n",
			float64(r.ChangelogBytes)/(1<<20), float64(r.SnapshotBytes)/(1<<20), float64(r.ReplayBytes)/(1<<20), r.ReplayRecords,
			r.Restore.Round(time.Millisecond), r.Open.Round(time.Millisecond), r.Copy.Round(time.Millisecond),
			r.Open.Seconds()/r.Copy.Seconds())
	}
	return nil
}

// recoveryLoad upserts keys [from, to) with random values of round, with
// four writers (their appends pipeline; Write orders them per bucket).
func recoveryLoad(ctx context.Context, b *buckets.KVBucket, cfg RecoveryConfig, from, to int64, round uint64) error {
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	per := int64(cfg.BatchRows)
	next := make(chan int64)
	go func() {
		defer close(next)
		for k := from; k < to; k += per {
			select {
			case next <- k:
			case <-ctx.Done():
				return
			}
		}
	}()
	for wi := 0; wi < writers; wi++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(round, uint64(wi)))
			val := make([]byte, cfg.RowBytes)
			for k0 := range next {
				bld := array.NewRecordBuilder(memory.DefaultAllocator, b.Codec().Schema())
				for k := k0; k < min(k0+per, to); k++ {
					for i := 0; i < len(val); i += 8 {
						x := rng.Uint64()
						for j := 0; j < 8 && i+j < len(val); j++ {
							val[i+j] = byte(x >> (8 * j))
						}
					}
					bld.Field(0).(*array.Int64Builder).Append(k)
					bld.Field(1).(*array.BinaryBuilder).Append(val)
				}
				rec := bld.NewRecordBatch()
				bld.Release()
				ws, err := b.Codec().Writes(kvcodec.OpUpsert, rec)
				rec.Release()
				if err == nil {
					_, _, err = b.Write(ctx, ws)
				}
				if err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// recoveryFiles lists the files an open of snap reads: the snapshot's
// objects and the stream objects after its offset.
func recoveryFiles(ctx context.Context, store *objstore.Dir, snap catalog.KVSnapshot, objects []catalog.StreamObject, res *RecoveryResult) ([]string, error) {
	data, err := store.Get(ctx, snap.Manifest)
	if err != nil {
		return nil, err
	}
	var man kv.Manifest
	if err := json.Unmarshal(data, &man); err != nil {
		return nil, err
	}
	files := []string{filepath.Join(store.Root(), filepath.FromSlash(snap.Manifest))}
	for _, f := range man.Files {
		if f.Key != "" {
			files = append(files, filepath.Join(store.Root(), filepath.FromSlash(f.Key)))
			res.SnapshotBytes += f.Size
		}
	}
	for _, o := range objects {
		if o.End > snap.LogOffset {
			files = append(files, filepath.Join(store.Root(), filepath.FromSlash(o.Key)))
			res.ReplayBytes += o.Size
		}
	}
	return files, nil
}

// copyFiles copies files into dir, fsyncing each: the raw-disk peer.
func copyFiles(files []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, f := range files {
		in, err := os.Open(f)
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("%06d", i)))
		if err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var _ = s3stream.ErrFenced

// openLog is a slog handler that keeps the restore time of the last
// "primary-key bucket open" line and drops everything else.
type openLog struct {
	mu      sync.Mutex
	restore time.Duration
}

func (o *openLog) Enabled(context.Context, slog.Level) bool { return true }

func (o *openLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "primary-key bucket open" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "restore" {
			o.mu.Lock()
			o.restore = a.Value.Duration()
			o.mu.Unlock()
		}
		return true
	})
	return nil
}

func (o *openLog) WithAttrs([]slog.Attr) slog.Handler { return o }
func (o *openLog) WithGroup(string) slog.Handler      { return o }

func (o *openLog) lastRestore() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.restore
}
