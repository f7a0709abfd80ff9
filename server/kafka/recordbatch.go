package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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

// appendBatch appends an uncompressed v2 record batch of records, the
// first at offset base, to dst.
func appendBatch(dst []byte, base int64, leaderEpoch int32, records []fetchedRecord) []byte {
	b := kmsg.RecordBatch{
		FirstOffset:          base,
		PartitionLeaderEpoch: leaderEpoch,
		Magic:                2,
		LastOffsetDelta:      int32(len(records) - 1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(records)),
	}
	if len(records) > 0 {
		b.FirstTimestamp = records[0].timestamp
		b.MaxTimestamp = records[0].timestamp
	}
	for _, r := range records {
		b.FirstTimestamp = min(b.FirstTimestamp, r.timestamp)
		b.MaxTimestamp = max(b.MaxTimestamp, r.timestamp)
	}
	var body, scratch []byte
	for i, r := range records {
		rec := kmsg.Record{
			TimestampDelta64: r.timestamp - b.FirstTimestamp,
			OffsetDelta:      int32(i),
			Key:              r.key,
			Value:            r.value,
			Headers:          r.headers,
		}
		// Encoded with length 0 (one varint byte), then that byte is
		// replaced by the real length.
		scratch = rec.AppendTo(scratch[:0])
		body = binary.AppendVarint(body, int64(len(scratch)-1))
		body = append(body, scratch[1:]...)
	}
	b.Records = body
	b.Length = int32(batchHeaderLen - 12 + len(body))
	start := len(dst)
	dst = b.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[start+21:], crc32c))
	return dst
}
