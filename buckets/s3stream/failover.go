package s3stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// ErrNotFenced is returned by Failover when the dead node epoch is still the
// node's current epoch: its WAL may not be sealed while it could be live.
var ErrNotFenced = errors.New("s3stream: node epoch is still current")

// FailoverOptions configures Failover.
type FailoverOptions struct {
	// By and ByEpoch are the node running the failover and its current node
	// epoch; its metadata commits are fenced by them. Required.
	By      catalog.NodeID
	ByEpoch uint64

	Logger         *slog.Logger
	MaxObjectBytes int // default 64 MiB
}

// FailoverStats says what one Failover did.
type FailoverStats struct {
	WALObjects int    // WAL objects replayed
	Entries    int    // entries recovered into stream objects
	Streams    int    // streams closed
	SealSeq    uint64 // the seq of the seal object
}

// Failover recovers the streams that node dead had open during node epoch
// deadEpoch. The node's epoch must already have been bumped past deadEpoch
// (RegisterNode by the taker, or by the node itself on restart).
//
//  1. Seal the WAL: walk it from its trim point and create the object at the
//     first free seq. A writer still running at deadEpoch cannot create that
//     object any more, so it acknowledges nothing after it. If it wins the
//     race for a seq, that object is replayed and the next seq is tried.
//  2. Replay the WAL objects below the seal and keep, for each stream still
//     open at deadEpoch, the entries at or beyond its committed end.
//  3. Write them as stream objects and commit them at the stream's epoch.
//  4. Close the streams.
//  5. Move the WAL trim point to the seal. Everything below it is garbage;
//     the seal itself stays for good, because a writer still running at
//     deadEpoch would otherwise find its next seq free again.
//
// Every step is idempotent, so running Failover again after a crash at any
// point finishes the job.
//
// A WAL object that does not decode (ErrCorrupt) is never skipped silently:
// only a stream with an entry in a later object (at its stream epoch) is
// recovered, since the gap check of step 2 then shows whether the damaged
// object held any of its acknowledged writes. The other streams stay open,
// the trim point stays, and Failover returns a *WALCorruptError naming the
// objects and the streams.
func Failover(ctx context.Context, store objstore.Store, meta Metadata, dead catalog.NodeID, deadEpoch uint64, opts FailoverOptions) (FailoverStats, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxObjectBytes == 0 {
		opts.MaxObjectBytes = 64 << 20
	}
	var stats FailoverStats
	if opts.By == 0 || opts.ByEpoch == 0 {
		return stats, fmt.Errorf("failover of node %d epoch %d: FailoverOptions.By and ByEpoch are required", dead, deadEpoch)
	}
	var current, trim uint64
	meta.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[dead]; ok {
			current = n.Epoch
		}
		trim = v.WALTrims[catalog.WALID{Node: dead, Epoch: deadEpoch}]
	})
	if current <= deadEpoch {
		return stats, fmt.Errorf("failover of node %d epoch %d: %w (current epoch %d)", dead, deadEpoch, ErrNotFenced, current)
	}

	r, err := sealAndReplay(ctx, store, dead, deadEpoch, trim)
	if err != nil {
		return stats, fmt.Errorf("failover of node %d epoch %d: %w", dead, deadEpoch, err)
	}
	stats.WALObjects, stats.SealSeq = r.replayed, r.sealSeq
	sealSeq := r.sealSeq

	var lost *WALCorruptError
	if len(r.damaged) > 0 {
		lost = &WALCorruptError{Node: dead, Epoch: deadEpoch, Objects: r.damaged, Streams: map[catalog.StreamID]error{}}
		for _, d := range r.damaged {
			opts.Logger.Error("s3stream failover: WAL object is corrupt", "node", dead, "node_epoch", deadEpoch, "err", d)
		}
	}
	for _, id := range streamsOpenBy(meta, dead, deadEpoch) {
		n, err := recoverStream(ctx, store, meta, id, dead, deadEpoch, r.entries[id], r.after(), opts.MaxObjectBytes)
		if err != nil && lost != nil && errors.Is(err, ErrCorrupt) {
			// The damaged object may hold this stream's acknowledged
			// writes: leave the stream open, so that its bucket stays
			// unavailable instead of serving without them.
			lost.Streams[id] = err
			continue
		}
		if err != nil {
			return stats, fmt.Errorf("failover of node %d epoch %d: %w", dead, deadEpoch, err)
		}
		stats.Entries += n
		stats.Streams++
	}
	if lost != nil {
		if len(lost.Streams) > 0 {
			// The WAL trim point stays: the damaged objects are kept
			// for the operator, and a later Failover (once they are
			// restored) replays them for the streams left open.
			return stats, lost
		}
		opts.Logger.Warn("s3stream failover: every stream continues past the corrupt WAL objects; recovered them all",
			"node", dead, "node_epoch", deadEpoch, "streams", stats.Streams)
	}
	if _, err := meta.Propose(ctx, catalog.CommitWALTrim{Node: dead, NodeEpoch: deadEpoch, TrimSeq: sealSeq, By: opts.By, ByEpoch: opts.ByEpoch}); err != nil {
		return stats, fmt.Errorf("failover of node %d epoch %d: trim WAL: %w", dead, deadEpoch, err)
	}
	opts.Logger.Info("s3stream failover done", "node", dead, "node_epoch", deadEpoch,
		"wal_objects", stats.WALObjects, "entries", stats.Entries, "streams", stats.Streams, "seal_seq", sealSeq)
	return stats, nil
}

