package s3stream

import (
	"context"
	"fmt"

	"github.com/minkdb/mink/catalog"
)

// compactionKey names the object a compaction writes for [start, end) at the
// leader's epoch. The "c" marks it for the garbage collector, which must not
// delete an uncommitted compaction output while its writer's epoch is
// current.
func compactionKey(stream catalog.StreamID, start, end, epoch uint64) string {
	return streamObjectKey(stream, start, end, epoch) + "c"
}

// planCompaction picks the first run of at least minObjects adjacent objects
// smaller than small bytes, capped at maxBytes in total. It returns nil when
// there is nothing worth merging.
func planCompaction(objects []catalog.StreamObject, small int64, minObjects int, maxBytes int64) []catalog.StreamObject {
	for i := 0; i < len(objects); {
		if objects[i].Size >= small {
			i++
			continue
		}
		j, total := i, int64(0)
		for j < len(objects) && objects[j].Size < small && total+objects[j].Size <= maxBytes {
			total += objects[j].Size
			j++
		}
		if j-i >= minObjects {
			return objects[i:j]
		}
		i = max(j, i+1)
	}
	return nil
}

// Compact merges one run of small committed objects of the stream into one
// object (CompactStreamObjects at the stream's epoch). Readers see the same
// entries before and after. It returns the number of objects replaced.
func (s *Stream) Compact(ctx context.Context) (int, error) {
	if err := s.flushMu.LockCtx(ctx); err != nil {
		return 0, err
	}
	defer s.flushMu.Unlock()
	if err := s.Err(); err != nil {
		return 0, err
	}
	cfg := s.n.cfg
	var run []catalog.StreamObject
	cfg.Meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[s.id]; ok {
			run = append(run, planCompaction(st.Objects, cfg.CompactSmallBytes, cfg.CompactMinObjects, int64(cfg.MaxObjectBytes))...)
		}
	})
	if len(run) == 0 {
		return 0, nil
	}
	var entries []Entry
	for _, o := range run {
		data, err := s.n.reader.get(ctx, o.Key)
		if err != nil {
			return 0, fmt.Errorf("compact stream %d: %w", s.id, err)
		}
		obj, err := decodeStreamObject(data)
		if err != nil {
			return 0, fmt.Errorf("compact stream %d: object %s: %w", s.id, o.Key, err)
		}
		entries = append(entries, obj.Entries...)
	}
	start, end := run[0].Start, run[len(run)-1].End
	data := encodeStreamObject(streamObject{Stream: s.id, Epoch: s.epoch, Start: start, End: end, Entries: entries})
	key := compactionKey(s.id, start, end, s.epoch)
	if err := putCreateOnly(ctx, cfg.Store, key, data); err != nil {
		return 0, fmt.Errorf("compact stream %d: %w", s.id, err)
	}
	with := catalog.StreamObject{Key: key, Start: start, End: end, Size: int64(len(data))}
	for _, o := range run {
		if o.At.After(with.At) {
			with.At = o.At // the newest data in it decides its age
		}
	}
	if _, err := cfg.Meta.Propose(ctx, catalog.CompactStreamObjects{Stream: s.id, Epoch: s.epoch, Replaces: run, With: with}); err != nil {
		if isOwnershipLoss(err) && s.n.stillOwnerCheck(s) != nil {
			s.setFenced(fmt.Errorf("%w: stream %d: compaction at epoch %d rejected: %v", ErrFenced, s.id, s.epoch, err))
		}
		return 0, fmt.Errorf("compact stream %d: %w", s.id, err)
	}
	return len(run), nil
}

// stillOwnerCheck reports whether the view still shows s open here at its
// epoch; a rejected compaction whose plan merely went stale is not a fence.
func (n *Node) stillOwnerCheck(s *Stream) error {
	var err error
	n.cfg.Meta.Read(func(v *catalog.View) {
		st, ok := v.Streams[s.id]
		if !ok || !st.Open || st.Epoch != s.epoch || st.Node != n.cfg.Node || st.NodeEpoch != n.cfg.NodeEpoch {
			err = ErrFenced
		}
	})
	return err
}
