package buckets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
)

// isPrimaryKey reports whether bucket b belongs to a primary-key table.
func isPrimaryKey(v *catalog.View, b *catalog.Bucket) bool {
	t, ok := v.Tables[b.Table]
	return ok && len(t.Spec.PrimaryKey) > 0
}

// primaryKeySpec returns the table spec of bucket id if its table has a
// primary key.
func (m *Manager) primaryKeySpec(id catalog.BucketID) (catalog.TableSpec, bool) {
	var spec catalog.TableSpec
	var ok bool
	m.cfg.Meta.Read(func(v *catalog.View) {
		if b, found := v.Buckets[id]; found && isPrimaryKey(v, b) {
			spec, ok = v.Tables[b.Table].Spec, true
		}
	})
	return spec, ok
}

// KVBucket returns the primary-key bucket if this node leads it and has it
// open (restored and replayed), a *NotLeaderError naming the leader,
// ErrUnavailable (no leader yet, opening, restoring, replaying, or
// reopening after a failed append) or ErrNoSuchBucket. A log bucket is an
// error: use Bucket.
func (m *Manager) KVBucket(id catalog.BucketID) (*KVBucket, error) {
	since := time.Now()
	m.mu.Lock()
	b := m.mu.kv[id]
	lost := m.mu.unrecoverable[id].err
	m.mu.Unlock()
	var err error
	m.cfg.Meta.Read(func(v *catalog.View) {
		vb, ok := v.Buckets[id]
		switch {
		case !ok:
			err = fmt.Errorf("bucket %d: %w", id, ErrNoSuchBucket)
		case !isPrimaryKey(v, vb):
			err = fmt.Errorf("bucket %d %w", id, errIsLogBucket)
		case vb.Leader == 0:
			err = fmt.Errorf("bucket %d has no leader yet: %w", id, ErrUnavailable)
		case vb.Leader != m.cfg.Node:
			nle := &NotLeaderError{Bucket: id, Leader: vb.Leader}
			if n, ok := v.Nodes[vb.Leader]; ok {
				nle.To = n.Addrs.Flight
			}
			err = nle
		case b == nil && lost != nil:
			err = unrecoverableError(id, lost)
		case b == nil || b.epoch != vb.LeaderEpoch:
			err = fmt.Errorf("bucket %d is opening on this node (restoring its tablet and replaying its changelog): %w", id, ErrUnavailable)
			if last, ok := m.kvOpenErrs.Load(id); ok {
				err = fmt.Errorf("%w; its last open attempt failed: %w", err, last.(error))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if err := b.usable(); err != nil {
		return nil, err
	}
	b.rmu.RLock()
	closed := b.rclosed
	b.rmu.RUnlock()
	if closed {
		return nil, fmt.Errorf("bucket %d is closing on this node: %w", id, ErrUnavailable)
	}
	if err := m.readable(id, since); err != nil {
		return nil, err
	}
	return b, nil
}

// kvDir is the tablet directory of bucket id at leader epoch epoch.
func (m *Manager) kvDir(id catalog.BucketID, epoch uint64) string {
	return filepath.Join(m.cfg.DataDir, "kv", fmt.Sprintf("%d-%d", id, epoch))
}

// removeKVDirs removes every tablet directory of bucket id but keep's (""
// for none): what an open does not reuse it rebuilds.
func (m *Manager) removeKVDirs(id catalog.BucketID, keep string) error {
	entries, err := os.ReadDir(filepath.Join(m.cfg.DataDir, "kv"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("%d-", id)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && filepath.Join(m.cfg.DataDir, "kv", e.Name()) != keep {
			if err := os.RemoveAll(filepath.Join(m.cfg.DataDir, "kv", e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// openKV opens a primary-key bucket: the stream at the leader epoch, then
// the tablet restored from the newest usable snapshot (or, when none is
// usable and the changelog is trimmed, from the lake) and the changelog
// replayed from its offset. The bucket serves only after that. A failed
// restore is retried (the stream stays open at this epoch) until it works,
// the bucket moves away, or the manager closes.
func (m *Manager) openKV(ctx context.Context, a action, spec catalog.TableSpec) error {
	if _, err := NewKVCodec(spec); err != nil {
		return fmt.Errorf("open bucket %d: %w", a.bucket, err)
	}
	// Read before the open: once it succeeds, the view shows this open.
	prior := m.readPriorStream(a.bucket, a.epoch)
	stream, err := m.node.OpenStream(ctx, catalog.StreamID(a.bucket), a.epoch)
	if err != nil {
		return err
	}
	backoff := 100 * time.Millisecond
	for {
		// Every attempt takes the table's columns from the current view:
		// the changelog may hold entries of columns added since the last.
		codec, err := m.kvCodec(a.bucket, spec)
		var b *KVBucket
		if err == nil {
			b, err = m.restoreKV(ctx, a.bucket, a.epoch, codec, stream, prior)
		}
		if err != nil {
			m.kvOpenErrs.Store(a.bucket, err)
		} else {
			m.kvOpenErrs.Delete(a.bucket)
		}
		if err == nil {
			m.mu.Lock()
			if m.mu.closed {
				m.mu.Unlock()
				b.shutdown(false, true)
				return nil
			}
			m.mu.kv[a.bucket] = b
			m.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		m.cfg.Logger.Error("opening primary-key bucket failed; retrying", "bucket", a.bucket, "leader_epoch", a.epoch, "err", err)
		var stillLeader bool
		m.cfg.Meta.Read(func(v *catalog.View) {
			vb, ok := v.Buckets[a.bucket]
			stillLeader = ok && vb.Leader == m.cfg.Node && vb.LeaderEpoch == a.epoch
		})
		if !stillLeader {
			m.kvOpenErrs.Delete(a.bucket)
			if cerr := stream.Close(ctx); cerr != nil && !errors.Is(cerr, s3stream.ErrFenced) {
				return fmt.Errorf("open bucket %d: %w; then closing its stream: %v", a.bucket, err, cerr)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// kvCodec returns the codec of bucket id's table in the current view, or
// of spec if the view no longer has it.
func (m *Manager) kvCodec(id catalog.BucketID, spec catalog.TableSpec) (*kvcodec.Codec, error) {
	if current, ok := m.primaryKeySpec(id); ok {
		spec = current
	}
	c, err := NewKVCodec(spec)
	if err != nil {
		return nil, fmt.Errorf("open bucket %d: %w", id, err)
	}
	return c, nil
}

// ErrStateLost matches a *StateLostError with errors.Is.
var ErrStateLost = errors.New("primary-key bucket state lost")

// StateLostError: a primary-key bucket cannot be restored, because none of
// its retained KV snapshots is usable (Skipped holds why, one error per
// snapshot; none when the view has no snapshot) and its changelog is
// trimmed to Start, above the offset Restored that a restore could start
// from (0 for a full replay). The bucket stays Unavailable: it never serves
// a partial state. Repair a snapshot's objects (or restore them from a
// backup) and the next open attempt succeeds.
type StateLostError struct {
	Bucket   catalog.BucketID
	Restored uint64
	Start    uint64
	Skipped  []error
	// Lake says why the lake could not stand in (not tiered, no lake
	// reader, or the read failed).
	Lake error
}

func (e *StateLostError) Error() string {
	msg := fmt.Sprintf("bucket %d cannot be restored: no retained KV snapshot is usable and its changelog is trimmed to offset %d, so it cannot be replayed from offset %d",
		e.Bucket, e.Start, e.Restored)
	if len(e.Skipped) > 0 {
		why := make([]string, len(e.Skipped))
		for i, err := range e.Skipped {
			why[i] = err.Error()
		}
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	if e.Lake != nil {
		msg += fmt.Sprintf("; nor restored from the lake: %v", e.Lake)
	}
	return msg
}

// LakeRows reads the rows of a tiered primary-key bucket from the lake:
// every row of bucket in lake snapshot snapshot of table, in schema (the
// bucket's KV codec schema), batch by batch; fn must not keep a batch. The
// lake snapshot that the view records with the table's tiered offsets
// holds the bucket's state at its tiered offset (one row per key).
type LakeRows func(ctx context.Context, table catalog.TableID, snapshot int64, bucket catalog.BucketID, schema *arrow.Schema, fn func(arrow.RecordBatch) error) error

// restoreFromLake loads the empty tablet t with bucket id's rows from the
// lake snapshot recorded in the view and returns the tiered offset they
// stand for; the changelog is replayed from there. It is the last resort
// when no retained snapshot is usable and the changelog is trimmed (a trim
// never passes the tiered offset of a table with tiering on).
func (m *Manager) restoreFromLake(ctx context.Context, id catalog.BucketID, codec *kvcodec.Codec, t *kv.Tablet) (uint64, error) {
	if m.cfg.KVLake == nil {
		return 0, errors.New("this node reads no lake")
	}
	var (
		table    catalog.TableID
		snapshot int64
		tiered   uint64
		tiering  bool
	)
	m.cfg.Meta.Read(func(v *catalog.View) {
		if b, ok := v.Buckets[id]; ok {
			if tb, ok := v.Tables[b.Table]; ok {
				table, snapshot, tiered = tb.ID, tb.Tiering.LakeSnapshotID, tb.Tiering.Offsets[id]
				tiering = tb.Spec.Options["tiering"] != "off"
			}
		}
	})
	if !tiering {
		return 0, errors.New("the table's tiering is off")
	}
	if snapshot == 0 || tiered == 0 {
		return 0, errors.New("nothing of the bucket is tiered")
	}
	err := m.cfg.KVLake(ctx, table, snapshot, id, codec.Schema(), func(rec arrow.RecordBatch) error {
		return t.LoadRows(codec, rec)
	})
	if err == nil {
		err = t.FinishLoad(tiered)
	}
	if err != nil {
		return 0, fmt.Errorf("lake snapshot %d of table %d: %w", snapshot, table, err)
	}
	return tiered, nil
}

func (e *StateLostError) Is(target error) bool { return target == ErrStateLost }

// changelogStart is the start offset of bucket id's stream in the view
// (where a trim left it; 0 when never trimmed).
func changelogStart(meta Metadata, id catalog.BucketID) uint64 {
	var start uint64
	meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[catalog.StreamID(id)]; ok {
			start = st.Start
		}
	})
	return start
}

// Start is the first offset of the bucket's changelog that can still be
// read: retention trims a primary-key stream below its oldest retained KV
// snapshot (and its tiered offset), and the records before that are gone.
func (b *KVBucket) Start() uint64 { return changelogStart(b.m.cfg.Meta, b.id) }

// replayChunk is how many changelog records replay reads at a time.
const replayChunk = 1 << 16

// restoreKV builds the tablet of a bucket whose stream is open: the local
// tablet reused (reuseKV) if it provably holds a prefix of the changelog,
// else restored from the view's snapshots; then the stream replayed from
// the tablet's offset to its end. prior is the stream in the view before
// this node opened it.
func (m *Manager) restoreKV(ctx context.Context, id catalog.BucketID, epoch uint64, codec *kvcodec.Codec, stream *s3stream.Stream, prior priorStream) (*KVBucket, error) {
	start := time.Now()
	dir := m.kvDir(id, epoch)
	end := stream.End()
	var snaps []catalog.KVSnapshot
	m.cfg.Meta.Read(func(v *catalog.View) {
		if vb, ok := v.Buckets[id]; ok {
			snaps = slices.Clone(vb.Snapshots)
		}
	})
	var (
		t   *kv.Tablet
		res kv.RestoreResult
		err error
	)
	reused, why := m.reuseKV(id, epoch, codec, prior, end)
	switch {
	case why == nil:
		t = reused
		res.LogOffset = t.AppliedOffset()
		m.cfg.Logger.Info("KV tablet reused: the bucket opens from its local tablet, no snapshot is downloaded",
			"bucket", id, "leader_epoch", epoch, "applied_offset", res.LogOffset, "end", end)
	case errors.Is(why, errNoLocalTablet) && !(prior.known && prior.node == m.cfg.Node):
		// This node did not lead the bucket last: nothing to say.
	default:
		m.cfg.Logger.Info("KV tablet not reused; restoring it from the object store", "bucket", id, "leader_epoch", epoch, "why", why)
	}
	keep := ""
	if t != nil {
		keep = dir
	}
	if err := m.removeKVDirs(id, keep); err != nil {
		if t != nil {
			t.Close()
		}
		return nil, fmt.Errorf("remove stale tablet directories of bucket %d: %w", id, err)
	}
	if t == nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		t, res, err = kv.Restore(ctx, m.cfg.Store, dir, kv.RestoreOptions{
			Bucket: id, Snapshots: snaps,
			Tablet: kv.Options{Cache: m.kvCache, Logger: m.cfg.Logger},
		})
		if err != nil {
			return nil, err
		}
		for _, skipped := range res.Skipped {
			m.cfg.Logger.Error("KV snapshot unusable; restore fell back to an older snapshot or a full replay", "bucket", id, "err", skipped)
		}
	}
	restored := time.Since(start)
	from := res.LogOffset
	if trimmed := changelogStart(m.cfg.Meta, id); reused == nil && from < trimmed {
		// Every retained snapshot is unusable (res.Skipped says why), and
		// the changelog that a full replay needs was trimmed: the bucket's
		// state cannot be rebuilt from the stream. The lake's rows at the
		// tiered offset can stand in for a snapshot; failing that, never
		// serve a partial state: stay Unavailable and keep saying why.
		lost := &StateLostError{Bucket: id, Restored: from, Start: trimmed, Skipped: res.Skipped}
		if res.Snapshot != nil {
			lost.Lake = errors.New("a snapshot below the trim point was restored")
		} else if at, err := m.restoreFromLake(ctx, id, codec, t); err != nil {
			lost.Lake = err
		} else if at < trimmed {
			lost.Lake = fmt.Errorf("the lake holds the bucket at offset %d, below the trim point", at)
		} else {
			m.cfg.Logger.Error("primary-key bucket restored from the lake: no retained KV snapshot was usable and its changelog is trimmed",
				"bucket", id, "tiered_offset", at, "trimmed_to", trimmed, "skipped", errors.Join(res.Skipped...))
			from = at
		}
		if lost.Lake != nil {
			t.Close()
			return nil, lost
		}
	}
	if from > end {
		t.Close()
		return nil, fmt.Errorf("bucket %d: snapshot at offset %d is past the changelog's end %d: %w", id, from, end, s3stream.ErrCorrupt)
	}
	// From here on the tablet is this epoch's: a restart finds it with
	// this History and, if the stream was last opened at this epoch,
	// reuses it (reuseKV).
	if err := t.SetHistory(kv.History{Bucket: id, LeaderEpoch: epoch, Columns: codec.NumColumns()}); err != nil {
		t.Close()
		return nil, fmt.Errorf("bucket %d: %w", id, err)
	}
	replayed := from
	for replayed < end {
		entries, err := stream.Read(ctx, replayed, min(end, replayed+replayChunk))
		if err == nil && len(entries) == 0 {
			err = fmt.Errorf("changelog read at offset %d returned nothing (end %d)", replayed, end)
		}
		for _, e := range entries {
			if err != nil {
				break
			}
			err = t.ApplyEntry(codec, e.Offset, e.Count, e.Payload)
			if errors.Is(err, kvcodec.ErrNewerColumns) {
				// Written by a leader that knew of columns added after this
				// open read the view; the view may have them by now.
				if newer, nerr := m.kvCodec(id, catalog.TableSpec{}); nerr == nil && newer.NumColumns() > codec.NumColumns() {
					codec = newer
					err = t.ApplyEntry(codec, e.Offset, e.Count, e.Payload)
				}
			}
			if err == nil {
				replayed = e.Offset + uint64(e.Count)
			}
		}
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("bucket %d: replay changelog from offset %d: %w", id, replayed, err)
		}
	}
	snapOffset := res.LogOffset
	if reused != nil {
		// The newest snapshot the reused tablet has reached: no need to
		// take it again.
		snapOffset = 0
		for _, s := range snaps {
			if s.LogOffset <= res.LogOffset {
				snapOffset = max(snapOffset, s.LogOffset)
			}
		}
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &KVBucket{
		id: id, epoch: epoch, stream: stream, m: m, tablet: t, pend: kv.NewPending(t),
		ctx: bctx, cancel: cancel, queue: make(chan *kvAppend, 1024), applierDone: make(chan struct{}),
		snapOffset: snapOffset,
	}
	b.codec.Store(codec)
	go b.applier()
	b.loops.Add(1)
	go func() { defer b.loops.Done(); b.snapshotLoop(m.cfg.KVSnapshotInterval) }()
	var snapID uint64
	if res.Snapshot != nil {
		snapID = res.Snapshot.ID
	}
	m.cfg.Logger.Info("primary-key bucket open", "bucket", id, "leader_epoch", epoch, "reused_tablet", reused != nil, "snapshot", snapID,
		"snapshot_offset", res.LogOffset, "downloaded_bytes", res.Bytes, "replayed_records", end-from, "end", end,
		"restore", restored.Round(time.Millisecond), "total", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// closeKV closes a primary-key bucket this node no longer leads (or that
// failed): the stream first (every queued append settles), then the
// tablet, and forgets it so that the sync task can open it again.
func (m *Manager) closeKV(ctx context.Context, b *KVBucket) error {
	if err := m.closeKVStream(ctx, b, false); err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.kv[b.id] == b {
		delete(m.mu.kv, b.id)
	}
	m.mu.Unlock()
	m.cfg.Logger.Info("bucket closed", "bucket", b.id, "leader_epoch", b.epoch)
	return nil
}

// closeKVStream closes the stream (later writes fail) and shuts the bucket
// down; keepDir as shutdown.
func (m *Manager) closeKVStream(ctx context.Context, b *KVBucket, keepDir bool) error {
	err := b.stream.Close(ctx)
	if err != nil && !errors.Is(err, s3stream.ErrFenced) {
		return fmt.Errorf("close bucket %d: %w", b.id, err)
	}
	b.shutdown(err == nil, keepDir)
	return nil
}
