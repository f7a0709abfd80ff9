package s3stream

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sweep"
	"github.com/minkdb/mink/objstore"
)

// Collector deletes objects that nothing in the view references. It is the
// only delete path of s3stream. An object is deleted only when no writer can
// still commit it, and only after it has been seen deletable for Delay, so
// that readers holding an older view can finish reading it.
//
// Deletable:
//   - a WAL object below its WAL's trim point;
//   - a stream object of a stream that no longer exists in the view (its
//     bucket was dropped: DropTable, DropPartition);
//   - a stream object that ends at or below its stream's start (trimmed by
//     TrimStream; readers that planned a read before the trim may still
//     read it during the delay);
//   - a stream object not referenced by its stream whose range lies below
//     the committed end (a duplicate of committed data) or whose epoch is
//     below the stream's epoch (its writer is fenced and can never commit it).
//
// An unreferenced object at the stream's current epoch beyond its committed
// end may be about to be committed, and is kept.
//
// Not safe for concurrent use; run one Collector (on the lease holder).
type Collector struct {
	store objstore.Store
	meta  Metadata
	now   func() time.Time

	mu      sync.Mutex
	sweeper *sweep.Sweeper // guarded by mu
}

// NewCollector returns a collector with the given reader grace delay.
func NewCollector(store objstore.Store, meta Metadata, delay time.Duration) *Collector {
	return &Collector{store: store, meta: meta, now: time.Now, sweeper: sweep.New(store, delay)}
}

// GCStats says what one pass did.
type GCStats struct {
	Deleted int
	Waiting int // deletable but within the delay
}

// Collect runs one pass.
func (c *Collector) Collect(ctx context.Context) (GCStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var stats GCStats
	now := c.now()
	deletable := map[string]bool{}

	walObjs, err := c.store.List(ctx, "wal/")
	if err != nil {
		return stats, fmt.Errorf("gc: list WAL: %w", err)
	}
	streamObjs, err := c.store.List(ctx, "streams/")
	if err != nil {
		return stats, fmt.Errorf("gc: list stream objects: %w", err)
	}
	c.meta.Read(func(v *catalog.View) {
		for _, key := range walGarbage(walObjs, v) {
			deletable[key] = true
		}
		referenced := map[string]bool{}
		for _, st := range v.Streams {
			for _, so := range st.Objects {
				referenced[so.Key] = true
			}
		}
		for _, o := range streamObjs {
			if referenced[o.Key] {
				continue
			}
			k, ok := parseStreamObjectKey(o.Key)
			if !ok {
				continue
			}
			st, exists := v.Streams[k.stream]
			switch {
			case !exists || k.epoch < st.Epoch:
				deletable[o.Key] = true
			case k.end <= st.Start:
				// Trimmed (TrimStream): nothing reads below the start.
				deletable[o.Key] = true
			case k.compacted:
				// An output of the current leader's compaction may be about
				// to be committed; it is garbage only once a committed
				// compaction covers its offsets.
				for _, so := range st.Objects {
					if so.Start <= k.start && k.end <= so.End && strings.HasSuffix(so.Key, "c") {
						deletable[o.Key] = true
						break
					}
				}
			case k.end <= st.End:
				deletable[o.Key] = true
			}
		}
	})
	c.sweeper.Forget(func(key string) bool { return !deletable[key] })
	var sw sweep.Stats
	_, err = c.sweeper.Sweep(ctx, now, maps.Keys(deletable), &sw)
	stats = GCStats(sw)
	if err != nil {
		return stats, fmt.Errorf("gc: %w", err)
	}
	return stats, nil
}

// objectKey is a parsed stream object key.
type objectKey struct {
	stream            catalog.StreamID
	start, end, epoch uint64
	compacted         bool
}

// parseStreamObjectKey parses streams/<stream>/<start>-<end>.<epoch>[c].
func parseStreamObjectKey(key string) (objectKey, bool) {
	var k objectKey
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] != "streams" {
		return k, false
	}
	sid, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return k, false
	}
	rng, ep, found := strings.Cut(parts[2], ".")
	if !found {
		return k, false
	}
	ep, k.compacted = strings.CutSuffix(ep, "c")
	s, e, found := strings.Cut(rng, "-")
	if !found {
		return k, false
	}
	var err1, err2, err3 error
	k.start, err1 = strconv.ParseUint(s, 10, 64)
	k.end, err2 = strconv.ParseUint(e, 10, 64)
	k.epoch, err3 = strconv.ParseUint(ep, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return k, false
	}
	k.stream = catalog.StreamID(sid)
	return k, true
}

// walGarbage returns the WAL keys below their WAL's trim point: WAL objects
// with a lower seq, and segments whose records all are. A segment's last
// seq is the next segment's first minus one; the last segment of an epoch
// holds records up to its end, so it is garbage only once the epoch is over:
// sealed and trimmed to its seal (the seal, at the trim point, stays, and
// so does the fence), or superseded with every stream it opened closed
// (which its writer commits before it closes them).
func walGarbage(objs []objstore.ObjectInfo, v *catalog.View) []string {
	type epochKeys struct {
		segs   []walKeyInfo
		keys   []string
		sealed bool // a WAL object at or below the trim point: on segments, the seal
	}
	trims := v.WALTrims
	open := map[catalog.WALID]bool{}
	for _, st := range v.Streams {
		if st.Open {
			open[catalog.WALID{Node: st.Node, Epoch: st.NodeEpoch}] = true
		}
	}
	over := func(id catalog.WALID) bool {
		n, ok := v.Nodes[id.Node]
		return ok && n.Epoch > id.Epoch && !open[id]
	}
	epochs := map[catalog.WALID]*epochKeys{}
	var out []string
	for _, o := range objs {
		k, ok := parseWALKey(o.Key)
		if !ok {
			continue
		}
		id := catalog.WALID{Node: k.node, Epoch: k.epoch}
		trim := trims[id]
		if !k.segment {
			if k.seq < trim {
				out = append(out, o.Key)
			}
			if k.seq <= trim {
				if epochs[id] == nil {
					epochs[id] = &epochKeys{}
				}
				epochs[id].sealed = true
			}
			continue
		}
		if epochs[id] == nil {
			epochs[id] = &epochKeys{}
		}
		epochs[id].segs = append(epochs[id].segs, k)
		epochs[id].keys = append(epochs[id].keys, o.Key)
	}
	for id, e := range epochs {
		trim := trims[id]
		for i := range e.segs {
			// Keys are listed in order, and so are zero-padded firsts.
			if e.sealed || over(id) || (i+1 < len(e.segs) && e.segs[i+1].seq <= trim) {
				out = append(out, e.keys[i])
			}
		}
	}
	return out
}
