package tiering

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
)

// LakeCollector deletes lake objects that no retained lake snapshot
// references: the data files and Iceberg metadata of rounds that failed, were
// fenced or lost a commit race. It is the only delete path of the lake and
// runs on the coordinator lease holder (the lifecycle loop).
//
// Referenced, and so never deleted: every metadata version file, and every
// manifest list, manifest and data file of every snapshot in the current
// metadata (mink never expires lake snapshots yet). An unreferenced object
// is deleted only after it has been seen unreferenced for Delay: a round in
// flight (possibly on an old lease holder) writes its files before it
// commits them, and Delay must exceed the longest round.
//
// The caller must keep its own rounds of a table from running while the
// table is collected (the server holds the table's round lock): the delay
// then only has to cover rounds of an old lease holder.
//
// Lakes of dropped tables are kept. Safe for concurrent use (passes are
// serialized).
type LakeCollector struct {
	lake  *Lake
	delay time.Duration
	now   func() time.Time

	mu        sync.Mutex
	firstSeen map[string]time.Time // guarded by mu
	// manifests caches what manifest lists and manifests reference
	// (see Lake.references); guarded by mu.
	manifests map[string][]string
}

// NewLakeCollector returns a collector of lake with the given grace delay.
func NewLakeCollector(lake *Lake, delay time.Duration) *LakeCollector {
	return &LakeCollector{lake: lake, delay: delay, now: time.Now, firstSeen: map[string]time.Time{}, manifests: map[string][]string{}}
}

// LakeGCStats says what one pass did.
type LakeGCStats struct {
	Deleted int
	Waiting int // unreferenced, within the delay
}

// Collect runs one pass over the lakes of the given tables (the first-seen
// times of other tables' objects are kept for their own passes).
func (c *LakeCollector) Collect(ctx context.Context, tables []catalog.TableID) (LakeGCStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st LakeGCStats
	now := c.now()
	seen := map[string]bool{}
	for _, id := range tables {
		// List before reading the references: an object that appears
		// after the list is not considered in this pass, and one listed
		// here that a commit references by the time the references are read
		// is kept.
		objs, err := c.lake.store.List(ctx, LakePrefix(id))
		if err != nil {
			return st, fmt.Errorf("list lake of table %d: %w", id, err)
		}
		if len(objs) == 0 {
			continue
		}
		refs, err := c.lake.references(ctx, id, c.manifests)
		if err != nil {
			return st, err
		}
		for _, o := range objs {
			if refs[o.Key] {
				continue
			}
			seen[o.Key] = true
			first, ok := c.firstSeen[o.Key]
			if !ok {
				c.firstSeen[o.Key] = now
				first = now
			}
			if now.Sub(first) < c.delay {
				st.Waiting++
				continue
			}
			if err := c.lake.store.Delete(ctx, o.Key); err != nil {
				return st, fmt.Errorf("delete lake object %s: %w", o.Key, err)
			}
			delete(c.firstSeen, o.Key)
			st.Deleted++
		}
	}
	// Forget objects of these tables that are gone or referenced now; the
	// other tables' are kept for their next pass.
	for k := range c.firstSeen {
		if seen[k] {
			continue
		}
		for _, id := range tables {
			if strings.HasPrefix(k, LakePrefix(id)) {
				delete(c.firstSeen, k)
				break
			}
		}
	}
	return st, nil
}

// references returns the keys a table's lake references: all metadata
// versions, and the manifest lists, manifests and data files of every
// snapshot of the current version. Any read error fails the pass (nothing is
// deleted on doubt).
//
// cache, if not nil, maps a manifest list or manifest key to the keys it
// references; lake objects are immutable, so a pass reads only the manifest
// lists and manifests it has not seen before.
func (l *Lake) references(ctx context.Context, id catalog.TableID, cache map[string][]string) (map[string]bool, error) {
	if cache == nil {
		cache = map[string][]string{}
	}
	refs := map[string]bool{}
	version, err := l.currentVersion(ctx, id)
	if err != nil {
		return nil, err
	}
	if version == 0 {
		// No committed metadata: nothing of this lake is referenced. A
		// round that is about to create version 1 is protected by the delay.
		return refs, nil
	}
	for v := 1; v <= version; v++ {
		refs[metadataKey(id, v)] = true
	}
	tbl, err := l.loadVersion(ctx, id, version)
	if err != nil {
		return nil, err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	key := func(loc string) (string, error) {
		k, ok := strings.CutPrefix(loc, l.base+"/")
		if !ok {
			return "", fmt.Errorf("lake of table %d references %s, outside the object store %s", id, loc, l.base)
		}
		return k, nil
	}
	for _, snap := range tbl.Metadata().Snapshots() {
		listKey, err := key(snap.ManifestList)
		if err != nil {
			return nil, err
		}
		refs[listKey] = true
		manifestKeys, ok := cache[listKey]
		if !ok {
			manifests, err := snap.Manifests(fsys)
			if err != nil {
				return nil, fmt.Errorf("lake of table %d snapshot %s: %w", id, strconv.FormatInt(snap.SnapshotID, 10), err)
			}
			for _, m := range manifests {
				mk, err := key(m.FilePath())
				if err != nil {
					return nil, err
				}
				manifestKeys = append(manifestKeys, mk)
				if _, ok := cache[mk]; ok {
					continue
				}
				var dataKeys []string
				for e, err := range m.Entries(fsys, false) {
					if err != nil {
						return nil, fmt.Errorf("lake of table %d manifest %s: %w", id, m.FilePath(), err)
					}
					dk, err := key(e.DataFile().FilePath())
					if err != nil {
						return nil, err
					}
					dataKeys = append(dataKeys, dk)
				}
				cache[mk] = dataKeys
			}
			cache[listKey] = manifestKeys
		}
		for _, mk := range manifestKeys {
			refs[mk] = true
			for _, dk := range cache[mk] {
				refs[dk] = true
			}
		}
	}
	return refs, nil
}
