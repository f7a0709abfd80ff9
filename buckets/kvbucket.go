package buckets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
)

// KVBucket is a primary-key bucket open on its leader: a KV tablet holding
// the current row of every key, and the bucket's stream carrying the
// changelog (one entry per Write, one offset per change record). The tablet
// holds only acknowledged records; when the bucket opens it is reused from
// the node's data directory if it provably holds a prefix of the changelog
// (reuseKV), else rebuilt from a snapshot, and the changelog after it is
// replayed (DESIGN.md §7, kv package doc).
//
// Write, Get, NewReader, ReadChangelog and Snapshot are safe for concurrent
// use.
type KVBucket struct {
	id     catalog.BucketID
	epoch  uint64
	stream *s3stream.Stream
	m      *Manager
	tablet *kv.Tablet
	pend   *kv.Pending

	// codec is the table's codec as of the newest catalog view the bucket
	// has looked at (refreshCodec): it only ever gains columns, as the
	// table does (ALTER TABLE … ADD COLUMN). Rows and changelog entries
	// stored with fewer columns read with the added columns' missing
	// values.
	codec atomic.Pointer[kvcodec.Codec]
	// checked is closed once the catalog view changes after the codec was
	// last checked against it: until then Codec need not read the view
	// (it is on every point lookup's path).
	checked atomic.Pointer[<-chan struct{}]
	// codecMu serializes codec rebuilds and guards badColumns, the column
	// count of the last catalog spec whose codec could not be built (so
	// that it is logged once).
	codecMu    sync.Mutex
	badColumns int

	// ctx lives as long as the bucket is open: appends are queued and
	// waited for with it, not with a client's context, so that a client
	// giving up never leaves an acknowledged record unapplied.
	ctx    context.Context
	cancel context.CancelFunc

	// wmu orders writes: Changes, the stream append and the hand-over to
	// the applier happen under it, so staging order is stream order.
	wmu     sync.Mutex
	queue   chan *kvAppend // to the applier, in stream order
	last    *kvAppend      // the last append queued
	closing bool           // no more writes: queue is closed

	// failMu guards failed: the first append that failed, or a tablet
	// error. A failed bucket refuses writes and reads and is closed and
	// reopened by the manager (Pending's protocol).
	failMu sync.Mutex
	failed error

	// rmu guards reads against the tablet's Close.
	rmu     sync.RWMutex
	rclosed bool

	// snapMu serializes snapshots and guards snapOffset, the applied
	// offset of the last snapshot committed (or restored).
	snapMu     sync.Mutex
	snapOffset uint64

	applierDone chan struct{}
	loops       sync.WaitGroup
	shutOnce    sync.Once
}

// kvAppend is one Write's stream entry on its way to the tablet.
type kvAppend struct {
	p       *s3stream.PendingAppend
	records []kvcodec.ChangeRecord
	done    chan struct{} // closed when err and base are set
	base    uint64
	err     error
}

// NewKVCodec returns the codec of a primary-key table: the schema is
// sqltypes.Schema of the table's columns, the key columns are
// Spec.PrimaryKey, in order, the columns marked Added read as their
// Missing value in rows stored before they were added, and rows hold the
// dropped columns at their places too (TableSpec.StoredColumns).
func NewKVCodec(spec catalog.TableSpec) (*kvcodec.Codec, error) {
	if len(spec.PrimaryKey) == 0 {
		return nil, fmt.Errorf("table %q has no primary key", spec.Name)
	}
	// The stored columns: rows hold the dropped ones too.
	stored := spec.StoredColumns()
	cols, err := spec.SQLColumns()
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", spec.Name, err)
	}
	idx := map[string]int{}
	created := 0
	for i, c := range stored {
		idx[c.Name] = i
		if !c.Added {
			if created != i {
				return nil, fmt.Errorf("table %q: column %q was created with the table but follows an added column", spec.Name, c.Name)
			}
			created++
		}
	}
	keyCols := make([]int, len(spec.PrimaryKey))
	for i, name := range spec.PrimaryKey {
		j, ok := idx[name]
		if !ok {
			return nil, fmt.Errorf("table %q: primary-key column %q does not exist", spec.Name, name)
		}
		keyCols[i] = j
	}
	c, err := kvcodec.NewTableCodec(cols, created, keyCols)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", spec.Name, err)
	}
	return c, nil
}

// ID is the bucket id.
func (b *KVBucket) ID() catalog.BucketID { return b.id }

// Epoch is the leader epoch the bucket is open at.
func (b *KVBucket) Epoch() uint64 { return b.epoch }

