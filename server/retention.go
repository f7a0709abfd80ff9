package server

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Retention: the lifecycle loop of the coordinator lease holder that applies
// the table options log_retention and partition_retention (docs/tiering.md,
// "Retention"). Like the assignment plans, its decisions are a pure function
// of the view, the time and the live set; retain proposes them.

// planTrims returns the TrimStream records that retention calls for at
// time now.
//
// Log tables: for every bucket of a log table with log_retention, its stream
// is trimmed to the last object boundary below which every object was
// written more than log_retention ago, and, when the table's tiering is on,
// that is at or below the bucket's tiered offset (untiered data is never
// trimmed). With tiering off, log_retention drops data by age alone, as
// Kafka's retention.ms does. Without log_retention nothing is trimmed.
//
// Primary-key tables: a bucket's changelog is its state, restored from a
// retained KV snapshot plus the changelog from the snapshot's offset. Its
// stream is trimmed by default, without log_retention, to the last object
// boundary at or below the log offset of the bucket's oldest retained KV
// snapshot (nothing without a snapshot), and with tiering on at or below the
// tiered offset; log_retention, when set, also keeps every object written
// within it. The state machine enforces the same bounds (catalog.TrimStream).
//
// Either kind: when the table's partitions expire by their last write
// (partition_retention on a column that is not a time type), each stream
// keeps its newest object, whose write time dates that last write.
func planTrims(v *catalog.View, now time.Time, epoch uint64) []catalog.TrimStream {
	var out []catalog.TrimStream
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		t := v.Tables[id]
		pk := len(t.Spec.PrimaryKey) > 0
		retention, ok := retentionOption(t.Spec, "log_retention")
		if !ok && !pk {
			continue
		}
		var olderThan time.Time // zero: no age condition
		if ok {
			olderThan = now.Add(-retention)
		}
		tiered := t.Spec.Options["tiering"] != "off"
		keepLast := expiresByLastWrite(t.Spec)
		for _, b := range v.BucketsOf(id) {
			st := v.Streams[catalog.StreamID(b)]
			if st == nil || st.Retired {
				continue
			}
			limit := st.End
			if tiered {
				limit = min(limit, t.Tiering.Offsets[b])
			}
			if pk {
				vb := v.Buckets[b]
				if vb == nil || len(vb.Snapshots) == 0 {
					continue
				}
				limit = min(limit, vb.Snapshots[0].LogOffset)
			}
			if keepLast && len(st.Objects) > 0 {
				// The newest object's write time is the partition's last
				// write (lastWrite): trimming it would keep the partition
				// from ever expiring.
				limit = min(limit, st.Objects[len(st.Objects)-1].Start)
			}
			if point := s3stream.TrimPoint(st, limit, olderThan); point > st.Start {
				out = append(out, catalog.TrimStream{Stream: st.ID, Start: point, CoordinatorEpoch: epoch})
			}
		}
	}
	return out
}

// retentionOption parses a duration table option; a missing, unparsable
// or non-positive value means none.
func retentionOption(spec catalog.TableSpec, name string) (time.Duration, bool) {
	d, err := time.ParseDuration(spec.Options[name])
	return d, err == nil && d > 0
}

// partitionEnd returns the end of the time a LIST partition's value stands
// for, when the partition column has a time type: a date partition holds one
// day, so it ends at the next midnight (UTC); a timestamp or timestamptz
// partition holds one instant. ok is false for any other type, and for a
// value that does not parse.
func partitionEnd(columnType, value string) (time.Time, bool) {
	switch strings.ToLower(columnType) {
	case "date":
		d, err := time.Parse("2006-01-02", value)
		return d.AddDate(0, 0, 1), err == nil
	case "timestamp", "timestamp without time zone":
		for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02"} {
			if ts, err := time.Parse(layout, value); err == nil {
				return ts, true
			}
		}
	case "timestamptz", "timestamp with time zone":
		for _, layout := range []string{"2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999Z07:00", time.RFC3339Nano} {
			if ts, err := time.Parse(layout, value); err == nil {
				return ts, true
			}
		}
	}
	return time.Time{}, false
}

// lastWrite returns the latest write time of the partition's committed
// stream objects; ok is false when it has none, or has one of unknown age.
// Rows still in a leader's memory (committed within the flush interval) are
// not seen.
func lastWrite(v *catalog.View, p *catalog.Partition) (last time.Time, ok bool) {
	for _, b := range p.Buckets {
		st := v.Streams[catalog.StreamID(b)]
		if st == nil {
			continue
		}
		for _, o := range st.Objects {
			if o.At.IsZero() {
				return time.Time{}, false
			}
			if o.At.After(last) {
				last = o.At
			}
			ok = true
		}
	}
	return last, ok
}

