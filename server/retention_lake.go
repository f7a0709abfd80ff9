package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	icetable "github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/tiering"
)

// dropLakePartition deletes an expired partition's rows from the current
// snapshot of the table's lake: one Iceberg delete snapshot whose filter is
// partition column = value. The lake is partitioned by that column
// (identity), so whole files go and none is rewritten. The snapshot carries
// the current snapshot's tiered offsets (what the tiering worker and its
// repair path read) and the coordinator epoch. The partition's files stay
// referenced by the older snapshots until those expire (Tierer.Expire).
//
// It returns the new snapshot's id and sequence number, or 0, 0 when the
// table has no lake snapshot (nothing tiered).
func dropLakePartition(ctx context.Context, lake *tiering.Lake, id catalog.TableID, column, value string, epoch uint64) (int64, uint64, error) {
	tbl, err := lake.Load(ctx, id)
	if err != nil || tbl == nil {
		return 0, 0, err
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return 0, 0, nil
	}
	offsets, ok := "", false
	if snap.Summary != nil {
		offsets, ok = snap.Summary.Properties[tiering.OffsetsProperty]
	}
	if !ok {
		return 0, 0, fmt.Errorf("lake snapshot %d of table %d has no %s property", snap.SnapshotID, id, tiering.OffsetsProperty)
	}
	filter := iceberg.EqualTo(iceberg.Reference(column), value)
	// A retry after a crash between this delete and DropPartition finds
	// nothing left to delete: no new snapshot then.
	tasks, err := tbl.Scan(icetable.WithRowFilter(filter)).PlanFiles(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("plan the lake delete of partition %s = %q of table %d: %w", column, value, id, err)
	}
	if len(tasks) == 0 {
		return 0, 0, nil
	}
	props := iceberg.Properties{tiering.OffsetsProperty: offsets, tiering.EpochProperty: strconv.FormatUint(epoch, 10)}
	tx := tbl.NewTransaction()
	if err := tx.Delete(ctx, filter, props); err != nil {
		return 0, 0, fmt.Errorf("delete partition %s = %q from the lake of table %d: %w", column, value, id, err)
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("commit the lake delete of partition %s = %q of table %d: %w", column, value, id, err)
	}
	cur := committed.CurrentSnapshot()
	if cur == nil || cur.SnapshotID == snap.SnapshotID {
		return 0, 0, nil // nothing matched: no new snapshot
	}
	return cur.SnapshotID, uint64(cur.SequenceNumber), nil
}

// expirePartition drops an expired partition: first its rows from the
// current lake snapshot, then the partition itself (DropPartition: its
// buckets go, their streams are retired), then, under the coordinator
// epoch, the new lake snapshot is recorded for the table's remaining
// buckets. A crash between the steps is retried by the next pass while the
// partition is still in the view; a lake delete that matches nothing makes
// no snapshot. Rows tiered into the partition between the lake delete and
// the drop stay in the lake (readers must not return rows of buckets that
// are no longer in the view).
func (s *Server) expirePartition(ctx context.Context, d catalog.DropPartition, epoch uint64) error {
	var (
		column, value string
		remaining     map[catalog.BucketID]uint64
		tiered        bool
	)
	s.cat.Read(func(v *catalog.View) {
		t := v.Tables[d.Table]
		if t == nil || t.Partitions[d.Partition] == nil {
			return
		}
		column, value = t.Spec.PartitionBy, t.Partitions[d.Partition].Value
		tiered = t.Tiering.LakeSequence > 0
		remaining = maps.Clone(t.Tiering.Offsets)
		for _, b := range t.Partitions[d.Partition].Buckets {
			delete(remaining, b)
		}
	})
	if column == "" {
		return nil // dropped meanwhile
	}
	var snapshotID int64
	var sequence uint64
	if tiered && s.tiering != nil && s.tiering.tierer != nil {
		var err error
		if snapshotID, sequence, err = dropLakePartition(ctx, s.tiering.tierer.Lake(), d.Table, column, value, epoch); err != nil {
			return err
		}
	}
	if _, err := s.cat.Propose(ctx, d); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	if sequence == 0 || len(remaining) == 0 {
		return nil // the next tiering round records the lake snapshot (repair)
	}
	_, err := s.cat.Propose(ctx, catalog.CommitTieringRound{Table: d.Table, CoordinatorEpoch: epoch, Offsets: remaining,
		LakeSnapshotID: snapshotID, LakeSequence: sequence, At: time.Now().UTC()})
	if err != nil {
		// Not fatal: the tiering worker's repair path records it.
		s.logger.Warn("retention: recording the lake snapshot after a partition drop failed; tiering repairs it", "table", d.Table, "err", err)
	}
	return nil
}
