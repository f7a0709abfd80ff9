package sqlfront

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
)

func init() {
	localKVBucket = func(m *buckets.Manager, id catalog.BucketID) (kvBucket, error) {
		b, err := m.KVBucket(id)
		if err != nil {
			return nil, err
		}
		return localKV{b}, nil
	}
}

// localKV is a primary-key bucket this node leads.
type localKV struct{ b *buckets.KVBucket }

func (l localKV) Codec() *kvcodec.Codec { return l.b.Codec() }
func (l localKV) Write(ctx context.Context, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, uint64, error) {
	return l.b.Write(ctx, writes)
}
func (l localKV) Get(_ context.Context, key []byte) ([]byte, bool, error) { return l.b.Get(key) }
func (l localKV) Changelog(ctx context.Context) ([]buckets.Batch, error) {
	return l.b.ReadChangelog(ctx, 0, l.b.End())
}

// Scan reads the bucket's tablet from one consistent snapshot.
func (l localKV) Scan(ctx context.Context) ([]arrow.RecordBatch, error) {
	r, err := l.b.NewReader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rr, err := kv.NewRecordReader(r, l.b.Codec(), memory.DefaultAllocator, 0)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := rr.Err(); err != nil {
		releaseAll(out)
		return nil, err
	}
	return out, nil
}