// End is the acknowledged end offset of the changelog.
func (b *KVBucket) End() uint64 { return b.stream.End() }

// Codec is the table's codec (NewKVCodec) as of this node's current
// catalog view: after an ADD COLUMN is applied here, the next call returns
// a codec with the new column. It reads every row and changelog entry the
// bucket holds, including those stored with fewer columns.
func (b *KVBucket) Codec() *kvcodec.Codec { return b.refreshCodec() }

// refreshCodec returns the bucket's codec, first rebuilt from the catalog
// view if the table has columns the codec lacks or renamed one.
func (b *KVBucket) refreshCodec() *kvcodec.Codec {
	c := b.codec.Load()
	if p := b.checked.Load(); p != nil {
		select {
		case <-*p:
		default:
			return c // the view has not changed since the last check
		}
	}
	// Taken before the view is read, so that a change in between makes
	// the next call check again.
	changed := b.m.cfg.Meta.Changed()
	defer b.checked.Store(&changed)
	var cols []catalog.Column
	stored := 0
	b.m.cfg.Meta.Read(func(v *catalog.View) {
		if vb, ok := v.Buckets[b.id]; ok {
			if t, ok := v.Tables[vb.Table]; ok {
				cols, stored = t.Spec.Columns, len(t.Spec.Columns)+len(t.Spec.Dropped)
			}
		}
	})
	if !codecBehind(c, cols, stored) {
		return c
	}
	b.codecMu.Lock()
	defer b.codecMu.Unlock()
	if c = b.codec.Load(); !codecBehind(c, cols, stored) {
		return c
	}
	spec, ok := b.m.primaryKeySpec(b.id)
	if !ok {
		return c
	}
	newer, err := NewKVCodec(spec)
	if err != nil {
		if b.badColumns != len(spec.Columns) {
			b.badColumns = len(spec.Columns)
			b.m.cfg.Logger.Error("the primary-key table's new columns have no codec; the bucket keeps reading and writing its older columns",
				"bucket", b.id, "columns", len(spec.Columns), "err", err)
		}
		return c
	}
	if newer.NumColumns() < c.NumColumns() {
		return c
	}
	b.codec.Store(newer)
	b.m.cfg.Logger.Info("primary-key bucket reads the table's new columns or names", "bucket", b.id, "columns", newer.NumColumns(), "was", c.NumColumns())
	return newer
}

// codecBehind reports whether the table's columns cols (of a newer view,
// with stored columns in all, the dropped ones included) hold a column c
// lacks, or rename one of c's, drop it, change its NOT NULL or its type
// (RENAME COLUMN, DROP COLUMN, ALTER COLUMN: the rows keep their bytes,
// the codec's schema takes the new name, nullability or type, or leaves
// the column out).
func codecBehind(c *kvcodec.Codec, cols []catalog.Column, stored int) bool {
	if stored != c.NumColumns() {
		return stored > c.NumColumns()
	}
	if len(cols) != c.Schema().NumFields() {
		return true
	}
	for i, f := range c.Schema().Fields() {
		if f.Name != cols[i].Name || f.Nullable == cols[i].NotNull {
			return true
		}
		if name, _ := f.Metadata.GetValue(sqltypes.MetadataKey); name != cols[i].Type {
			// The catalog may spell a type otherwise than its Name.
			if typ, err := sqltypes.Parse(cols[i].Type); err == nil && typ.Name() != name {
				return true
			}
		}
	}
	return false
}

// catalogWait bounds how long a write or a changelog read holding columns
// this node's catalog view does not know yet waits for the view to catch
// up (the node that wrote them applied the ADD COLUMN first).
const catalogWait = 10 * time.Second

// codecFor returns the bucket's codec once it has at least ncols columns,
// waiting for the catalog view to learn of them; ErrUnavailable if it does
// not within catalogWait.
func (b *KVBucket) codecFor(ctx context.Context, ncols int) (*kvcodec.Codec, error) {
	if c := b.codec.Load(); c.NumColumns() >= ncols {
		return c, nil
	}
	timer := time.NewTimer(catalogWait)
	defer timer.Stop()
	for {
		// Take the channel before reading the view, so that a change in
		// between is not missed.
		changed := b.m.cfg.Meta.Changed()
		c := b.refreshCodec()
		if c.NumColumns() >= ncols {
			return c, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, fmt.Errorf("bucket %d: %d columns written, this node's catalog knows %d of the table: %w", b.id, ncols, c.NumColumns(), ErrUnavailable)
		}
	}
}

