package tiering

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/catalog"
)

// Snapshot expiry. Every round (and every compaction or partition drop)
// commits a lake snapshot; without expiry a lake's metadata lists every
// snapshot ever made and the files they reference are kept forever. Expire
// removes old snapshots from the lake's metadata (one new metadata version,
// an Iceberg remove-snapshots update made by iceberg-go's ExpireSnapshots);
// the files only the removed snapshots referenced then become garbage, which
// LakeCollector deletes after its delay.
//
// A snapshot is kept while any of these holds:
//   - it is one of the KeepLast newest snapshots (the current one always);
//   - it was the current snapshot within Retention, that is, the snapshot
//     that replaced it is younger than Retention;
//   - the metadata log's tiering state (CommitTieringRound) points to it,
//     or to an older one: queries pin that snapshot (sqlfront's union read).
//     A table whose tiering state has no offsets (after TRUNCATE) pins
//     none: queries read no lake rows of it.

// DefaultSnapshotRetention is the default of the table option
// lake_snapshot_retention.
const DefaultSnapshotRetention = time.Hour

// DefaultKeepSnapshots is how many of the newest lake snapshots are always
// kept.
const DefaultKeepSnapshots = 3

// ExpirePolicy says which lake snapshots a table keeps.
type ExpirePolicy struct {
	// Retention: snapshots that were current within this long are kept.
	Retention time.Duration
	// KeepLast: the newest KeepLast snapshots are kept (at least 1).
	KeepLast int
}

// ExpireResult says what one expiry did.
type ExpireResult struct {
	// Expired is the number of snapshots removed; Kept the number left.
	Expired, Kept int
	// Version is the lake's metadata version after the expiry (unchanged
	// when nothing expired).
	Version int
}

// keepCount returns how many snapshots of ancestors (newest first, the
// current snapshot's ancestry) policy keeps at time now, given the snapshot
// the metadata log points to (0: none). ok is false when pinned is not in
// the ancestry: the lake and the log disagree, and nothing may expire.
func keepCount(ancestors []table.Snapshot, pol ExpirePolicy, pinned int64, now time.Time) (n int, ok bool) {
	n = min(len(ancestors), max(1, pol.KeepLast))
	cutoff := now.Add(-pol.Retention).UnixMilli()
	for i := 1; i < len(ancestors); i++ {
		// ancestors[i] was current until ancestors[i-1] replaced it.
		if ancestors[i-1].TimestampMs >= cutoff {
			n = max(n, i+1)
		}
	}
	if pinned == 0 {
		return n, true
	}
	for i, s := range ancestors {
		if s.SnapshotID == pinned {
			return max(n, i+1), true
		}
	}
	return n, false
}

// Expire removes the lake snapshots of table id that policy no longer keeps,
// under coordinator epoch epoch (ErrFenced when it is stale). It commits one
// metadata version (create-only, like a round: a concurrent round or
// expiry makes it fail with ErrLakeConflict, harmlessly) and deletes
// nothing: LakeCollector deletes the files no kept snapshot references.
// Rounds of the table must not run meanwhile (the caller serializes them).
func (t *Tierer) Expire(ctx context.Context, id catalog.TableID, epoch uint64, pol ExpirePolicy) (ExpireResult, error) {
	var (
		res     ExpireResult
		exists  bool
		pinned  int64
		current uint64
	)
	t.cfg.Meta.Read(func(v *catalog.View) {
		current = v.Coordinator.Epoch
		if tb := v.Tables[id]; tb != nil {
			exists = true
			// A table without tiered offsets (truncated, or every
			// partition dropped) pins no snapshot: readers read no lake
			// rows of it.
			if len(tb.Tiering.Offsets) > 0 {
				pinned = tb.Tiering.LakeSnapshotID
			}
		}
	})
	if current != epoch {
		return res, fmt.Errorf("%w: expiry of table %d under epoch %d, the coordinator is at %d", ErrFenced, id, epoch, current)
	}
	if !exists {
		return res, fmt.Errorf("table %d: %w", id, catalog.ErrNotFound)
	}
	tbl, err := t.lake.Load(ctx, id)
	if err != nil || tbl == nil {
		return res, err
	}
	res.Version = metadataVersion(tbl.MetadataLocation())
	meta := tbl.Metadata()
	cur := meta.CurrentSnapshot()
	if cur == nil {
		return res, nil
	}
	all := meta.Snapshots()
	ancestors, complete := table.AncestorsOfChecked(cur.SnapshotID, meta.SnapshotByID)
	if !complete && len(ancestors) == 0 {
		return res, fmt.Errorf("lake of table %d: current snapshot %d has no ancestry", id, cur.SnapshotID)
	}
	keep, ok := keepCount(ancestors, pol, pinned, t.cfg.Now())
	if !ok {
		return res, fmt.Errorf("lake of table %d: the metadata log's snapshot %d is not an ancestor of the lake's current snapshot %d; nothing expires",
			id, pinned, cur.SnapshotID)
	}
	res.Kept = len(all)
	if keep >= len(all) {
		return res, nil
	}
	if err := t.checkEpoch(epoch); err != nil {
		return res, err
	}
	tx := tbl.NewTransaction()
	// ExpireSnapshots keeps the newest keep ancestors of the current
	// snapshot: every other one is older than the age limit 0. Snapshots
	// outside the ancestry (mink makes none) go too. The files are left to
	// LakeCollector (no post-commit deletes): queries may still read them.
	if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(0), table.WithPostCommit(false)); err != nil {
		return res, fmt.Errorf("expire lake snapshots of table %d: %w", id, err)
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("commit lake snapshot expiry of table %d: %w", id, err)
	}
	left := len(committed.Metadata().Snapshots())
	res.Expired, res.Kept, res.Version = len(all)-left, left, metadataVersion(committed.MetadataLocation())
	return res, nil
}
