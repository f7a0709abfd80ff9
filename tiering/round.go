package tiering

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"golang.org/x/sync/errgroup"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/plan"
)

// Batch is a run of rows read from a bucket's stream: row i of Record has
// offset Offset+i.
type Batch struct {
	Offset uint64
	Record arrow.RecordBatch
}

// Source reads committed stream data. The server's implementation is
// buckets.Manager.ReadCommitted, which reads stream objects and can be
// served by any node.
type Source interface {
	// ReadCommitted returns the batches overlapping [from, to) of bucket,
	// in offset order; the caller releases their records. Batches may
	// extend beyond the range.
	ReadCommitted(ctx context.Context, bucket catalog.BucketID, from, to uint64) ([]Batch, error)
}

// Metadata is the metadata log as tiering uses it (metalog.Catalog).
type Metadata interface {
	Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error)
	Read(fn func(v *catalog.View))
}

// ErrFenced: the round's coordinator epoch is no longer current. A round
// fenced before its lake commit left only garbage files; one fenced after it
// left a lake snapshot that the next holder's first round records (repair).
var ErrFenced = errors.New("tiering round fenced: coordinator epoch is stale")

// Config configures a Tierer.
type Config struct {
	Store objstore.Store
	// StoreURL is the store's URL (the --object-store value); Iceberg
	// metadata records absolute locations under it.
	StoreURL string
	Meta     Metadata
	Source   Source
	Logger   *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Tierer runs tiering rounds. It holds no state between rounds beyond its
// configuration: everything a round needs is in the view and the lake, which
// is what lets a new coordinator simply start rounds. Round is safe to call
// concurrently for different tables; rounds of one table must not overlap
// (the second would fail with ErrLakeConflict, harmlessly).
type Tierer struct {
	cfg  Config
	lake *Lake
}

// New returns a Tierer.
func New(cfg Config) *Tierer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tierer{cfg: cfg, lake: NewLake(cfg.Store, cfg.StoreURL)}
}

// Lake returns the Tierer's lake.
func (t *Tierer) Lake() *Lake { return t.lake }

// RoundResult says what one round did.
type RoundResult struct {
	Table catalog.TableID
	// From and To are the per-bucket ranges tiered by this round (only
	// buckets with new rows).
	From, To map[catalog.BucketID]uint64
	Rows     int64
	Files    int
	Bytes    int64 // Parquet bytes written
	// BytesRead is, for a primary-key table, the Parquet bytes of the
	// bucket files the round read back and replaced.
	BytesRead int64
	// Committed: a new lake snapshot (SnapshotID, Sequence) was committed.
	Committed  bool
	SnapshotID int64
	Sequence   uint64
	// Repaired: the metadata log was behind the lake (a lake commit whose
	// CommitTieringRound was lost or fenced) and was brought up to it.
	Repaired bool
	// Retired are the buckets the table no longer has (TRUNCATE, dropped
	// partitions) whose rows the round's snapshot deleted from the lake;
	// FilesDeleted is the number of their data files it removed.
	Retired      []catalog.BucketID
	FilesDeleted int
}

// Round tiers table id once under coordinator epoch epoch: it freezes each
// bucket's committed end, writes [tiered, end) of every bucket as Parquet,
// commits one lake snapshot whose summary holds the new offsets, and records
// CommitTieringRound. It first repairs the log from the lake if the last
// lake commit was not recorded. A round with no new rows commits nothing.
func (t *Tierer) Round(ctx context.Context, id catalog.TableID, epoch uint64) (RoundResult, error) {
	return t.RoundWithProgress(ctx, id, epoch, nil)
}

