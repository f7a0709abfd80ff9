package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchHeaderLen is the size of a v2 record batch header, up to and
// including the record count; Length counts from PartitionLeaderEpoch.
const batchHeaderLen = 61

// maxDecompressedBytes bounds what one compressed batch may expand to.
const maxDecompressedBytes = 256 << 20

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Batch attribute bits (KIP-98).
const (
	attrCompression   = 0x07
	attrTimestampType = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// producedBatch is one record batch of a produce request, checked and
// decompressed.
type producedBatch struct {
	header  kmsg.RecordBatch // Records is nil: see records
	records []kmsg.Record
}

// batchError is a produce error of one partition: a Kafka error code and
// the message for the client.
type batchError struct {
	code *kerr.Error
	msg  string
}

func (e *batchError) Error() string { return e.msg }

func batchErrorf(code *kerr.Error, format string, args ...any) *batchError {
	return &batchError{code: code, msg: fmt.Sprintf(format, args...)}
}

// parseBatches splits a partition's Records into v2 record batches,
// checking each one's length, magic, CRC-32C and attributes, and decodes
// their records.
func parseBatches(raw []byte) ([]producedBatch, error) {
	if len(raw) == 0 {
		return nil, batchErrorf(kerr.InvalidRecord, "the partition has no records")
	}
	var out []producedBatch
	for len(raw) > 0 {
		if len(raw) < 17 {
			return nil, batchErrorf(kerr.CorruptMessage, "a record batch is cut short (%d bytes)", len(raw))
		}
		if magic := int8(raw[16]); magic != 2 {
			return nil, batchErrorf(kerr.UnsupportedForMessageFormat,
				"message format v%d is not supported: mink takes record batches of magic v2 (Kafka 0.11 and later clients)", magic)
		}
		if len(raw) < batchHeaderLen {
			return nil, batchErrorf(kerr.CorruptMessage, "a record batch is cut short (%d bytes)", len(raw))
		}
		length := int(int32(binary.BigEndian.Uint32(raw[8:])))
		if length < batchHeaderLen-12 || 12+length > len(raw) {
			return nil, batchErrorf(kerr.CorruptMessage, "record batch length %d does not fit the %d bytes sent", length, len(raw))
		}
		one := raw[:12+length]
		raw = raw[12+length:]
		if sum := crc32.Checksum(one[21:], crc32c); sum != binary.BigEndian.Uint32(one[17:]) {
			return nil, batchErrorf(kerr.CorruptMessage, "record batch CRC-32C mismatch: the batch is corrupt")
		}
		var b producedBatch
		if err := b.header.ReadFrom(one); err != nil {
			return nil, batchErrorf(kerr.CorruptMessage, "record batch: %v", err)
		}
		if b.header.Attributes&attrControl != 0 || b.header.Attributes&attrTransactional != 0 {
			return nil, batchErrorf(kerr.InvalidRecord, "transactional and control batches are not supported")
		}
		if b.header.NumRecords <= 0 {
			return nil, batchErrorf(kerr.InvalidRecord, "a record batch has %d records", b.header.NumRecords)
		}
		if b.header.LastOffsetDelta != b.header.NumRecords-1 {
			return nil, batchErrorf(kerr.InvalidRecord, "last offset delta %d with %d records", b.header.LastOffsetDelta, b.header.NumRecords)
		}
		data, err := decompress(int(b.header.Attributes&attrCompression), b.header.Records)
		if err != nil {
			return nil, err
		}
		b.header.Records = nil
		b.records = make([]kmsg.Record, 0, b.header.NumRecords)
		for i := 0; i < int(b.header.NumRecords); i++ {
			var r kmsg.Record
			n, err := readRecord(data, &r)
			if err != nil {
				return nil, batchErrorf(kerr.CorruptMessage, "record %d of the batch: %v", i, err)
			}
			if r.OffsetDelta != int32(i) {
				return nil, batchErrorf(kerr.InvalidRecord, "record %d of the batch has offset delta %d", i, r.OffsetDelta)
			}
			data = data[n:]
			b.records = append(b.records, r)
		}
		if len(data) != 0 {
			return nil, batchErrorf(kerr.CorruptMessage, "%d bytes follow the batch's %d records", len(data), b.header.NumRecords)
		}
		out = append(out, b)
	}
	return out, nil
}

// readRecord reads one record (its varint length, then the body) and
// returns the bytes it took.
func readRecord(data []byte, r *kmsg.Record) (int, error) {
	length, n := binary.Varint(data)
	if n <= 0 || length < 0 || int64(len(data)-n) < length {
		return 0, errors.New("bad record length")
	}
	end := n + int(length)
	if err := r.ReadFrom(data[:end]); err != nil {
		return 0, err
	}
	return end, nil
}

var (
	zstdOnce    sync.Once
	zstdDecoder *zstd.Decoder
	zstdErr     error
)

// decompress returns the records of a batch with compression codec.
func decompress(codec int, data []byte) ([]byte, error) {
	var r io.Reader
	switch codec {
	case 0:
		return data, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, batchErrorf(kerr.CorruptMessage, "gzip: %v", err)
		}
		r = zr
	case 2:
		return unsnappy(data)
	case 3:
		r = lz4.NewReader(bytes.NewReader(data))
	case 4:
		zstdOnce.Do(func() {
			zstdDecoder, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecompressedBytes))
		})
		if zstdErr != nil {
			return nil, batchErrorf(kerr.UnknownServerError, "zstd: %v", zstdErr)
		}
		out, err := zstdDecoder.DecodeAll(data, nil)
		if err != nil {
			return nil, batchErrorf(kerr.CorruptMessage, "zstd: %v", err)
		}
		return out, nil
	default:
		return nil, batchErrorf(kerr.CorruptMessage, "unknown compression codec %d", codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressedBytes+1))
	if err != nil {
		return nil, batchErrorf(kerr.CorruptMessage, "decompress: %v", err)
	}
	if len(out) > maxDecompressedBytes {
		return nil, batchErrorf(kerr.MessageTooLarge, "a batch decompresses to more than %d bytes", maxDecompressedBytes)
	}
	return out, nil
}

