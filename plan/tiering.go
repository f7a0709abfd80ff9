package plan

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/minkdb/mink/catalog"
)

// TableRound is a tiering round's frozen view of one table (Round): what the
// round tiers and what it records are decided against it, whatever the log
// does meanwhile.
type TableRound struct {
	Table   catalog.TableID
	Spec    catalog.TableSpec
	Buckets []catalog.BucketID // the table's buckets, sorted
	// Partition is the partition value of each bucket of a partitioned
	// table.
	Partition map[catalog.BucketID]string
	Tiered    catalog.TieringState
	// Ends are the committed stream ends at the start of the round.
	Ends  map[catalog.BucketID]uint64
	Epoch uint64 // the view's coordinator epoch
	// NextID is the view's next table, partition or bucket id: every
	// bucket below it that is not in Buckets is retired (ids are never
	// reused); one at or above it is newer than this view.
	NextID uint64
}

// Round freezes table id of v for a tiering round (or a compaction). It
// fails with catalog.ErrNotFound when v has no such table.
func Round(v *catalog.View, id catalog.TableID) (TableRound, error) {
	t := v.Tables[id]
	if t == nil {
		return TableRound{}, fmt.Errorf("table %d: %w", id, catalog.ErrNotFound)
	}
	r := TableRound{Table: id, Spec: t.Spec, Tiered: t.Tiering, Ends: map[catalog.BucketID]uint64{},
		Partition: map[catalog.BucketID]string{}, Epoch: v.Coordinator.Epoch, NextID: v.NextID}
	r.Buckets = append(r.Buckets, t.Buckets...)
	for _, part := range t.Partitions {
		for _, b := range part.Buckets {
			r.Buckets = append(r.Buckets, b)
			r.Partition[b] = part.Value
		}
	}
	slices.Sort(r.Buckets)
	for _, b := range r.Buckets {
		if st := v.Streams[catalog.StreamID(b)]; st != nil {
			r.Ends[b] = st.End
		}
	}
	return r, nil
}

// Lake is what a round read of the table's lake: its current snapshot (0
// when it has none) and the tiered offsets in the snapshot's summary.
type Lake struct {
	SnapshotID int64
	Sequence   uint64
	Offsets    map[catalog.BucketID]uint64
}

// CheckLake returns an error when the log says a bucket is tiered further
// than the lake: the lake is the record of what is tiered and the log
// follows it, so this is a lake that lost a snapshot (or another table's
// lake), and the round must not go on. The error names the lowest such
// bucket.
func (r TableRound) CheckLake(lake Lake) error {
	for _, b := range slices.Sorted(maps.Keys(r.Tiered.Offsets)) {
		if off := r.Tiered.Offsets[b]; lake.Offsets[b] < off {
			return fmt.Errorf("table %q: the metadata log says bucket %d is tiered to offset %d, the lake (snapshot %d) only to %d",
				r.Spec.Name, b, off, lake.SnapshotID, lake.Offsets[b])
		}
	}
	return nil
}

// ranges are the rows a round tiers: [lake offset, committed end) of every
// bucket with new rows.
func (r TableRound) ranges(lake Lake) (from, to map[catalog.BucketID]uint64) {
	from, to = map[catalog.BucketID]uint64{}, map[catalog.BucketID]uint64{}
	for _, b := range r.Buckets {
		if lo, end := lake.Offsets[b], r.Ends[b]; end > lo {
			from[b], to[b] = lo, end
		}
	}
	return from, to
}

// NeedsFiles reports whether Decide needs the lake's current data files per
// bucket: when the lake's offsets name retired buckets, or when a
// primary-key table has new rows (its bucket files are read back and
// replaced).
func (r TableRound) NeedsFiles(lake Lake) bool {
	_, to := r.ranges(lake)
	return len(r.Retired(lake.Offsets)) > 0 || (len(r.Spec.PrimaryKey) > 0 && len(to) > 0)
}