// Progress is one step of a round, reported as it happens.
type Progress struct {
	// Stage is "repaired" (the log recorded a lake snapshot it had
	// missed), "planned" (From/To of every bucket with new rows are
	// frozen), "retired" (the files of buckets the table no longer has
	// are listed for deletion: Buckets, Files), "bucket" (one bucket's
	// files are written: Bucket, From, To,
	// Rows, Files, Bytes), "committed" (the lake snapshot SnapshotID is
	// committed) or "recorded" (CommitTieringRound was accepted).
	Stage      string                         `json:"stage"`
	Bucket     catalog.BucketID               `json:"bucket,omitempty"`
	From       uint64                         `json:"from,omitempty"`
	To         uint64                         `json:"to,omitempty"`
	Ranges     map[catalog.BucketID][2]uint64 `json:"ranges,omitempty"`
	Buckets    []catalog.BucketID             `json:"buckets,omitempty"`
	Rows       int64                          `json:"rows,omitempty"`
	Files      int                            `json:"files,omitempty"`
	Bytes      int64                          `json:"bytes,omitempty"`
	SnapshotID int64                          `json:"snapshot_id,omitempty"`
	Sequence   uint64                         `json:"sequence,omitempty"`
}

// RoundWithProgress is Round, calling progress (if not nil) after each step.
func (t *Tierer) RoundWithProgress(ctx context.Context, id catalog.TableID, epoch uint64, progress func(Progress)) (RoundResult, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	res := RoundResult{Table: id}
	var (
		p   plan.TableRound
		err error
	)
	t.cfg.Meta.Read(func(v *catalog.View) { p, err = plan.Round(v, id) })
	if err != nil {
		return res, err
	}
	if p.Epoch != epoch {
		return res, fmt.Errorf("%w: round of table %d under epoch %d, the coordinator is at %d", ErrFenced, id, epoch, p.Epoch)
	}
	ls, err := newLakeSchema(p.Spec)
	if err != nil {
		return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
	}
	tbl, err := t.lake.open(ctx, id, ls)
	if err != nil {
		return res, err
	}
	lakeState, err := stateOf(tbl)
	if err != nil {
		return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
	}
	lake := plan.Lake{SnapshotID: lakeState.SnapshotID, Sequence: lakeState.Sequence, Offsets: lakeState.Offsets}

	// The decision is plan's (TableRound.Decide); the round reads what it
	// needs for it and carries it out.
	if err := p.CheckLake(lake); err != nil {
		return res, err
	}
	var current map[catalog.BucketID][]string
	if p.NeedsFiles(lake) {
		if current, err = bucketFiles(ctx, tbl); err != nil {
			return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
		}
	}
	d := p.Decide(lake, current)
	res.From, res.To = d.From, d.To
	if d.Repair {
		recorded, err := t.record(ctx, p, epoch, lake.Offsets, lake.SnapshotID, lake.Sequence)
		if err != nil {
			return res, fmt.Errorf("repair the tiered offsets of table %q from lake snapshot %d: %w", p.Spec.Name, lake.SnapshotID, err)
		}
		if recorded {
			res.Repaired = true
			progress(Progress{Stage: "repaired", SnapshotID: lake.SnapshotID, Sequence: lake.Sequence})
			t.cfg.Logger.Info("tiering: recorded a lake snapshot the log had missed",
				"table", p.Spec.Name, "snapshot", lake.SnapshotID, "sequence", lake.Sequence)
		}
	}
	if !d.Commit {
		return res, nil
	}
	if len(d.Retired) > 0 {
		res.Retired, res.FilesDeleted = d.Retired, len(d.RetiredFiles)
		progress(Progress{Stage: "retired", Buckets: d.Retired, Files: len(d.RetiredFiles)})
	}
	ranges := map[catalog.BucketID][2]uint64{}
	for b, to := range res.To {
		ranges[b] = [2]uint64{res.From[b], to}
	}
	progress(Progress{Stage: "planned", Ranges: ranges})
	// Columns added since the lake was last written join its schema
	// before files with them are added.
	if tbl, err = t.lake.evolve(ctx, id, tbl, ls); err != nil {
		return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
	}

	pk := len(p.Spec.PrimaryKey) > 0
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	var (
		files   []writtenFile
		deleted []string
	)
	if pk {
		var pp pkPlan
		pp, err = t.rewritePK(ctx, current, ls, p, res.From, res.To, epoch, hex.EncodeToString(token), progress)
		files, deleted, res.BytesRead = pp.files, pp.deleted, pp.read
	} else {
		files, err = t.writeBuckets(ctx, ls, p, res.From, res.To, epoch, hex.EncodeToString(token), progress)
	}
	if err != nil {
		return res, err
	}
	var locations []string
	for _, f := range files {
		locations = append(locations, t.lake.Location(f.key))
		res.Files++
		res.Bytes += f.size
	}
	for b, to := range res.To {
		res.Rows += int64(to - res.From[b])
	}

	// Heartbeat: do not commit to the lake under a stale epoch. This only
	// narrows the window; the fence is CommitTieringRound's epoch check and
	// the create-only metadata commit.
	if err := t.checkEpoch(epoch); err != nil {
		return res, err
	}

	offsets := d.Offsets
	deleted = append(deleted, d.RetiredFiles...)
	tx := tbl.NewTransaction()
	props := iceberg.Properties{OffsetsProperty: encodeOffsets(offsets), EpochProperty: strconv.FormatUint(epoch, 10)}
	if pk || len(deleted) > 0 {
		if err := replaceFiles(ctx, tx, tbl, deleted, locations, props); err != nil {
			return res, fmt.Errorf("table %q: replace %d lake files with %d: %w", p.Spec.Name, len(deleted), len(locations), err)
		}
	} else if err := tx.AddFiles(ctx, locations, props, true); err != nil {
		return res, fmt.Errorf("table %q: add %d files to the lake: %w", p.Spec.Name, len(locations), err)
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("table %q: commit lake snapshot: %w", p.Spec.Name, err)
	}
	snap := committed.CurrentSnapshot()
	if snap == nil {
		panic(fmt.Sprintf("tiering: lake commit of table %d left no current snapshot (metadata %s)", id, committed.MetadataLocation()))
	}
	res.Committed, res.SnapshotID, res.Sequence = true, snap.SnapshotID, uint64(snap.SequenceNumber)
	progress(Progress{Stage: "committed", SnapshotID: res.SnapshotID, Sequence: res.Sequence, Rows: res.Rows, Files: res.Files, Bytes: res.Bytes})
	if _, err := t.record(ctx, p, epoch, offsets, res.SnapshotID, res.Sequence); err != nil {
		return res, fmt.Errorf("table %q: lake snapshot %d is committed but not recorded (the next round repairs it): %w",
			p.Spec.Name, res.SnapshotID, err)
	}
	progress(Progress{Stage: "recorded", SnapshotID: res.SnapshotID, Sequence: res.Sequence})
	return res, nil
}

