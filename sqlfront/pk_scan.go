package sqlfront

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/catalog"
)

// openPK reads the current (acknowledged) rows of a primary-key table's
// buckets: each bucket's rows come from one consistent snapshot of its
// tablet, in key order.
func (t *tableSource) openPK(ctx context.Context, bucketIDs []catalog.BucketID, columns []int) (array.RecordReader, error) {
	var batches []arrow.RecordBatch
	defer func() { releaseAll(batches) }()
	for _, id := range bucketIDs {
		b, err := t.r.s.kvBucket(ctx, id, t.info)
		if err != nil {
			return nil, fmt.Errorf("read table %q: %w", t.info.name, err)
		}
		got, err := b.Scan(ctx)
		if err != nil {
			return nil, fmt.Errorf("read table %q: %w", t.info.name, err)
		}
		for _, b := range got {
			batches = append(batches, project(b, columns))
			b.Release()
		}
	}
	return array.NewRecordReader(projectSchema(t.info.schema, columns), batches)
}