// writeColumns is the most columns a row or expected row of writes holds.
func writeColumns(c *kvcodec.Codec, writes []kvcodec.Write) (int, error) {
	most := 0
	for i, w := range writes {
		for _, row := range [2][]byte{w.Row, w.IfRow} {
			if row == nil {
				continue
			}
			n, err := c.RowColumns(row)
			if err != nil {
				return 0, fmt.Errorf("write %d: %w", i, err)
			}
			most = max(most, n)
		}
	}
	return most, nil
}

// AppliedOffset is the changelog offset the tablet holds the effect of.
func (b *KVBucket) AppliedOffset() uint64 { return b.tablet.AppliedOffset() }

func (b *KVBucket) fail(err error) {
	b.failMu.Lock()
	first := b.failed == nil
	if first {
		b.failed = err
	}
	b.failMu.Unlock()
	if first {
		b.m.cfg.Logger.Error("primary-key bucket failed; closing and reopening it", "bucket", b.id, "leader_epoch", b.epoch, "err", err)
		b.m.Kick()
	}
}

// failure is the error that broke the bucket, or nil.
func (b *KVBucket) failure() error {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	return b.failed
}

// usable reports why the bucket cannot serve, if it cannot.
func (b *KVBucket) usable() error {
	if err := b.failure(); err != nil {
		return fmt.Errorf("bucket %d is reopening after a failure: %w: %v", b.id, ErrUnavailable, err)
	}
	if err := b.stream.Err(); err != nil {
		return fmt.Errorf("bucket %d: %w: %v", b.id, ErrUnavailable, err)
	}
	return nil
}

