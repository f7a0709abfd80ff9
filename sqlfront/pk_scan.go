package sqlfront

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
)

// keyScan is the one key a statement's scans of a primary-key table read:
// the bucket holding it (as the session sees it) and the encoded key; a
// nil bucket when no row can have the key.
type keyScan struct {
	b   kvBucket
	key []byte
}

// openPK reads the current (acknowledged) rows of a primary-key table's
// buckets: each bucket's rows come from one consistent snapshot of its
// tablet, in key order.
func (t *tableSource) openPK(ctx context.Context, bucketIDs []catalog.BucketID, columns []int) (array.RecordReader, error) {
	var batches []arrow.RecordBatch
	defer func() { releaseAll(batches) }()
	if k := t.r.keys[t.info.id]; k != nil {
		// The statement's WHERE fixes the whole key: its row is all a
		// scan can match.
		if k.b != nil {
			row, found, err := k.b.Get(ctx, k.key)
			if err != nil {
				return nil, fmt.Errorf("read table %q: %w", t.info.name, err)
			}
			if found {
				rec, err := k.b.Codec().DecodeRows(memory.DefaultAllocator, [][]byte{row})
				if err != nil {
					return nil, fmt.Errorf("read table %q: %w", t.info.name, err)
				}
				batches = append(batches, project(rec, columns))
				rec.Release()
			}
		}
		return array.NewRecordReader(projectSchema(t.info.schema, columns), batches)
	}
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
