package tiering

import (
	"maps"
	"slices"

	"github.com/minkdb/mink/catalog"
)

// Retired buckets. A bucket leaves its table for good when the table is
// truncated (catalog.TruncateTable: every bucket goes, an unpartitioned
// table gets new ones) or when its partition is dropped; bucket ids are
// never reused. Its rows stay in the lake until a round removes them: the
// next round of the table lists the data files of every retired bucket
// (every file holds one bucket, named "b<bucket>-…") and its snapshot
// deletes them in the same Iceberg commit that adds its new files (an
// overwrite), so no snapshot it makes holds a retired row beside a new one.
// A round with no new rows commits the deletion alone. Its summary offsets
// name only the table's current buckets (a retired one is dropped, a
// current one without an offset gets 0), so the log records the snapshot
// for the new buckets, and the next round finds nothing left to retire.
//
// Which buckets are retired is decided against the round's view only for
// ids below the view's NextID: a view that lags behind the log (a deposed
// coordinator's) does not know buckets created after it, and must not take
// them for retired. Snapshots older than the cleanup keep the files until
// they expire; mink's readers skip them by the bucket list they pass
// (ScanRequest.Buckets), Compact never merges them.

// current reports whether b is one of the table's buckets in the plan's
// view.
func (p plan) current(b catalog.BucketID) bool {
	_, ok := slices.BinarySearch(p.buckets, b)
	return ok
}

// isRetired reports whether b was a bucket of the table that the plan's
// view no longer has.
func (p plan) isRetired(b catalog.BucketID) bool {
	return uint64(b) < p.nextID && !p.current(b)
}

// retired returns the buckets of a lake snapshot's offsets that are retired,
// in id order.
func (p plan) retired(offsets map[catalog.BucketID]uint64) []catalog.BucketID {
	var out []catalog.BucketID
	for _, b := range slices.Sorted(maps.Keys(offsets)) {
		if p.isRetired(b) {
			out = append(out, b)
		}
	}
	return out
}

// retiredFiles returns the retired buckets of offsets and of the lake's
// current files (bucketFiles), in id order, and the locations of those
// buckets' files.
func (p plan) retiredFiles(offsets map[catalog.BucketID]uint64, files map[catalog.BucketID][]string) ([]catalog.BucketID, []string) {
	buckets := p.retired(offsets)
	for b := range files {
		if p.isRetired(b) && !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	slices.Sort(buckets)
	var locations []string
	for _, b := range buckets {
		locations = append(locations, files[b]...)
	}
	return buckets, locations
}

// roundOffsets are the tiered offsets a round's snapshot carries: the lake
// snapshot's, moved to the round's ends to, without the retired buckets.
// When the round retires buckets, every current bucket gets an offset (0
// when it has none), so the cleanup is recorded in the log even when no
// bucket has new rows.
func (p plan) roundOffsets(lake, to map[catalog.BucketID]uint64, retired []catalog.BucketID) map[catalog.BucketID]uint64 {
	out := maps.Clone(lake)
	if out == nil {
		out = map[catalog.BucketID]uint64{}
	}
	for _, b := range retired {
		delete(out, b)
	}
	maps.Copy(out, to)
	if len(retired) > 0 {
		for _, b := range p.buckets {
			if _, ok := out[b]; !ok {
				out[b] = 0
			}
		}
	}
	return out
}
