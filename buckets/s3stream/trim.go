package s3stream

import (
	"time"

	"github.com/minkdb/mink/catalog"
)

// TrimPoint returns the offset to which st may be trimmed (catalog.TrimStream)
// given a limit and an age: the largest object boundary (the start of one of
// st's objects, or its committed end) that is at most limit and below which
// every object was written before olderThan. A zero olderThan means no age
// condition. An object whose write time is unknown (zero At) is never old
// enough. The result is st.Start when nothing can be trimmed.
//
// The caller chooses limit: for a bucket of a table with tiering on, its
// tiered offset (untiered data is never trimmed); the state machine rejects a
// trim past it anyway.
func TrimPoint(st *catalog.Stream, limit uint64, olderThan time.Time) uint64 {
	point := st.Start
	for _, o := range st.Objects {
		if o.End > limit {
			break
		}
		if !olderThan.IsZero() && (o.At.IsZero() || !o.At.Before(olderThan)) {
			break
		}
		point = o.End
	}
	return point
}
