package buckets

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/ipcbatch"
)

// Batch is one appended record batch and the offset of its first row. Row
// offsets are dense per bucket: a batch of n rows at offset o holds offsets
// [o, o+n).
type Batch struct {
	Offset uint64
	Record arrow.RecordBatch
	// AppendTime is when the leader appended the batch (millisecond
	// precision); zero for batches written before it was recorded.
	AppendTime time.Time
	// Producer is the Kafka idempotent producer that wrote the batch, if
	// any (docs/format/s3stream.md, "Log bucket entries").
	Producer ProducerMark
}

// ProducerMark names the idempotent Kafka producer batch an entry holds:
// the producer id and epoch and the sequence number of its first record.
// The zero mark (ID 0) means none; Kafka producer ids are never 0 here.
type ProducerMark struct {
	ID       int64
	Epoch    int16
	Sequence int32
}

// The Arrow schema metadata keys under which an entry of older mink
// carries its append time and producer mark. Decoding removes them, so
// readers see the table's schema.
const (
	metaAppendTime       = "mink.append_time_ms"
	metaProducerID       = "mink.producer_id"
	metaProducerEpoch    = "mink.producer_epoch"
	metaProducerSequence = "mink.producer_sequence"
)

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
	if err := b.writable(ctx); err != nil {
		return 0, err
	}
	payload, err := encodeBatch(rec, ProducerMark{})
	if err != nil {
		return 0, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	return b.stream.Append(ctx, payload, uint32(rec.NumRows()))
}

// AppendAsync queues rec and returns without waiting for durability; Wait
// on the result. Batches queued by one goroutine keep their order. nil for
// an empty record.
func (b *LogBucket) AppendAsync(ctx context.Context, rec arrow.RecordBatch) (*s3stream.PendingAppend, error) {
	return b.AppendProduced(ctx, rec, ProducerMark{})
}

// AppendProduced is AppendAsync of a batch written by an idempotent Kafka
// producer: the entry keeps mark, so that a later leader can rebuild the
// producer's sequence state from the stream.
func (b *LogBucket) AppendProduced(ctx context.Context, rec arrow.RecordBatch, mark ProducerMark) (*s3stream.PendingAppend, error) {
	if rec.NumRows() == 0 {
		return nil, nil
	}
	if err := b.writable(ctx); err != nil {
		return nil, err
	}
	payload, err := encodeBatch(rec, mark)
	if err != nil {
		return nil, fmt.Errorf("bucket %d: %w", b.id, err)
	}
	return b.stream.AppendAsync(ctx, payload, uint32(rec.NumRows()))
}

// writable is nil unless this node's lease is in doubt and no renewal
// comes within leaseWait (ErrLeaseInDoubt): then no append is queued.
func (b *LogBucket) writable(ctx context.Context) error {
	if b.m == nil {
		return nil
	}
	return b.m.awaitLease(ctx, b.id)
}

// Start is the first offset still in the stream (offsets below it were
// trimmed by retention), as of the node's metadata view.
func (b *LogBucket) Start() uint64 {
	if b.m == nil {
		return 0
	}
	var start uint64
	b.m.cfg.Meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[catalog.StreamID(b.id)]; ok {
			start = st.Start
		}
	})
	return start
}

// Changed is closed when the bucket's acknowledged end or state changes
// next (long-polling readers wait on it, then look again).
func (b *LogBucket) Changed() <-chan struct{} { return b.stream.Changed() }

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

// A log entry's payload is entryMagic, the entry header (append time,
// producer mark) and the Arrow IPC stream of its batch
// (docs/format/s3stream.md, "Log bucket entries"). Entries of older mink
// are the IPC stream alone, the header's fields in its schema metadata.
var entryMagic = [4]byte{'M', 'K', 'B', '1'}

const entryHeaderLen = len(entryMagic) + 8 + 8 + 2 + 4

// entryCodec encodes and decodes the IPC streams of entries, keeping what
// it can of their schemas from batch to batch.
var entryCodec struct {
	enc ipcbatch.Encoder
	dec ipcbatch.Decoder
}