// planPartitionDrops returns the DropPartition records that
// partition_retention calls for at time now (expirePartition carries them
// out, the lake first). A LIST partition is expired
// when:
//   - the partition column is a date, timestamp or timestamptz, and the time
//     its value stands for ended more than partition_retention ago (a date
//     partition ends at the next midnight UTC), whatever was written to it
//     lately; or
//   - the column has another type (text, integer, …), and the partition has
//     committed data and all of it was written more than
//     partition_retention ago (no write since). A partition with no
//     committed data, or with data of unknown age, never expires this way.
//
// A write landing in a partition as it is dropped is lost with it: that is
// what expiry means.
func planPartitionDrops(v *catalog.View, now time.Time) []catalog.DropPartition {
	var out []catalog.DropPartition
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		t := v.Tables[id]
		retention, ok := retentionOption(t.Spec, "partition_retention")
		if !ok || t.Spec.PartitionBy == "" {
			continue
		}
		var colType string
		for _, c := range t.Spec.Columns {
			if c.Name == t.Spec.PartitionBy {
				colType = c.Type
			}
		}
		cutoff := now.Add(-retention)
		for _, pid := range slices.Sorted(maps.Keys(t.Partitions)) {
			p := t.Partitions[pid]
			if end, timeLike := partitionEnd(colType, p.Value); timeLike || isTimeType(colType) {
				if timeLike && !end.After(cutoff) {
					out = append(out, catalog.DropPartition{Table: id, Partition: pid})
				}
				continue
			}
			if last, known := lastWrite(v, p); known && last.Before(cutoff) {
				out = append(out, catalog.DropPartition{Table: id, Partition: pid})
			}
		}
	}
	return out
}

// expiresByLastWrite reports whether the table's partitions expire by the
// time of their last write (planPartitionDrops): partition_retention on a
// partition column that is not a time type.
func expiresByLastWrite(spec catalog.TableSpec) bool {
	if _, ok := retentionOption(spec, "partition_retention"); !ok || spec.PartitionBy == "" {
		return false
	}
	for _, c := range spec.Columns {
		if c.Name == spec.PartitionBy {
			return !isTimeType(c.Type)
		}
	}
	return false
}

func isTimeType(t string) bool {
	switch strings.ToLower(t) {
	case "date", "timestamp", "timestamptz", "timestamp without time zone", "timestamp with time zone":
		return true
	}
	return false
}

// planRetiredCloses returns CloseStream records for retired streams (their
// bucket was dropped) whose holder is gone: its node epoch was superseded, or
// the node is not live. No node would ever close them otherwise, since no
// bucket leads anyone to them; their uncommitted data belonged to a dropped
// table. Closing removes them from the view, and their objects become
// garbage.
func planRetiredCloses(v *catalog.View, live func(catalog.NodeID) bool) []catalog.CloseStream {
	var out []catalog.CloseStream
	for _, id := range slices.Sorted(maps.Keys(v.Streams)) {
		st := v.Streams[id]
		if !st.Retired || !st.Open {
			continue
		}
		if n := v.Nodes[st.Node]; n == nil || n.Epoch != st.NodeEpoch || !live(st.Node) {
			out = append(out, catalog.CloseStream{Stream: id, Epoch: st.Epoch})
		}
	}
	return out
}

// retain runs the retention loop while this node holds the coordinator lease
// at epoch. It returns when ctx is done or a trim shows the epoch is stale.
func (s *Server) retain(ctx context.Context, epoch uint64, live *metalog.LiveCache) {
	tick := time.NewTicker(min(s.cfg.CoordinatorTick, time.Second))
	defer tick.Stop()
	for {
		if stale := s.retainOnce(ctx, epoch, live.IsLive, time.Now()); stale {
			s.logger.Warn("retention: coordinator epoch is stale; the loop stops", "coordinator_epoch", epoch)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// retainOnce proposes one pass of retention. It reports whether the
// coordinator epoch turned out to be stale.
func (s *Server) retainOnce(ctx context.Context, epoch uint64, live func(catalog.NodeID) bool, now time.Time) bool {
	var (
		trims  []catalog.TrimStream
		drops  []catalog.DropPartition
		closes []catalog.CloseStream
	)
	s.cat.Read(func(v *catalog.View) {
		trims = planTrims(v, now, epoch)
		drops = planPartitionDrops(v, now)
		closes = planRetiredCloses(v, live)
	})
	for _, d := range drops {
		if err := s.expirePartition(ctx, d, epoch); err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("retention: dropping an expired partition failed; will retry", "table", d.Table, "partition", d.Partition, "err", err)
			}
			continue
		}
		s.logger.Info("retention: expired partition dropped", "table", d.Table, "partition", d.Partition)
	}
	for _, tr := range trims {
		_, err := s.cat.Propose(ctx, tr)
		if errors.Is(err, catalog.ErrStaleEpoch) {
			return true
		}
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("retention: trim failed; will retry", "stream", tr.Stream, "start", tr.Start, "err", err)
			}
			continue
		}
		s.logger.Info("retention: stream trimmed", "stream", tr.Stream, "start", tr.Start)
	}
	for _, c := range closes {
		if _, err := s.cat.Propose(ctx, c); err != nil && ctx.Err() == nil && !errors.Is(err, catalog.ErrNotFound) {
			s.logger.Warn("retention: closing a retired stream failed; will retry", "stream", c.Stream, "err", err)
		}
	}
	return false
}
