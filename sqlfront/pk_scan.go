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
		got, err := t.r.s.f.scanKV(ctx, id)
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

// scanKV returns every current row of a primary-key bucket.
func (f *Frontend) scanKV(ctx context.Context, id catalog.BucketID) ([]arrow.RecordBatch, error) {
	b, err := f.kvBucket(ctx, id)
	if err != nil {
		return nil, err
	}
	return b.Scan(ctx)
}
