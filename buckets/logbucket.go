package buckets

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
)

// Batch is one appended record batch and the offset of its first row. Row
// offsets are dense per bucket: a batch of n rows at offset o holds offsets
// [o, o+n).
type Batch struct {
	Offset uint64
	Record arrow.RecordBatch
}

// Release releases every batch's record.
func ReleaseBatches(batches []Batch) {
	for _, b := range batches {
		b.Record.Release()
	}
}

// LogBucket is a log bucket open on its leader: an append-only stream of
// Arrow record batches, one s3stream entry per batch, one offset per row.
type LogBucket struct {
	id     catalog.BucketID
	epoch  uint64
	stream *s3stream.Stream
	m      *Manager
}

// ID is the bucket id.
func (b *LogBucket) ID() catalog.BucketID { return b.id }

// Epoch is the leader epoch the bucket is open at.
func (b *LogBucket) Epoch() uint64 { return b.epoch }

// End is the acknowledged end offset.
func (b *LogBucket) End() uint64 { return b.stream.End() }

// Append appends rec and returns the offset of its first row once it is
// durable. An empty record appends nothing.
func (b *LogBucket) Append(ctx context.Context, rec arrow.RecordBatch) (uint64, error) {
	if rec.NumRows() == 0 {
		return b.stream.End(), nil
	}
	payload, err := encodeBatch(rec)
	if err != nil {
		return 0, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	return b.stream.Append(ctx, payload, uint32(rec.NumRows()))
}

// AppendAsync queues rec and returns without waiting for durability; Wait
// on the result. Batches queued by one goroutine keep their order. nil for
// an empty record.
func (b *LogBucket) AppendAsync(ctx context.Context, rec arrow.RecordBatch) (*s3stream.PendingAppend, error) {
	if rec.NumRows() == 0 {
		return nil, nil
	}
	payload, err := encodeBatch(rec)
	if err != nil {
		return nil, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	return b.stream.AppendAsync(ctx, payload, uint32(rec.NumRows()))
}

// Read returns the batches overlapping row offsets [from, to), up to the
// acknowledged end. The first batch may start before from.
func (b *LogBucket) Read(ctx context.Context, from, to uint64) ([]Batch, error) {
	to = min(to, b.stream.End())
	if b.m == nil {
		entries, err := b.stream.Read(ctx, from, to)
		if err != nil {
			return nil, fmt.Errorf("bucket %d: %w", b.id, err)
		}
		return decodeEntries(entries)
	}
	out, err := readBucket(ctx, b.m.cfg.Meta, b.m.node.Reader(), b.m.batches, b.stream, catalog.StreamID(b.id), from, to)
	if err != nil {
		return nil, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	return out, nil
}

func encodeBatch(rec arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	return buf.Bytes(), nil
}

func decodeBatch(payload []byte) (arrow.RecordBatch, error) {
	r, err := ipc.NewReader(bytes.NewReader(payload), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("decode batch: %w", err)
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("decode batch: %w", err)
		}
		return nil, fmt.Errorf("decode batch: no record in entry")
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

func decodeEntries(entries []s3stream.Entry) ([]Batch, error) {
	out := make([]Batch, 0, len(entries))
	for _, e := range entries {
		rec, err := decodeBatch(e.Payload)
		if err != nil {
			ReleaseBatches(out)
			return nil, fmt.Errorf("offset %d: %w", e.Offset, err)
		}
		if uint64(rec.NumRows()) != uint64(e.Count) {
			rec.Release()
			ReleaseBatches(out)
			return nil, fmt.Errorf("offset %d: entry says %d rows, batch has %d: %w", e.Offset, e.Count, rec.NumRows(), s3stream.ErrCorrupt)
		}
		out = append(out, Batch{Offset: e.Offset, Record: rec})
	}
	return out, nil
}