// WALCorruptError: Failover found WAL objects it cannot decode (Objects,
// each error naming its key and wrapping ErrCorrupt), and could not prove
// that they hold nothing of the streams in Streams, which it left open: their
// buckets stay unavailable rather than serve without writes that were
// acknowledged. The other streams were recovered and closed. The WAL trim
// point is not moved, so the objects stay; once they are restored, Failover
// recovers the rest.
type WALCorruptError struct {
	Node    catalog.NodeID
	Epoch   uint64
	Objects []error
	Streams map[catalog.StreamID]error // why each stream was left open
}

func (e *WALCorruptError) Error() string {
	ids := make([]catalog.StreamID, 0, len(e.Streams))
	for id := range e.Streams {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	objs := make([]string, len(e.Objects))
	for i, o := range e.Objects {
		objs[i] = o.Error()
	}
	return fmt.Sprintf("failover of node %d epoch %d: %s; streams %v not recovered: the damaged WAL may hold their acknowledged writes",
		e.Node, e.Epoch, strings.Join(objs, "; "), ids)
}

func (e *WALCorruptError) Unwrap() error { return ErrCorrupt }

// replayedEntry is a WAL entry with the seq of the object it came from.
type replayedEntry struct {
	walEntry
	seq uint64
}

// replay is what sealAndReplay found below the seal.
type replay struct {
	entries  map[catalog.StreamID][]replayedEntry
	sealSeq  uint64
	replayed int     // WAL objects decoded
	damaged  []error // WAL objects that do not decode, in seq order
	lastBad  uint64  // the seq of the last damaged object
}

// after is the first seq past every damaged object (0: none is damaged).
// A stream with an entry at or after it has its entries of the damaged
// objects (if any) between two entries that were read, where a gap shows.
func (r replay) after() uint64 {
	if len(r.damaged) == 0 {
		return 0
	}
	return r.lastBad + 1
}

// sealAndReplay walks the WAL of (node, epoch) from trim, seals it at the
// first free seq, and returns the entries below the seal by stream. An
// object that does not decode (ErrCorrupt) is listed in damaged and the
// walk goes on: the seal must still go at the first free seq.
func sealAndReplay(ctx context.Context, store objstore.Store, node catalog.NodeID, epoch, trim uint64) (replay, error) {
	if _, ok := store.(objstore.SegmentStore); ok {
		files, err := listWAL(ctx, store, node, epoch)
		if err != nil {
			return replay{}, err
		}
		if files.onSegments(store) {
			return sealAndReplaySegments(ctx, store, node, epoch, trim)
		}
	}
	r := replay{entries: make(map[catalog.StreamID][]replayedEntry)}
	for seq := trim; ; {
		w, err := getWAL(ctx, store, node, epoch, seq)
		if errors.Is(err, objstore.ErrNotFound) {
			seal := encodeWAL(walObject{Node: node, Epoch: epoch, Seq: seq, Sealed: true})
			err := putCreateOnly(ctx, store, walKey(node, epoch, seq), seal)
			if err == nil {
				r.sealSeq = seq
				return r, nil
			}
			if errors.Is(err, errContentDiffers) {
				continue // the old writer created it first: replay it, seal the next
			}
			return replay{}, fmt.Errorf("seal WAL at seq %d: %w", seq, err)
		}
		if errors.Is(err, ErrCorrupt) {
			r.damaged = append(r.damaged, err)
			r.lastBad = seq
			seq++
			continue
		}
		if err != nil {
			return replay{}, err
		}
		if w.Sealed {
			r.sealSeq = seq
			return r, nil
		}
		for _, e := range w.Entries {
			r.entries[e.Stream] = append(r.entries[e.Stream], replayedEntry{walEntry: e, seq: seq})
		}
		r.replayed++
		seq++
	}
}

func getWAL(ctx context.Context, store objstore.Store, node catalog.NodeID, epoch, seq uint64) (walObject, error) {
	key := walKey(node, epoch, seq)
	data, err := store.Get(ctx, key)
	if err != nil {
		return walObject{}, err
	}
	w, err := decodeWAL(data)
	if err != nil {
		return w, fmt.Errorf("WAL object %s: %w", key, err)
	}
	if w.Node != node || w.Epoch != epoch || w.Seq != seq {
		return w, fmt.Errorf("WAL object %s: %w: header says node %d epoch %d seq %d", key, ErrCorrupt, w.Node, w.Epoch, w.Seq)
	}
	return w, nil
}

// streamsOpenBy lists the streams the view shows open by (node, epoch).
func streamsOpenBy(meta Metadata, node catalog.NodeID, epoch uint64) []catalog.StreamID {
	var ids []catalog.StreamID
	meta.Read(func(v *catalog.View) {
		for id, st := range v.Streams {
			if st.Open && st.Node == node && st.NodeEpoch == epoch {
				ids = append(ids, id)
			}
		}
	})
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// recoverStream commits the WAL entries of one stream beyond its committed
// end and closes it. It returns the number of entries committed. With
// after > 0 (WAL objects below it did not decode), it recovers the stream
// only if the stream has an entry at its epoch in an object at or after
// after; otherwise it returns ErrCorrupt and leaves the stream open.
func recoverStream(ctx context.Context, store objstore.Store, meta Metadata, id catalog.StreamID, node catalog.NodeID, nodeEpoch uint64, wal []replayedEntry, after uint64, maxBytes int) (int, error) {
	committed := 0
	for attempt := 0; ; attempt++ {
		var st catalog.Stream
		var ok bool
		meta.Read(func(v *catalog.View) {
			if s, found := v.Streams[id]; found {
				st, ok = *s, true
			}
		})
		if !ok || !st.Open || st.Node != node || st.NodeEpoch != nodeEpoch {
			return committed, nil // closed meanwhile (an earlier run, or a clean close)
		}
		if after > 0 && !slices.ContainsFunc(wal, func(e replayedEntry) bool { return e.StreamEpoch == st.Epoch && e.seq >= after }) {
			return committed, fmt.Errorf("stream %d: %w: no entry of it follows the damaged WAL objects, which may hold its acknowledged writes (its committed end is %d)",
				id, ErrCorrupt, st.End)
		}
		var entries []Entry
		for _, e := range wal {
			if e.StreamEpoch != st.Epoch || e.End() <= st.End {
				continue
			}
			want := st.End
			if len(entries) > 0 {
				want = entries[len(entries)-1].End()
			}
			if e.Offset != want {
				return committed, fmt.Errorf("stream %d: WAL has entry at offset %d, want %d: %w (an acknowledged write is missing)",
					id, e.Offset, want, ErrCorrupt)
			}
			entries = append(entries, e.Entry)
		}
		if len(entries) > 0 {
			objects, err := writeStreamObjects(ctx, store, id, st.Epoch, st.End, entries, maxBytes)
			if err != nil {
				return committed, fmt.Errorf("stream %d: %w", id, err)
			}
			_, err = meta.Propose(ctx, catalog.CommitStreamObjects{Stream: id, Epoch: st.Epoch, Objects: objects})
			if errors.Is(err, catalog.ErrGap) && attempt < 5 {
				continue // someone committed part of it meanwhile: re-read the end
			}
			if err != nil {
				return committed, fmt.Errorf("stream %d: commit recovered entries: %w", id, err)
			}
			committed += len(entries)
		}
		_, err := meta.Propose(ctx, catalog.CloseStream{Stream: id, Epoch: st.Epoch})
		if err != nil && !errors.Is(err, catalog.ErrFenced) && !errors.Is(err, catalog.ErrStaleEpoch) {
			return committed, fmt.Errorf("stream %d: close: %w", id, err)
		}
		return committed, nil
	}
}

// RecoverNode runs Failover for every earlier epoch of node that still has
// streams open in the view. A node calls it for itself after registering
// again (its previous incarnation is dead); a node taking over a dead node
// calls it after bumping that node's epoch.
func RecoverNode(ctx context.Context, store objstore.Store, meta Metadata, node catalog.NodeID, opts FailoverOptions) (FailoverStats, error) {
	var current uint64
	epochs := map[uint64]bool{}
	meta.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[node]; ok {
			current = n.Epoch
		}
		for _, st := range v.Streams {
			if st.Open && st.Node == node {
				epochs[st.NodeEpoch] = true
			}
		}
	})
	var total FailoverStats
	sorted := make([]uint64, 0, len(epochs))
	for e := range epochs {
		if e < current {
			sorted = append(sorted, e)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var errs []error
	for _, e := range sorted {
		st, err := Failover(ctx, store, meta, node, e, opts)
		var wc *WALCorruptError
		if errors.As(err, &wc) {
			// The streams it could not recover stay open; the other
			// epochs are independent of it.
			errs = append(errs, err)
		} else if err != nil {
			return total, errors.Join(append(errs, err)...)
		}
		total.WALObjects += st.WALObjects
		total.Entries += st.Entries
		total.Streams += st.Streams
	}
	return total, errors.Join(errs...)
}
