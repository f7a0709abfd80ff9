package buckets

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sweep"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/objstore"
)

// KVCollector deletes KV snapshot objects no retained snapshot needs
// (kv.Garbage), and every snapshot object of a dropped bucket, once they
// have been garbage for the delay: a node restoring from a snapshot that
// just left retention can finish. It runs on the coordinator lease holder,
// next to s3stream's Collector, as part of the one delete path. Not safe
// for concurrent use.
type KVCollector struct {
	store objstore.Store
	meta  s3stream.Metadata
	// Now is the clock (tests replace it).
	Now     func() time.Time
	sweeper *sweep.Sweeper
}

// KVGCStats is what one collection did.
type KVGCStats struct {
	// Deleted objects; Waiting are garbage but younger than the delay.
	Deleted, Waiting int
}

// NewKVCollector returns a collector over store with the given delay.
func NewKVCollector(store objstore.Store, meta s3stream.Metadata, delay time.Duration) *KVCollector {
	return &KVCollector{store: store, meta: meta, Now: time.Now, sweeper: sweep.New(store, delay)}
}

// Collect runs one collection.
func (c *KVCollector) Collect(ctx context.Context) (KVGCStats, error) {
	var st KVGCStats
	infos, err := c.store.List(ctx, "kv/")
	if err != nil {
		return st, fmt.Errorf("kv gc: list: %w", err)
	}
	present := map[catalog.BucketID][]string{}
	for _, o := range infos {
		rest, ok := strings.CutPrefix(o.Key, "kv/")
		if !ok {
			continue
		}
		idText, _, _ := strings.Cut(rest, "/")
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil {
			continue
		}
		present[catalog.BucketID(id)] = append(present[catalog.BucketID(id)], o.Key)
	}
	type bucketState struct {
		inView  bool
		dropped bool
		snaps   []catalog.KVSnapshot
	}
	states := map[catalog.BucketID]bucketState{}
	c.meta.Read(func(v *catalog.View) {
		for id := range present {
			b, ok := v.Buckets[id]
			switch {
			case ok:
				states[id] = bucketState{inView: true, snaps: append([]catalog.KVSnapshot(nil), b.Snapshots...)}
			case uint64(id) < v.NextID:
				// Ids are never reused: the bucket was dropped.
				states[id] = bucketState{dropped: true}
			}
		}
	})
	garbage := map[string]bool{}
	for id, keys := range present {
		s := states[id]
		switch {
		case s.dropped:
			for _, k := range keys {
				garbage[k] = true
			}
		case s.inView && len(s.snaps) > 0:
			keys, err := kv.Garbage(ctx, c.store, id, s.snaps)
			if err != nil {
				return st, fmt.Errorf("kv gc: bucket %d: %w", id, err)
			}
			for _, k := range keys {
				garbage[k] = true
			}
		}
	}
	now := c.Now()
	c.sweeper.Forget(func(k string) bool { return !garbage[k] })
	var sw sweep.Stats
	k, err := c.sweeper.Sweep(ctx, now, maps.Keys(garbage), &sw)
	st = KVGCStats(sw)
	if err != nil {
		return st, fmt.Errorf("kv gc: delete %s: %w", k, err)
	}
	return st, nil
}
