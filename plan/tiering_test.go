package plan

import (
	"fmt"
	"slices"
	"testing"

	"github.com/minkdb/mink/catalog"
)

// TestRetiredIgnoresNewerBuckets: a round whose view lags behind the log (a
// deposed coordinator's) does not take buckets created after its view for
// retired.
func TestRetiredIgnoresNewerBuckets(t *testing.T) {
	p := TableRound{Buckets: []catalog.BucketID{3, 4}, NextID: 6}
	got, files := p.RetiredFiles(map[catalog.BucketID]uint64{1: 10, 3: 5, 7: 2},
		map[catalog.BucketID][]string{2: {"b2-0-1"}, 4: {"b4-0-1"}, 9: {"b9-0-1"}})
	if !slices.Equal(got, []catalog.BucketID{1, 2}) || !slices.Equal(files, []string{"b2-0-1"}) {
		t.Fatalf("retired %v files %v, want [1 2] [b2-0-1]", got, files)
	}
	off := p.Offsets(map[catalog.BucketID]uint64{1: 10, 3: 5, 7: 2}, map[catalog.BucketID]uint64{3: 8}, got)
	if fmt.Sprint(off) != "map[3:8 4:0 7:2]" {
		t.Fatalf("round offsets %v", off)
	}
}