// Write turns writes into changelog records (kv.Pending: reading the
// current rows, including this bucket's earlier writes not yet
// acknowledged), appends them as one stream entry, waits until it is
// durable, applies it to the tablet and returns the records and the offset
// of the first one.
//
// Writes are ordered per bucket: concurrent calls compute their changes one
// at a time and append in that order; their appends are pipelined. A
// *kv.DuplicateKeyError or *kv.ConflictError, and any error returned before
// the append, means nothing was appended. An error after the append was
// queued wraps ErrUnknownOutcome: the records may still become durable
// (and then are applied when the bucket reopens). A batch whose writes
// change nothing appends nothing and returns no records once every earlier
// write it read is acknowledged. An empty writes list returns (nil, End(), nil).
//
// Rows may hold any prefix of the table's columns that includes the
// created ones (a writer that has not learned of an added column yet): they
// are stored as they are and read with the missing values of the columns
// they lack. A conditional write's IfRow matches the current row when both
// read the same (kv.ChangesWith). A row holding columns this node's catalog
// does not know yet waits for it to learn of them (catalogWait), then
// fails with ErrUnavailable, nothing appended.
func (b *KVBucket) Write(ctx context.Context, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, uint64, error) {
	if len(writes) == 0 {
		return nil, b.End(), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	ncols, err := writeColumns(b.codec.Load(), writes)
	if err != nil {
		return nil, 0, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	if _, err := b.codecFor(ctx, ncols); err != nil {
		return nil, 0, err
	}
	if b.m != nil {
		if err := b.m.awaitLease(ctx, b.id); err != nil {
			return nil, 0, err
		}
	}
	b.wmu.Lock()
	if b.closing {
		b.wmu.Unlock()
		return nil, 0, fmt.Errorf("bucket %d is closing on this node: %w", b.id, ErrUnavailable)
	}
	if err := b.usable(); err != nil {
		b.wmu.Unlock()
		return nil, 0, err
	}
	if b.m != nil {
		// Checked again under wmu: a wait below would hold writers up.
		if err := b.m.leaseHeld(b.id); err != nil {
			b.wmu.Unlock()
			return nil, 0, err
		}
	}
	// The codec only gains columns, so it still reads every row of writes.
	codec := b.codec.Load()
	records, err := b.pend.Changes(codec, writes)
	if err != nil {
		b.wmu.Unlock()
		return nil, 0, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	if len(records) == 0 {
		last := b.last
		b.wmu.Unlock()
		if last != nil {
			// The outcome was computed from the earlier writes; it stands
			// only if they are acknowledged.
			select {
			case <-last.done:
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
		}
		if err := b.failure(); err != nil {
			return nil, 0, fmt.Errorf("bucket %d: a write this one read may have failed: %w", b.id, ErrUnavailable)
		}
		return nil, b.End(), nil
	}
	payload, err := codec.EncodeChanges(records)
	if err == nil {
		var p *s3stream.PendingAppend
		if p, err = b.stream.AppendAsync(b.ctx, payload, uint32(len(records))); err == nil {
			a := &kvAppend{p: p, records: records, done: make(chan struct{})}
			b.last = a
			b.queue <- a
			b.wmu.Unlock()
			select {
			case <-a.done:
				if a.err != nil {
					return nil, 0, a.err
				}
				return records, a.base, nil
			case <-ctx.Done():
				return nil, 0, fmt.Errorf("bucket %d: %w: %w", b.id, ErrUnknownOutcome, ctx.Err())
			}
		}
	}
	// Not queued, so not appended; but the batch is staged on top of the
	// earlier ones, so the bucket must reopen (Pending's protocol). The
	// applier, which alone applies and discards, stops applying.
	b.fail(err)
	b.wmu.Unlock()
	return nil, 0, fmt.Errorf("bucket %d: nothing appended: %w: %v", b.id, ErrUnavailable, err)
}

// applier waits for the queued appends in stream order and applies each
// acknowledged one to the tablet. It alone calls Pending.Apply and
// Pending.Discard, so they never race. Once the bucket has failed it
// applies nothing more: it still waits for each append, to tell its writer
// whether it is durable (the reopened bucket replays it).
func (b *KVBucket) applier() {
	defer close(b.applierDone)
	for a := range b.queue {
		base, err := a.p.Wait(b.ctx)
		switch {
		case err != nil:
			b.fail(err)
			b.pend.Discard()
			a.err = fmt.Errorf("bucket %d: %w: %v", b.id, ErrUnknownOutcome, err)
		case b.failure() != nil:
			b.pend.Discard()
			a.base = base
		default:
			a.base = base
			if err := b.pend.Apply(a.records, base+uint64(len(a.records))); err != nil {
				// Durable, so the write succeeded; the tablet is rebuilt
				// when the bucket reopens.
				b.fail(fmt.Errorf("apply offsets [%d, %d): %w", base, base+uint64(len(a.records)), err))
			}
		}
		close(a.done)
	}
}

// Get returns the row of key (encoded by Codec().AppendKeyOf) in the
// acknowledged state.
func (b *KVBucket) Get(key []byte) ([]byte, bool, error) {
	b.rmu.RLock()
	defer b.rmu.RUnlock()
	if b.rclosed {
		return nil, false, fmt.Errorf("bucket %d is closed on this node: %w", b.id, ErrUnavailable)
	}
	if err := b.usable(); err != nil {
		return nil, false, err
	}
	return b.tablet.Get(key)
}

// NewReader returns a consistent snapshot of the acknowledged state. The
// caller closes it, soon: the bucket's tablet waits for its readers before
// it closes.
func (b *KVBucket) NewReader() (*kv.Reader, error) {
	b.rmu.RLock()
	defer b.rmu.RUnlock()
	if b.rclosed {
		return nil, fmt.Errorf("bucket %d is closed on this node: %w", b.id, ErrUnavailable)
	}
	if err := b.usable(); err != nil {
		return nil, err
	}
	return b.tablet.NewReader()
}

// ReadChangelog returns the changelog batches overlapping record offsets
// [from, to), up to the acknowledged end, all of one schema: the
// ChangelogSchema (_change_type, then the table's columns) of the codec
// that Codec returns during the call, entries written before columns were
// added widened with their missing values. The first batch may start
// before from. The caller releases them.
func (b *KVBucket) ReadChangelog(ctx context.Context, from, to uint64) ([]Batch, error) {
	to = min(to, b.stream.End())
	out, err := readBucket(ctx, b.m.cfg.Meta, b.m.node.Reader(), b.m.batches, b.stream, catalog.StreamID(b.id), from, to)
	if err != nil {
		return nil, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	ncols := 0
	for _, batch := range out {
		ncols = max(ncols, int(batch.Record.NumCols())-1)
	}
	codec := b.refreshCodec()
	if ncols > codec.NumColumns() {
		if codec, err = b.codecFor(ctx, ncols); err != nil {
			ReleaseBatches(out)
			return nil, err
		}
	}
	for i, batch := range out {
		wide, err := codec.WidenChanges(nil, batch.Record)
		if err != nil {
			ReleaseBatches(out[i:])
			ReleaseBatches(out[:i])
			return nil, fmt.Errorf("bucket %d: changelog entry at offset %d: %w", b.id, batch.Offset, err)
		}
		batch.Record.Release()
		out[i].Record = wide
	}
	return out, nil
}

// Snapshot uploads a snapshot of the tablet and commits it
// (CommitKVSnapshot under the bucket's leader epoch), unless the tablet
// has not advanced since the last one. It deletes nothing: a snapshot whose
// commit fails leaves objects that garbage collection removes later.
func (b *KVBucket) Snapshot(ctx context.Context) error {
	b.snapMu.Lock()
	defer b.snapMu.Unlock()
	if b.tablet.AppliedOffset() <= b.snapOffset {
		return nil
	}
	var retained []catalog.KVSnapshot
	b.m.cfg.Meta.Read(func(v *catalog.View) {
		if vb, ok := v.Buckets[b.id]; ok {
			retained = append(retained, vb.Snapshots...)
		}
	})
	start := time.Now()
	res, err := b.tablet.Snapshot(ctx, b.m.cfg.Store, kv.SnapshotOptions{Bucket: b.id, LeaderEpoch: b.epoch, Retained: retained})
	if err != nil {
		return fmt.Errorf("bucket %d: %w", b.id, err)
	}
	if _, err := b.m.cfg.Meta.Propose(ctx, res.Record); err != nil {
		return fmt.Errorf("bucket %d: commit snapshot %d at offset %d: %w", b.id, res.Record.SnapshotID, res.Record.LogOffset, err)
	}
	b.snapOffset = res.Record.LogOffset
	b.m.cfg.Logger.Info("KV snapshot committed", "bucket", b.id, "leader_epoch", b.epoch, "snapshot", res.Record.SnapshotID,
		"log_offset", res.Record.LogOffset, "uploaded_files", res.UploadedFiles, "uploaded_bytes", res.UploadedBytes,
		"reused_files", res.ReusedFiles, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// snapshotLoop snapshots the tablet every interval while it advances.
func (b *KVBucket) snapshotLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		if b.failure() != nil {
			continue
		}
		if err := b.Snapshot(b.ctx); err != nil && b.ctx.Err() == nil {
			b.m.cfg.Logger.Warn("KV snapshot failed; will retry", "bucket", b.id, "err", err)
		}
	}
}

// readerWait bounds how long closing a bucket waits for its readers.
const readerWait = 30 * time.Second

// shutdown stops the bucket's goroutines and closes its tablet. With clean,
// the stream is closed already (every append finished) and queued appends
// are applied; otherwise they are abandoned (the bucket's context ends).
// With keepDir (the node is stopping) the tablet's directory stays for the
// node's next start to reuse (reuseKV), unless the bucket failed; otherwise
// (the bucket moved away, or failed and reopens) it is removed.
func (b *KVBucket) shutdown(clean, keepDir bool) {
	b.shutOnce.Do(func() {
		b.wmu.Lock()
		b.closing = true
		close(b.queue)
		b.wmu.Unlock()
		if !clean {
			b.cancel()
		}
		<-b.applierDone
		b.cancel()
		b.loops.Wait()
		b.rmu.Lock()
		b.rclosed = true
		b.rmu.Unlock()
		deadline := time.Now().Add(readerWait)
		for b.tablet.OpenReaders() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := b.tablet.OpenReaders(); n > 0 {
			b.m.cfg.Logger.Error("closing a KV tablet with readers still open", "bucket", b.id, "readers", n)
		}
		closeTablet := b.tablet.Close
		if b.m.crashTablets.Load() {
			closeTablet = b.tablet.Crash
		}
		if err := closeTablet(); err != nil {
			b.m.cfg.Logger.Warn("closing KV tablet failed (it is rebuilt at the next open)", "bucket", b.id, "err", err)
		}
		if keepDir && b.failure() == nil {
			return
		}
		if err := os.RemoveAll(b.tablet.Dir()); err != nil {
			b.m.cfg.Logger.Warn("removing a closed KV tablet's directory failed", "bucket", b.id, "dir", b.tablet.Dir(), "err", err)
		}
	})
}

// ErrWrongKind: a log bucket was asked for as a primary-key bucket, or
// the other way round.
var ErrWrongKind = errors.New("wrong kind of bucket")

// errIsLogBucket and errIsKVBucket say a caller asked for the wrong kind.
var (
	errIsKVBucket  = fmt.Errorf("is a primary-key bucket (use Manager.KVBucket): %w", ErrWrongKind)
	errIsLogBucket = fmt.Errorf("is a log bucket, its table has no primary key (use Manager.Bucket): %w", ErrWrongKind)
)