// RoundDecision is what a tiering round does, decided from its TableRound
// and what it read of the lake.
type RoundDecision struct {
	// From and To are the ranges [From[b], To[b]) the round tiers, of
	// every bucket with new rows.
	From, To map[catalog.BucketID]uint64
	// Retired are the buckets the table no longer has whose rows the
	// round's snapshot deletes, RetiredFiles the locations of their data
	// files.
	Retired      []catalog.BucketID
	RetiredFiles []string
	// Repair: the log is behind the lake (a lake commit whose
	// CommitTieringRound was lost or fenced), and the round first records
	// the lake's snapshot (Record with the lake's offsets). A lake snapshot
	// that still holds rows of retired buckets is never recorded: the
	// round's own snapshot, which carries its offsets too, is.
	Repair bool
	// Commit: the round writes files and commits a lake snapshot, because
	// it has new rows or retired files to delete. A round with neither
	// commits nothing; retired buckets without files (their rows deleted
	// already) are left in the offsets until a round commits anyway.
	Commit bool
	// Offsets are the tiered offsets the round's snapshot carries
	// (TableRound.Offsets), when Commit.
	Offsets map[catalog.BucketID]uint64
}

// Decide decides a round from the lake it read and the lake's current data
// files per bucket, which it reads only when NeedsFiles (the caller may pass
// nil otherwise).
// REQUIRES: r.CheckLake(lake) == nil.
func (r TableRound) Decide(lake Lake, files map[catalog.BucketID][]string) RoundDecision {
	var d RoundDecision
	d.From, d.To = r.ranges(lake)
	var retired []catalog.BucketID
	if r.NeedsFiles(lake) {
		retired, d.RetiredFiles = r.RetiredFiles(lake.Offsets, files)
	}
	d.Repair = lake.Sequence > r.Tiered.LakeSequence && len(d.RetiredFiles) == 0
	d.Commit = len(d.To) > 0 || len(d.RetiredFiles) > 0
	if !d.Commit {
		return d
	}
	if len(retired) > 0 {
		d.Retired = retired
	}
	d.Offsets = r.Offsets(lake.Offsets, d.To, d.Retired)
	return d
}

// Record is the CommitTieringRound that records a lake snapshot with
// offsets, under the coordinator epoch, at time at. It names only the
// table's current buckets; ok is false when offsets name none of them (a
// partitioned table without partitions): there is nothing to record.
func (r TableRound) Record(offsets map[catalog.BucketID]uint64, snapshotID int64, sequence uint64, epoch uint64, at time.Time) (rec catalog.CommitTieringRound, ok bool) {
	rec = catalog.CommitTieringRound{Table: r.Table, CoordinatorEpoch: epoch, Offsets: map[catalog.BucketID]uint64{},
		LakeSnapshotID: snapshotID, LakeSequence: sequence, At: at.UTC()}
	for _, b := range r.Buckets {
		if off, ok := offsets[b]; ok {
			rec.Offsets[b] = off
		}
	}
	return rec, len(rec.Offsets) > 0
}

// RecordCompaction is the CommitTieringRound of a compaction snapshot, which
// tiers nothing new: like Record with the offsets of the lake it compacted
// (base), except that when the log was up to date with that lake it keeps the
// log's tiering time, the time of the last round that tiered rows, from
// which the status measures the lag; otherwise at.
func (r TableRound) RecordCompaction(base Lake, snapshotID int64, sequence uint64, epoch uint64, at time.Time) (catalog.CommitTieringRound, bool) {
	if r.Tiered.LakeSequence == base.Sequence && !r.Tiered.At.IsZero() {
		at = r.Tiered.At
	}
	return r.Record(base.Offsets, snapshotID, sequence, epoch, at)
}

// Retired buckets. A bucket leaves its table for good when the table is
// truncated (catalog.TruncateTable: every bucket goes, an unpartitioned
// table gets new ones) or when its partition is dropped; bucket ids are
// never reused. Its rows stay in the lake until a round removes them: the
// next round of the table lists the data files of every retired bucket
// (every file holds one bucket, named "b<bucket>-…") and its snapshot
// deletes them in the same Iceberg commit that adds its new files (an
// overwrite), so no snapshot it makes holds a retired row beside a new one.
// A round with no new rows commits the deletion alone. Its summary offsets
// name only the table's current buckets (a retired one is dropped, a
// current one without an offset gets 0), so the log records the snapshot
// for the new buckets, and the next round finds nothing left to retire.
//
// Which buckets are retired is decided against the round's view only for
// ids below the view's NextID: a view that lags behind the log (a deposed
// coordinator's) does not know buckets created after it, and must not take
// them for retired. Snapshots older than the cleanup keep the files until
// they expire; mink's readers skip them by the bucket list they pass
// (tiering.ScanRequest.Buckets), compaction never merges them.

// Current reports whether b is one of the table's buckets in the round's
// view.
func (r TableRound) Current(b catalog.BucketID) bool {
	_, ok := slices.BinarySearch(r.Buckets, b)
	return ok
}

