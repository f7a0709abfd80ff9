package s3stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

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

	entries, sealSeq, replayed, err := sealAndReplay(ctx, store, dead, deadEpoch, trim)
	if err != nil {
		return stats, fmt.Errorf("failover of node %d epoch %d: %w", dead, deadEpoch, err)
	}
	stats.WALObjects, stats.SealSeq = replayed, sealSeq

	for _, id := range streamsOpenBy(meta, dead, deadEpoch) {
		n, err := recoverStream(ctx, store, meta, id, dead, deadEpoch, entries[id], opts.MaxObjectBytes)
		if err != nil {
			return stats, fmt.Errorf("failover of node %d epoch %d: %w", dead, deadEpoch, err)
		}
		stats.Entries += n
		stats.Streams++
	}
	if _, err := meta.Propose(ctx, catalog.CommitWALTrim{Node: dead, NodeEpoch: deadEpoch, TrimSeq: sealSeq, By: opts.By, ByEpoch: opts.ByEpoch}); err != nil {
		return stats, fmt.Errorf("failover of node %d epoch %d: trim WAL: %w", dead, deadEpoch, err)
	}
	opts.Logger.Info("s3stream failover done", "node", dead, "node_epoch", deadEpoch,
		"wal_objects", stats.WALObjects, "entries", stats.Entries, "streams", stats.Streams, "seal_seq", sealSeq)
	return stats, nil
}

// sealAndReplay walks the WAL of (node, epoch) from trim, seals it at the
// first free seq, and returns the entries below the seal by stream.
func sealAndReplay(ctx context.Context, store objstore.Store, node catalog.NodeID, epoch, trim uint64) (map[catalog.StreamID][]walEntry, uint64, int, error) {
	entries := make(map[catalog.StreamID][]walEntry)
	replayed := 0
	for seq := trim; ; {
		w, err := getWAL(ctx, store, node, epoch, seq)
		if errors.Is(err, objstore.ErrNotFound) {
			seal := encodeWAL(walObject{Node: node, Epoch: epoch, Seq: seq, Sealed: true})
			err := putCreateOnly(ctx, store, walKey(node, epoch, seq), seal)
			if err == nil {
				return entries, seq, replayed, nil
			}
			if errors.Is(err, errContentDiffers) {
				continue // the old writer created it first: replay it, seal the next
			}
			return nil, 0, 0, fmt.Errorf("seal WAL at seq %d: %w", seq, err)
		}
		if err != nil {
			return nil, 0, 0, err
		}
		if w.Sealed {
			return entries, seq, replayed, nil
		}
		for _, e := range w.Entries {
			entries[e.Stream] = append(entries[e.Stream], e)
		}
		replayed++
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
// end and closes it. It returns the number of entries committed.
func recoverStream(ctx context.Context, store objstore.Store, meta Metadata, id catalog.StreamID, node catalog.NodeID, nodeEpoch uint64, wal []walEntry, maxBytes int) (int, error) {
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
	for _, e := range sorted {
		st, err := Failover(ctx, store, meta, node, e, opts)
		if err != nil {
			return total, err
		}
		total.WALObjects += st.WALObjects
		total.Entries += st.Entries
		total.Streams += st.Streams
	}
	return total, nil
}
