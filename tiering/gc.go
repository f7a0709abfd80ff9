package tiering

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sweep"
)

// LakeCollector deletes lake objects that no retained lake snapshot
// references: the data files and Iceberg metadata of rounds that failed, were
// fenced or lost a commit race, the files only expired snapshots referenced
// (Tierer.Expire), metadata versions that fell out of the current version's
// metadata log, and the whole lakes of dropped tables (CollectDropped). It is
// the only delete path of the lake and runs on the coordinator lease holder
// (the lifecycle loop).
//
// Referenced, and so never deleted: the current metadata version and the
// previous versions its metadata log lists, and every manifest list,
// manifest and live data file of every snapshot in the current metadata.
// An unreferenced object is deleted only after it has been seen
// unreferenced for Delay: a round in flight (possibly on an old lease
// holder) writes its files before it commits them, and a query that pinned
// a snapshot before it expired still reads its files; Delay must exceed
// the longest round and the longest lake read.
//
// The caller must keep its own rounds of a table from running while the
// table is collected (the server holds the table's round lock): the delay
// then only has to cover rounds of an old lease holder.
//
// Safe for concurrent use (passes are serialized).
type LakeCollector struct {
	lake *Lake
	now  func() time.Time

	mu      sync.Mutex
	sweeper *sweep.Sweeper // guarded by mu
	// manifests caches what manifest lists and manifests reference
	// (see Lake.references); guarded by mu.
	manifests map[string][]string
}

// NewLakeCollector returns a collector of lake with the given grace delay.
func NewLakeCollector(lake *Lake, delay time.Duration) *LakeCollector {
	return &LakeCollector{lake: lake, now: time.Now, sweeper: sweep.New(lake.store, delay), manifests: map[string][]string{}}
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
	var st sweep.Stats
	now := c.now()
	seen := map[string]bool{}
	for _, id := range tables {
		// List before reading the references: an object that appears
		// after the list is not considered in this pass, and one listed
		// here that a commit references by the time the references are read
		// is kept.
		objs, err := c.lake.store.List(ctx, LakePrefix(id))
		if err != nil {
			return LakeGCStats(st), fmt.Errorf("list lake of table %d: %w", id, err)
		}
		if len(objs) == 0 {
			continue
		}
		refs, err := c.lake.references(ctx, id, c.manifests)
		if err != nil {
			return LakeGCStats(st), err
		}
		c.forgetManifests(id, refs)
		unreferenced := func(yield func(string) bool) {
			for _, o := range objs {
				if refs[o.Key] {
					continue
				}
				seen[o.Key] = true
				if !yield(o.Key) {
					return
				}
			}
		}
		if k, err := c.sweeper.Sweep(ctx, now, unreferenced, &st); err != nil {
			return LakeGCStats(st), fmt.Errorf("delete lake object %s: %w", k, err)
		}
	}
	// Forget objects of these tables that are gone or referenced now; the
	// other tables' are kept for their next pass.
	c.sweeper.Forget(func(k string) bool {
		if seen[k] {
			return false
		}
		for _, id := range tables {
			if strings.HasPrefix(k, LakePrefix(id)) {
				return true
			}
		}
		return false
	})
	return LakeGCStats(st), nil
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
	refs[metadataKey(id, version)] = true
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
	// The previous metadata versions the current one lists (Iceberg's
	// metadata log, trimmed to write.metadata.previous-versions-max).
	for e := range tbl.Metadata().PreviousFiles() {
		k, err := key(e.MetadataFile)
		if err != nil {
			return nil, err
		}
		refs[k] = true
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
				// Live entries only: a file a snapshot deleted is
				// referenced through the older snapshots that hold it,
				// as long as they are kept.
				for e, err := range m.Entries(fsys, true) {
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

// CollectDropped deletes the lakes of dropped tables: every object under
// lake/<id>/ of a table id that live does not hold, once seen for Delay.
// live is called after the listing, with the ids found; it reports whether
// a table exists, and next is the catalog's next table id: an id at or
// above it is not a table of this catalog and is left alone. A table id is
// never reused (the catalog's ids only grow), so a lake without a table is
// garbage for good; a round of an old lease holder that writes into it
// later is collected by a later pass.
func (c *LakeCollector) CollectDropped(ctx context.Context, live func(ids []catalog.TableID) (exists map[catalog.TableID]bool, next uint64)) (LakeGCStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st sweep.Stats
	objs, err := c.lake.store.List(ctx, "lake/")
	if err != nil {
		return LakeGCStats(st), fmt.Errorf("list lakes: %w", err)
	}
	byTable := map[catalog.TableID][]string{}
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, "lake/")
		n, _, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(n, 10, 64)
		if err != nil || id == 0 {
			continue
		}
		byTable[catalog.TableID(id)] = append(byTable[catalog.TableID(id)], o.Key)
	}
	ids := make([]catalog.TableID, 0, len(byTable))
	for id := range byTable {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	exists, next := live(ids)
	now := c.now()
	for _, id := range ids {
		if exists[id] || uint64(id) >= next {
			continue
		}
		// Data first, metadata last: a pass that fails half-way leaves
		// a lake whose metadata is still there to say what it was.
		keys := byTable[id]
		slices.SortStableFunc(keys, func(a, b string) int {
			return cmpBool(strings.Contains(a, "/metadata/"), strings.Contains(b, "/metadata/"))
		})
		if k, err := c.sweeper.Sweep(ctx, now, slices.Values(keys), &st); err != nil {
			return LakeGCStats(st), fmt.Errorf("delete lake object %s of dropped table %d: %w", k, id, err)
		}
		c.forgetManifests(id, nil)
	}
	return LakeGCStats(st), nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// forgetManifests drops the cached references of table id's manifest lists
// and manifests that refs does not hold (those of expired snapshots).
func (c *LakeCollector) forgetManifests(id catalog.TableID, refs map[string]bool) {
	prefix := LakePrefix(id)
	for k := range c.manifests {
		if strings.HasPrefix(k, prefix) && !refs[k] {
			delete(c.manifests, k)
		}
	}
}