// IsRetired reports whether b was a bucket of the table that the round's
// view no longer has.
func (r TableRound) IsRetired(b catalog.BucketID) bool {
	return uint64(b) < r.NextID && !r.Current(b)
}

// Retired returns the buckets of a lake snapshot's offsets that are retired,
// in id order.
func (r TableRound) Retired(offsets map[catalog.BucketID]uint64) []catalog.BucketID {
	var out []catalog.BucketID
	for _, b := range slices.Sorted(maps.Keys(offsets)) {
		if r.IsRetired(b) {
			out = append(out, b)
		}
	}
	return out
}

// RetiredFiles returns the retired buckets of offsets and of the lake's
// current files (per bucket), in id order, and the locations of those
// buckets' files.
func (r TableRound) RetiredFiles(offsets map[catalog.BucketID]uint64, files map[catalog.BucketID][]string) ([]catalog.BucketID, []string) {
	buckets := r.Retired(offsets)
	for b := range files {
		if r.IsRetired(b) && !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	slices.Sort(buckets)
	var locations []string
	for _, b := range buckets {
		locations = append(locations, files[b]...)
	}
	return buckets, locations
}

// Offsets are the tiered offsets a round's snapshot carries: the lake
// snapshot's, moved to the round's ends to, without the retired buckets.
// When the round retires buckets, every current bucket gets an offset (0
// when it has none), so the cleanup is recorded in the log even when no
// bucket has new rows.
func (r TableRound) Offsets(lake, to map[catalog.BucketID]uint64, retired []catalog.BucketID) map[catalog.BucketID]uint64 {
	out := maps.Clone(lake)
	if out == nil {
		out = map[catalog.BucketID]uint64{}
	}
	for _, b := range retired {
		delete(out, b)
	}
	maps.Copy(out, to)
	if len(retired) > 0 {
		for _, b := range r.Buckets {
			if _, ok := out[b]; !ok {
				out[b] = 0
			}
		}
	}
	return out
}

// TableWork is what the tiering worker knows of a table besides the view:
// its policy (from the table's options and the server's defaults) and the
// worker's in-memory schedule, which lives as long as the node.
type TableWork struct {
	Enabled   bool          // tiering is on for the table
	Freshness time.Duration // how long new rows may wait for the lake
	Requested bool          // a run was requested: round as soon as possible
	Running   bool          // a round of the table is running
	// LastAttempt is when the last round started.
	LastAttempt time.Time
	// BehindSince is when the worker first saw the table behind its
	// streams since it was last caught up (zero: caught up).
	BehindSince time.Time
}

// Due reports whether the tiering worker starts a round of table t at time
// now, and returns the table's new BehindSince. A table is due when tiering
// is on, no round of it runs, and a run was requested, or its oldest
// untiered rows (as far as the worker has seen) have waited its freshness and
// the last attempt is that old too, or its lake may hold rows of retired
// buckets (LakeRetired) and the last attempt is that old: rows reach the
// lake within about freshness, and a failing table is retried at that pace.
func Due(v *catalog.View, t *catalog.Table, w TableWork, now time.Time) (due bool, behindSince time.Time) {
	isBehind := Behind(v, t)
	behindSince = w.BehindSince
	switch {
	case !isBehind:
		behindSince = time.Time{}
	case behindSince.IsZero():
		behindSince = now
	}
	if !w.Enabled || w.Running {
		return false, behindSince
	}
	waited := now.Sub(w.LastAttempt) >= w.Freshness
	due = w.Requested || (isBehind && now.Sub(behindSince) >= w.Freshness && waited) || (LakeRetired(t) && waited)
	return due, behindSince
}

// Behind reports whether any bucket of t has committed rows past its tiered
// offset.
func Behind(v *catalog.View, t *catalog.Table) bool {
	for _, b := range v.BucketsOf(t.ID) {
		if st := v.Streams[catalog.StreamID(b)]; st != nil && st.End > t.Tiering.Offsets[b] {
			return true
		}
	}
	return false
}

// LakeRetired reports whether the lake of t may hold rows of buckets t no
// longer has: a lake snapshot is recorded but no offsets are (TRUNCATE
// emptied them, or every partition was dropped). The next round deletes
// those rows; with nothing left to delete it commits nothing, so a table
// that stays so costs one read of its lake metadata per freshness.
func LakeRetired(t *catalog.Table) bool {
	return t.Tiering.LakeSnapshotID != 0 && len(t.Tiering.Offsets) == 0
}
