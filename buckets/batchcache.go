package buckets

import (
	"container/list"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
)

// batchCache keeps the decoded batches of committed stream objects in
// memory, least recently used out beyond maxBytes. Stream objects never
// change once committed, so a cached decode is never stale; a compaction
// writes a new key. Queries re-read whole tables; without this cache every
// query would re-read and re-decode every object. Safe for concurrent use.
type batchCache struct {
	maxBytes int64

	mu struct {
		sync.Mutex
		lru   *list.List // of *cachedObject, most recent first
		items map[string]*list.Element
		bytes int64
	}
}

type cachedObject struct {
	key     string
	batches []Batch
	bytes   int64
}

func newBatchCache(maxBytes int64) *batchCache {
	c := &batchCache{maxBytes: maxBytes}
	c.mu.lru = list.New()
	c.mu.items = make(map[string]*list.Element)
	return c
}

// get returns the object's batches, retained for the caller.
func (c *batchCache) get(key string) ([]Batch, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.mu.items[key]
	if !ok {
		return nil, false
	}
	c.mu.lru.MoveToFront(el)
	return retainBatches(el.Value.(*cachedObject).batches), true
}

// put stores batches (the cache takes its own references).
func (c *batchCache) put(key string, batches []Batch) {
	var size int64
	for _, b := range batches {
		size += recordBytes(b)
	}
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.items[key]; ok {
		return
	}
	c.mu.items[key] = c.mu.lru.PushFront(&cachedObject{key: key, batches: retainBatches(batches), bytes: size})
	c.mu.bytes += size
	for c.mu.bytes > c.maxBytes {
		el := c.mu.lru.Back()
		obj := el.Value.(*cachedObject)
		c.mu.lru.Remove(el)
		delete(c.mu.items, obj.key)
		c.mu.bytes -= obj.bytes
		ReleaseBatches(obj.batches)
	}
}

func (c *batchCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, el := range c.mu.items {
		ReleaseBatches(el.Value.(*cachedObject).batches)
	}
	c.mu.items = make(map[string]*list.Element)
	c.mu.lru.Init()
	c.mu.bytes = 0
}

func retainBatches(batches []Batch) []Batch {
	out := make([]Batch, len(batches))
	for i, b := range batches {
		b.Record.Retain()
		out[i] = b
	}
	return out
}

func recordBytes(b Batch) int64 {
	var n int64
	for _, col := range b.Record.Columns() {
		for _, buf := range col.Data().Buffers() {
			if buf != nil {
				n += int64(buf.Len())
			}
		}
	}
	return n
}

// readBucket returns the acknowledged batches of a stream overlapping
// [from, to): committed objects through the cache, the rest from the
// stream (the leader's memory).
func readBucket(ctx context.Context, meta Metadata, reader *s3stream.Reader, cache *batchCache, stream *s3stream.Stream, id catalog.StreamID, from, to uint64) ([]Batch, error) {
	var objects []catalog.StreamObject
	var committed uint64
	meta.Read(func(v *catalog.View) {
		st, ok := v.Streams[id]
		if !ok {
			return
		}
		committed = st.End
		i := sort.Search(len(st.Objects), func(i int) bool { return st.Objects[i].End > from })
		for ; i < len(st.Objects) && st.Objects[i].Start < to; i++ {
			objects = append(objects, st.Objects[i])
		}
	})
	var out []Batch
	for _, o := range objects {
		batches, ok := cache.get(o.Key)
		if !ok {
			entries, err := reader.Read(ctx, id, o.Start, o.End)
			if err != nil {
				ReleaseBatches(out)
				return nil, err
			}
			if batches, err = decodeEntries(entries); err != nil {
				ReleaseBatches(out)
				return nil, fmt.Errorf("stream object %s: %w", o.Key, err)
			}
			cache.put(o.Key, batches)
		}
		for _, b := range batches {
			if b.Offset+uint64(b.Record.NumRows()) > from && b.Offset < to {
				out = append(out, b)
			} else {
				b.Record.Release()
			}
		}
	}
	if committed < to && stream != nil {
		entries, err := stream.Read(ctx, max(from, committed), to)
		if err != nil {
			ReleaseBatches(out)
			return nil, err
		}
		tail, err := decodeEntries(entries)
		if err != nil {
			ReleaseBatches(out)
			return nil, err
		}
		out = append(out, tail...)
	}
	return out, nil
}
