package s3stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// writeStreamObjects writes entries, which start at offset start and are
// contiguous, as stream objects of at most maxBytes each (an entry is never
// split). Each object is created once: a retry with the same range writes
// the same bytes, so an earlier attempt whose response was lost is success.
//
// Each object's At is the time it was written: later than every append in it
// (log_retention ages data by it).
func writeStreamObjects(ctx context.Context, store objstore.Store, stream catalog.StreamID, epoch, start uint64, entries []Entry, maxBytes int) ([]catalog.StreamObject, error) {
	var objects []catalog.StreamObject
	at := time.Now().UTC()
	for len(entries) > 0 {
		if entries[0].Offset != start {
			panic(fmt.Sprintf("s3stream: stream %d entries start at %d, want %d", stream, entries[0].Offset, start))
		}
		n, size := 0, objHeader+trailer
		for n < len(entries) && (n == 0 || size+objEntryHdr+len(entries[n].Payload) <= maxBytes) {
			if n > 0 && entries[n].Offset != entries[n-1].End() {
				panic(fmt.Sprintf("s3stream: stream %d entry at %d follows one ending at %d", stream, entries[n].Offset, entries[n-1].End()))
			}
			size += objEntryHdr + len(entries[n].Payload)
			n++
		}
		end := entries[n-1].End()
		data := encodeStreamObject(streamObject{Stream: stream, Epoch: epoch, Start: start, End: end, Entries: entries[:n]})
		key := streamObjectKey(stream, start, end, epoch)
		if err := putCreateOnly(ctx, store, key, data); err != nil {
			return nil, fmt.Errorf("write stream object: %w", err)
		}
		objects = append(objects, catalog.StreamObject{Key: key, Start: start, End: end, Size: int64(len(data)), At: at})
		start, entries = end, entries[n:]
	}
	return objects, nil
}

// Reader reads committed stream data: any node can read any stream's
// offsets below its committed end. Safe for concurrent use.
type Reader struct {
	store objstore.Store
	meta  Metadata
	cache *Cache
}

// NewReader returns a reader; cache may be nil.
func NewReader(store objstore.Store, meta Metadata, cache *Cache) *Reader {
	return &Reader{store: store, meta: meta, cache: cache}
}

// CommittedEnd is the stream's committed end offset in the view.
func (r *Reader) CommittedEnd(stream catalog.StreamID) uint64 {
	var end uint64
	r.meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[stream]; ok {
			end = st.End
		}
	})
	return end
}

// Start is the stream's start offset in the view: offsets below it were
// trimmed (catalog.TrimStream) and are no longer readable.
func (r *Reader) Start(stream catalog.StreamID) uint64 {
	var start uint64
	r.meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[stream]; ok {
			start = st.Start
		}
	})
	return start
}

// trimmedError is the error of a read from offset from of a stream trimmed
// to start.
func trimmedError(stream catalog.StreamID, from, start uint64) error {
	return fmt.Errorf("read stream %d from offset %d: %w: the stream starts at offset %d (older data was removed by log_retention)",
		stream, from, ErrTrimmed, start)
}

// Read returns the committed entries overlapping [from, to), in order. Offsets
// beyond the committed end are not returned. A read from below the stream's
// start fails with ErrTrimmed; so does a read that raced a trim and found an
// object already deleted by the collector.
func (r *Reader) Read(ctx context.Context, stream catalog.StreamID, from, to uint64) ([]Entry, error) {
	var objects []catalog.StreamObject
	var start uint64
	r.meta.Read(func(v *catalog.View) {
		st, ok := v.Streams[stream]
		if !ok {
			return
		}
		start = st.Start
		if from < start {
			return
		}
		// Objects are sorted by offset and contiguous.
		i := sort.Search(len(st.Objects), func(i int) bool { return st.Objects[i].End > from })
		for ; i < len(st.Objects) && st.Objects[i].Start < to; i++ {
			objects = append(objects, st.Objects[i])
		}
	})
	if from < start && from < to {
		return nil, trimmedError(stream, from, start)
	}
	var out []Entry
	for _, o := range objects {
		data, err := r.get(ctx, o.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			// The view we planned with is older than a trim whose objects
			// the collector has deleted since (after its reader delay).
			if now := r.Start(stream); o.Start < now {
				return nil, trimmedError(stream, from, now)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("read stream %d: %w", stream, err)
		}
		obj, err := decodeStreamObject(data)
		if err == nil && (obj.Stream != stream || obj.Start != o.Start || obj.End != o.End) {
			err = fmt.Errorf("%w: holds stream %d [%d, %d), view says [%d, %d)", ErrCorrupt, obj.Stream, obj.Start, obj.End, o.Start, o.End)
		}
		if err != nil {
			if r.cache != nil {
				r.cache.remove(o.Key)
			}
			return nil, fmt.Errorf("read stream %d: object %s: %w", stream, o.Key, err)
		}
		for _, e := range obj.Entries {
			if e.End() > from && e.Offset < to {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (r *Reader) get(ctx context.Context, key string) ([]byte, error) {
	if r.cache != nil {
		return r.cache.Get(ctx, r.store, key)
	}
	return r.store.Get(ctx, key)
}