// xerialMagic starts snappy data in the framing the Java client writes.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// unsnappy decodes raw snappy (librdkafka, franz-go) and the Java client's
// xerial framing (a 16-byte header, then 4-byte-length-prefixed blocks).
func unsnappy(data []byte) ([]byte, error) {
	decode := func(block []byte) ([]byte, error) {
		n, err := snappy.DecodedLen(block)
		if err == nil && n > maxDecompressedBytes {
			return nil, batchErrorf(kerr.MessageTooLarge, "a batch decompresses to more than %d bytes", maxDecompressedBytes)
		}
		out, err := snappy.Decode(nil, block)
		if err != nil {
			return nil, batchErrorf(kerr.CorruptMessage, "snappy: %v", err)
		}
		return out, nil
	}
	if !bytes.HasPrefix(data, xerialMagic) {
		return decode(data)
	}
	if len(data) < 16 {
		return nil, batchErrorf(kerr.CorruptMessage, "snappy: xerial header cut short")
	}
	data = data[16:]
	var out []byte
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, batchErrorf(kerr.CorruptMessage, "snappy: xerial block cut short")
		}
		n := int(binary.BigEndian.Uint32(data))
		if n > len(data)-4 {
			return nil, batchErrorf(kerr.CorruptMessage, "snappy: xerial block cut short")
		}
		block, err := decode(data[4 : 4+n])
		if err != nil {
			return nil, err
		}
		if out = append(out, block...); len(out) > maxDecompressedBytes {
			return nil, batchErrorf(kerr.MessageTooLarge, "a batch decompresses to more than %d bytes", maxDecompressedBytes)
		}
		data = data[4+n:]
	}
	return out, nil
}

// fetchedRecord is one row as a Kafka record.
type fetchedRecord struct {
	key, value []byte
	headers    []kmsg.Header
	timestamp  int64 // milliseconds
}

// maxRecordOverhead bounds the bytes a record takes beyond its key, value
// and headers' bytes: its length, attributes, timestamp and offset deltas,
// and the lengths of its key, value and header count.
const maxRecordOverhead = 5 + 1 + 10 + 5 + 5 + 5 + 5

// encodedSize bounds the bytes r takes in a record batch.
func (r *fetchedRecord) encodedSize() int {
	n := maxRecordOverhead + len(r.key) + len(r.value)
	for _, h := range r.headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// appendBatch appends an uncompressed v2 record batch of records, the
// first at offset base, to dst, encoding each record in place.
func appendBatch(dst []byte, base int64, leaderEpoch int32, records []fetchedRecord) []byte {
	first, maxTS := int64(0), int64(0)
	size := batchHeaderLen
	for i := range records {
		r := &records[i]
		if i == 0 || r.timestamp < first {
			first = r.timestamp
		}
		if i == 0 || r.timestamp > maxTS {
			maxTS = r.timestamp
		}
		size += r.encodedSize()
	}
	dst = slices.Grow(dst, size)
	start := len(dst)
	dst = append(dst, make([]byte, batchHeaderLen)...)
	var scratch []byte
	for i := range records {
		r := &records[i]
		scratch = appendRecordBody(scratch[:0], r, r.timestamp-first, int32(i))
		dst = binary.AppendVarint(dst, int64(len(scratch)))
		dst = append(dst, scratch...)
	}
	h := dst[start:]
	binary.BigEndian.PutUint64(h[0:], uint64(base))
	binary.BigEndian.PutUint32(h[8:], uint32(len(h)-12))
	binary.BigEndian.PutUint32(h[12:], uint32(leaderEpoch))
	h[16] = 2                             // magic
	binary.BigEndian.PutUint16(h[21:], 0) // attributes: no compression, CreateTime
	binary.BigEndian.PutUint32(h[23:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(h[27:], uint64(first))
	binary.BigEndian.PutUint64(h[35:], uint64(maxTS))
	binary.BigEndian.PutUint64(h[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(h[51:], ^uint16(0)) // producer epoch -1
	binary.BigEndian.PutUint32(h[53:], ^uint32(0)) // first sequence -1
	binary.BigEndian.PutUint32(h[57:], uint32(len(records)))
	binary.BigEndian.PutUint32(h[17:], crc32.Checksum(h[21:], crc32c))
	return dst
}

// appendRecordBody appends a record after its length: attributes,
// timestamp delta, offset delta, key, value, headers.
func appendRecordBody(dst []byte, r *fetchedRecord, tsDelta int64, offsetDelta int32) []byte {
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendVarintBytes(dst, r.key)
	dst = appendVarintBytes(dst, r.value)
	dst = binary.AppendVarint(dst, int64(len(r.headers)))
	for _, h := range r.headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendVarintBytes(dst, h.Value)
	}
	return dst
}

// appendVarintBytes appends b with its varint length, -1 for nil.
func appendVarintBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