func encodeBatch(rec arrow.RecordBatch, mark ProducerMark) ([]byte, error) {
	buf := make([]byte, entryHeaderLen, entryHeaderLen+512)
	copy(buf, entryMagic[:])
	h := buf[len(entryMagic):]
	binary.LittleEndian.PutUint64(h, uint64(time.Now().UnixMilli()))
	binary.LittleEndian.PutUint64(h[8:], uint64(mark.ID))
	binary.LittleEndian.PutUint16(h[16:], uint16(mark.Epoch))
	binary.LittleEndian.PutUint32(h[18:], uint32(mark.Sequence))
	schema := rec.Schema()
	if schema.HasMetadata() {
		schema = arrow.NewSchema(schema.Fields(), nil)
	}
	buf, err := entryCodec.enc.Encode(buf, rec, schema)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	return buf, nil
}

// decodeBatch decodes an entry's payload into a batch (Offset unset),
// its record of the table's schema without the entry's metadata.
func decodeBatch(payload []byte) (Batch, error) {
	if len(payload) < entryHeaderLen || [4]byte(payload[:4]) != entryMagic {
		return decodeOldBatch(payload)
	}
	rec, err := entryCodec.dec.Decode(payload[entryHeaderLen:])
	if err != nil {
		return Batch{}, fmt.Errorf("decode batch: %w: %w", s3stream.ErrCorrupt, err)
	}
	h := payload[len(entryMagic):]
	b := Batch{Record: rec}
	if ms := int64(binary.LittleEndian.Uint64(h)); ms != 0 {
		b.AppendTime = time.UnixMilli(ms).UTC()
	}
	if id := int64(binary.LittleEndian.Uint64(h[8:])); id != 0 {
		b.Producer = ProducerMark{ID: id, Epoch: int16(binary.LittleEndian.Uint16(h[16:])), Sequence: int32(binary.LittleEndian.Uint32(h[18:]))}
	}
	return b, nil
}

// decodeOldBatch decodes the payload of an entry of older mink: the IPC
// stream alone, the entry's header in its schema metadata.
func decodeOldBatch(payload []byte) (Batch, error) {
	rec, err := ipcbatch.ReadOne(payload)
	if err != nil {
		return Batch{}, fmt.Errorf("decode batch: %w", err)
	}
	md := rec.Schema().Metadata()
	if md.Len() == 0 {
		return Batch{Record: rec}, nil
	}
	defer rec.Release()
	var b Batch
	if ms, err := strconv.ParseInt(metaValue(md, metaAppendTime), 10, 64); err == nil {
		b.AppendTime = time.UnixMilli(ms).UTC()
	}
	if id, err := strconv.ParseInt(metaValue(md, metaProducerID), 10, 64); err == nil && id != 0 {
		epoch, err1 := strconv.ParseInt(metaValue(md, metaProducerEpoch), 10, 16)
		seq, err2 := strconv.ParseInt(metaValue(md, metaProducerSequence), 10, 32)
		if err1 != nil || err2 != nil {
			return Batch{}, fmt.Errorf("decode batch: producer %d with a bad epoch or sequence: %w", id, s3stream.ErrCorrupt)
		}
		b.Producer = ProducerMark{ID: id, Epoch: int16(epoch), Sequence: int32(seq)}
	}
	b.Record = array.NewRecordBatch(arrow.NewSchema(rec.Schema().Fields(), nil), rec.Columns(), rec.NumRows())
	return b, nil
}

func metaValue(md arrow.Metadata, key string) string {
	if i := md.FindKey(key); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

func decodeEntries(entries []s3stream.Entry) ([]Batch, error) {
	out := make([]Batch, 0, len(entries))
	for _, e := range entries {
		b, err := decodeBatch(e.Payload)
		if err != nil {
			ReleaseBatches(out)
			return nil, fmt.Errorf("offset %d: %w", e.Offset, err)
		}
		if uint64(b.Record.NumRows()) != uint64(e.Count) {
			b.Record.Release()
			ReleaseBatches(out)
			return nil, fmt.Errorf("offset %d: entry says %d rows, batch has %d: %w", e.Offset, e.Count, b.Record.NumRows(), s3stream.ErrCorrupt)
		}
		b.Offset = e.Offset
		out = append(out, b)
	}
	return out, nil
}
