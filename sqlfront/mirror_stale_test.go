package sqlfront

import (
	"testing"

	"github.com/minkdb/mink/catalog"
)

func TestMirrorStale(t *testing.T) {
	for _, tc := range []struct {
		name     string
		progress map[uint64]uint64
		ids      []catalog.BucketID
		first    map[catalog.BucketID]uint64
		stale    bool
	}{
		{name: "empty mirror", progress: map[uint64]uint64{}, ids: []catalog.BucketID{1, 2}},
		{name: "holds a prefix", progress: map[uint64]uint64{1: 10, 2: 5}, ids: []catalog.BucketID{1, 2}},
		{name: "expired rows still held", progress: map[uint64]uint64{1: 10}, ids: []catalog.BucketID{1}, first: map[catalog.BucketID]uint64{1: 4}, stale: true},
		{name: "began at the stream start", progress: map[uint64]uint64{1: 10, firstKey(1): 4}, ids: []catalog.BucketID{1}, first: map[catalog.BucketID]uint64{1: 4}},
		{name: "trimmed again since", progress: map[uint64]uint64{1: 10, firstKey(1): 4}, ids: []catalog.BucketID{1}, first: map[catalog.BucketID]uint64{1: 8}, stale: true},
		{name: "nothing held of a trimmed bucket", progress: map[uint64]uint64{1: 0}, ids: []catalog.BucketID{1}, first: map[catalog.BucketID]uint64{1: 8}},
		{name: "partition dropped", progress: map[uint64]uint64{1: 10, 3: 7}, ids: []catalog.BucketID{1}, stale: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := mirrorStale(tc.progress, tc.ids, tc.first)
			if (why != "") != tc.stale {
				t.Fatalf("mirrorStale = %q, want stale %v", why, tc.stale)
			}
		})
	}
}
