package sqlfront

import (
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
)

func init() {
	localKVBucket = func(m *buckets.Manager, id catalog.BucketID) (kvBucket, error) {
		b, err := m.KVBucket(id)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}