// record proposes the CommitTieringRound of a lake snapshot with offsets
// (plan.TableRound.Record). It records nothing, and reports false, when
// offsets name none of the table's current buckets (a partitioned table
// without partitions).
func (t *Tierer) record(ctx context.Context, p plan.TableRound, epoch uint64, offsets map[catalog.BucketID]uint64, snapshotID int64, seq uint64) (bool, error) {
	rec, ok := p.Record(offsets, snapshotID, seq, epoch, t.cfg.Now())
	if !ok {
		return false, nil
	}
	o, err := t.cfg.Meta.Propose(ctx, rec)
	if err == nil {
		err = o.Err
	}
	if errors.Is(err, catalog.ErrStaleEpoch) {
		return false, fmt.Errorf("%w: %v", ErrFenced, err)
	}
	return err == nil, err
}

// writeBuckets writes the buckets' ranges, up to GOMAXPROCS buckets at a
// time (Parquet encoding and zstd are CPU-bound), and returns the files in
// bucket order. The first failure cancels the others.
func (t *Tierer) writeBuckets(ctx context.Context, ls *lakeSchema, p plan.TableRound, from, to map[catalog.BucketID]uint64,
	epoch uint64, token string, progress func(Progress)) ([]writtenFile, error) {
	buckets := slices.Sorted(maps.Keys(to))
	files := make([][]writtenFile, len(buckets))
	var progressMu sync.Mutex
	err := forEachBucket(ctx, buckets, func(ctx context.Context, i int, b catalog.BucketID) error {
		fs, rows, err := t.writeBucket(ctx, ls, p, b, from[b], to[b], epoch, token)
		if err != nil {
			return fmt.Errorf("table %q bucket %d [%d, %d): %w", p.Spec.Name, b, from[b], to[b], err)
		}
		files[i] = fs
		ev := Progress{Stage: "bucket", Bucket: b, From: from[b], To: to[b], Rows: rows, Files: len(fs)}
		for _, f := range fs {
			ev.Bytes += f.size
		}
		progressMu.Lock()
		progress(ev)
		progressMu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []writtenFile
	for _, fs := range files {
		out = append(out, fs...)
	}
	return out, nil
}

// checkEpoch returns ErrFenced when epoch is not the view's coordinator
// epoch.
func (t *Tierer) checkEpoch(epoch uint64) error {
	var now uint64
	t.cfg.Meta.Read(func(v *catalog.View) { now = v.Coordinator.Epoch })
	if now != epoch {
		return fmt.Errorf("%w: coordinator epoch is %d, the round's %d", ErrFenced, now, epoch)
	}
	return nil
}

type writtenFile struct {
	key  string
	size int64
}

// writeBucket writes rows [from, to) of bucket b as Parquet files under the
// table's data prefix. File names carry the bucket, the range, the epoch and
// a per-round token, so a retried round never collides with the garbage of
// a failed one.
func (t *Tierer) writeBucket(ctx context.Context, ls *lakeSchema, p plan.TableRound, b catalog.BucketID, from, to, epoch uint64, token string) ([]writtenFile, int64, error) {
	dir := LakePrefix(p.Table) + "data/"
	if p.Spec.PartitionBy != "" {
		dir += url.PathEscape(p.Spec.PartitionBy) + "=" + url.PathEscape(p.Partition[b]) + "/"
	}
	// One file per fileRows rows, read, encoded and written one at a time:
	// a round's memory is bounded by a file's worth of rows, whatever the
	// backlog.
	var out []writtenFile
	for lo := from; lo < to; {
		// Heartbeat before each file: a round whose coordinator epoch is
		// no longer current stops writing garbage early.
		if err := t.checkEpoch(epoch); err != nil {
			return nil, 0, err
		}
		hi := min(lo+uint64(fileRows), to)
		files, err := t.writeRange(ctx, ls, b, lo, hi, func(i int) string {
			if i == 0 {
				return fmt.Sprintf("%sb%d-%d-%d-e%d-%s.parquet", dir, b, lo, hi, epoch, token)
			}
			return fmt.Sprintf("%sb%d-%d-%d-e%d-%s-%d.parquet", dir, b, lo, hi, epoch, token, i)
		})
		if err != nil {
			return nil, 0, err
		}
		out = append(out, files...)
		lo = hi
	}
	return out, int64(to - from), nil
}

func (t *Tierer) writeRange(ctx context.Context, ls *lakeSchema, b catalog.BucketID, from, to uint64, key func(int) string) ([]writtenFile, error) {
	batches, err := t.cfg.Source.ReadCommitted(ctx, b, from, to)
	if err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	defer func() {
		for _, bt := range batches {
			bt.Record.Release()
		}
	}()
	// A batch written before a column was added lacks it (every batch
	// holds a prefix of the table's columns): the lake file gets the
	// column's missing value.
	for i, bt := range batches {
		wide, err := sqltypes.Widen(bt.Record, ls.table, nil)
		if err != nil {
			return nil, fmt.Errorf("stream batch at offset %d: %w", bt.Offset, err)
		}
		bt.Record.Release()
		batches[i].Record = wide
	}
	contents, err := encodeParquet(ls, b, batches, from, to)
	if err != nil {
		return nil, err
	}
	var out []writtenFile
	for i, data := range contents {
		k := key(i)
		if err := t.cfg.Store.PutIfAbsent(ctx, k, data); err != nil {
			return nil, fmt.Errorf("write lake file %s: %w", k, err)
		}
		out = append(out, writtenFile{key: k, size: int64(len(data))})
	}
	return out, nil
}

// forEachBucket runs fn for each of buckets, up to GOMAXPROCS at a time
// (Parquet decoding, encoding and zstd are CPU-bound). The first failure
// cancels the others' context and is returned: the root cause, not a
// sibling's cancellation.
func forEachBucket(ctx context.Context, buckets []catalog.BucketID, fn func(ctx context.Context, i int, b catalog.BucketID) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.GOMAXPROCS(0)))
	for i, b := range buckets {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fn(ctx, i, b)
		})
	}
	return g.Wait()
}
