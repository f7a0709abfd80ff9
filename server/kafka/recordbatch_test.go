package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// buildBatch encodes records as a v2 batch compressed with codec.
func buildBatch(t *testing.T, codec int, base int64, values ...string) []byte {
	t.Helper()
	var body []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: []byte("k" + v), Value: []byte(v),
			Headers: []kmsg.Header{{Key: "h", Value: []byte(v)}}}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		body = r.AppendTo(body)
	}
	var compressed []byte
	switch codec {
	case 0:
		compressed = body
	case 1:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
		compressed = buf.Bytes()
	case 2:
		compressed = snappy.Encode(nil, body)
	case 3:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(body)
		w.Close()
		compressed = buf.Bytes()
	case 4:
		enc, _ := zstd.NewWriter(nil)
		compressed = enc.EncodeAll(body, nil)
	case 5: // snappy in the Java client's xerial framing
		compressed = append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
		half := len(body) / 2
		for _, part := range [][]byte{body[:half], body[half:]} {
			block := snappy.Encode(nil, part)
			compressed = binary.BigEndian.AppendUint32(compressed, uint32(len(block)))
			compressed = append(compressed, block...)
		}
		codec = 2
	}
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: 1000, MaxTimestamp: 1000 + int64(len(values)), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: compressed}
	b.Length = int32(batchHeaderLen - 12 + len(compressed))
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	return raw
}

func TestParseBatchesCodecs(t *testing.T) {
	for codec, name := range []string{"none", "gzip", "snappy", "lz4", "zstd", "snappy-xerial"} {
		t.Run(name, func(t *testing.T) {
			raw := append(buildBatch(t, codec, 0, "a", "bb", "ccc"), buildBatch(t, codec, 3, "d")...)
			batches, err := parseBatches(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(batches) != 2 || len(batches[0].records) != 3 || len(batches[1].records) != 1 {
				t.Fatalf("got %d batches", len(batches))
			}
			for i, want := range []string{"a", "bb", "ccc"} {
				r := batches[0].records[i]
				if string(r.Value) != want || string(r.Key) != "k"+want || len(r.Headers) != 1 || string(r.Headers[0].Value) != want || r.TimestampDelta64 != int64(i) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
		})
	}
}

func TestParseBatchesRejects(t *testing.T) {
	good := buildBatch(t, 0, 0, "a", "b")
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	resign := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
		return b
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want *kerr.Error
	}{
		{"empty", nil, kerr.InvalidRecord},
		{"bad crc", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), kerr.CorruptMessage},
		{"magic 1", mutate(func(b []byte) []byte { b[16] = 1; return b }), kerr.UnsupportedForMessageFormat},
		{"magic 0", mutate(func(b []byte) []byte { b[16] = 0; return b }), kerr.UnsupportedForMessageFormat},
		{"cut short", good[:40], kerr.CorruptMessage},
		{"length past the end", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 1<<20); return b }), kerr.CorruptMessage},
		{"trailing bytes", append(append([]byte(nil), good...), 1, 2, 3), kerr.CorruptMessage},
		{"transactional", mutate(func(b []byte) []byte { b[22] |= attrTransactional; return resign(b) }), kerr.InvalidRecord},
		{"control", mutate(func(b []byte) []byte { b[22] |= attrControl; return resign(b) }), kerr.InvalidRecord},
		{"unknown codec", mutate(func(b []byte) []byte { b[22] |= 7; return resign(b) }), kerr.CorruptMessage},
		{"gzip garbage", mutate(func(b []byte) []byte { b[22] |= 1; return resign(b) }), kerr.CorruptMessage},
		{"more records than sent", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 3)
			binary.BigEndian.PutUint32(b[23:], 2)
			return resign(b)
		}), kerr.CorruptMessage},
		{"wrong last offset delta", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[23:], 5); return resign(b) }), kerr.InvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBatches(tc.raw)
			var be *batchError
			if !errors.As(err, &be) || be.code != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if be.msg == "" {
				t.Fatal("no message for the client")
			}
		})
	}
}

// A batch the listener writes for a fetch is one its own parser, and so
// any client, reads back: same records, CRC right.
func TestAppendBatchRoundTrip(t *testing.T) {
	records := []fetchedRecord{
		{key: []byte("k1"), value: []byte("v1"), timestamp: 5000, headers: []kmsg.Header{{Key: "a", Value: []byte("b")}}},
		{key: nil, value: []byte{}, timestamp: 4000},
		{key: []byte("k3"), value: nil, timestamp: 7000},
	}
	raw := appendBatch([]byte("prefix"), 42, -1, records)
	batches, err := parseBatches(raw[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	b := batches[0]
	if b.header.FirstOffset != 42 || b.header.FirstTimestamp != 4000 || b.header.MaxTimestamp != 7000 || len(b.records) != 3 {
		t.Fatalf("header %+v, %d records", b.header, len(b.records))
	}
	for i, r := range b.records {
		want := records[i]
		if !bytes.Equal(r.Key, want.key) || !bytes.Equal(r.Value, want.value) || (r.Key == nil) != (want.key == nil) ||
			(r.Value == nil) != (want.value == nil) || b.header.FirstTimestamp+r.TimestampDelta64 != want.timestamp {
			t.Fatalf("record %d: %+v, want %+v", i, r, want)
		}
	}
	if len(b.records[0].Headers) != 1 || string(b.records[0].Headers[0].Value) != "b" {
		t.Fatalf("headers %+v", b.records[0].Headers)
	}
}

func TestParseRequest(t *testing.T) {
	all := func(key, version int16) bool { return key != int16(kmsg.Fetch) || version >= 4 }
	frame := func(key, version int16, body []byte) []byte {
		var b []byte
		b = binary.BigEndian.AppendUint16(b, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 77)
		b = binary.BigEndian.AppendUint16(b, 2)
		b = append(b, "id"...)
		return append(b, body...)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9) // flexible: header v2
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	body := append([]byte{0}, meta.AppendTo(nil)...) // empty header tags
	req, err := parseRequest(frame(3, 9, body), all)
	if err != nil {
		t.Fatal(err)
	}
	if req.correlation != 77 || req.clientID != "id" || *req.body.(*kmsg.MetadataRequest).Topics[0].Topic != "t" {
		t.Fatalf("parsed %+v", req)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"unknown key", frame(999, 0, nil)},
		{"unsupported version", frame(int16(kmsg.Fetch), 1, nil)},
		{"client id past the end", append(frame(3, 1, nil)[:8], 0, 50)},
		{"body does not parse", frame(3, 1, []byte{0xff, 0xff, 0xff})},
		{"bad header tags", frame(3, 9, []byte{0xff})},
	} {
		if _, err := parseRequest(tc.frame, all); err == nil {
			t.Errorf("%s: parsed", tc.name)
		}
	}
	var uv *unsupportedVersionError
	if _, err := parseRequest(frame(int16(kmsg.Fetch), 1, nil), all); !errors.As(err, &uv) {
		t.Fatalf("unsupported version: %v", err)
	}
}

func TestProducerIDsUnique(t *testing.T) {
	seen := map[int64]string{}
	for node := 1; node <= 3; node++ {
		ids := newProducerIDs(catalog.NodeID(node))
		for epoch := uint64(1); epoch <= 3; epoch++ {
			for i := 0; i < 100; i++ {
				id, err := ids.allocate(epoch)
				if err != nil || id <= 0 {
					t.Fatalf("allocate: %d, %v", id, err)
				}
				where := fmt.Sprintf("node %d epoch %d #%d", node, epoch, i)
				if prev, dup := seen[id]; dup {
					t.Fatalf("producer id %d handed out twice: %s and %s", id, prev, where)
				}
				seen[id] = where
			}
		}
	}
	if _, err := newProducerIDs(1).allocate(0); err == nil {
		t.Fatal("an id was handed out while the node has no epoch")
	}
}

func TestSequenceChecks(t *testing.T) {
	bp := &bucketProducers{producers: map[int64]*producerState{}}
	bp.loaded = true
	// Producer 7 epoch 0 wrote sequences 0–9 (offset 0) and 10–14 (offset 10).
	bp.recordLocked(7, 0, seqBatch{first: 0, last: 9, offset: 0})
	bp.recordLocked(7, 0, seqBatch{first: 10, last: 14, offset: 10})
	for _, tc := range []struct {
		name         string
		id           int64
		epoch        int16
		first        int32
		n            int
		wantErr      *kerr.Error
		wantDupAtOff int64 // -1: not a duplicate
	}{
		{"next in order", 7, 0, 15, 3, nil, -1},
		{"retry of the last batch", 7, 0, 10, 5, nil, 10},
		{"retry of an earlier batch", 7, 0, 0, 10, nil, 0},
		{"a gap", 7, 0, 17, 1, kerr.OutOfOrderSequenceNumber, -1},
		{"an old sequence not in the window", 7, 0, 5, 2, kerr.OutOfOrderSequenceNumber, -1},
		{"a stale epoch", 7, -1, 15, 1, kerr.InvalidProducerEpoch, -1},
		{"a new epoch from 0", 7, 1, 0, 1, nil, -1},
		{"a new epoch not from 0", 7, 1, 3, 1, kerr.OutOfOrderSequenceNumber, -1},
		{"an unknown producer at any sequence", 8, 0, 123, 1, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bp.checkLocked(tc.id, tc.epoch, tc.first, tc.n)
			if c.err != tc.wantErr {
				t.Fatalf("error %v, want %v", c.err, tc.wantErr)
			}
			if got := c.duplicate; (got == nil) != (tc.wantDupAtOff < 0) || got != nil && int64(got.offset) != tc.wantDupAtOff {
				t.Fatalf("duplicate %+v, want at offset %d", got, tc.wantDupAtOff)
			}
		})
	}
	// The window keeps the last five batches.
	for i := int32(0); i < 10; i++ {
		bp.recordLocked(9, 0, seqBatch{first: i, last: i, offset: uint64(i)})
	}
	if c := bp.checkLocked(9, 0, 4, 1); c.err == nil {
		t.Fatal("a batch older than the window was taken for a duplicate or appended")
	}
	if c := bp.checkLocked(9, 0, 5, 1); c.duplicate == nil || c.duplicate.offset != 5 {
		t.Fatalf("the oldest batch of the window: %+v", c)
	}
}

func TestProducerStateBounded(t *testing.T) {
	bp := &bucketProducers{producers: map[int64]*producerState{}, loaded: true}
	for id := int64(1); id <= maxProducersPerBucket+5; id++ {
		bp.recordLocked(id, 0, seqBatch{first: 0, last: 0, offset: uint64(id)})
	}
	if n := len(bp.producers); n > maxProducersPerBucket {
		t.Fatalf("%d producers kept, bound %d", n, maxProducersPerBucket)
	}
	if bp.producers[1] != nil || bp.producers[maxProducersPerBucket+5] == nil {
		t.Fatal("the oldest producer was kept or the newest forgotten")
	}
}

func TestTopicOptions(t *testing.T) {
	cfg := func(kv ...string) []kmsg.CreateTopicsRequestTopicConfig {
		var out []kmsg.CreateTopicsRequestTopicConfig
		for i := 0; i < len(kv); i += 2 {
			out = append(out, kmsg.CreateTopicsRequestTopicConfig{Name: kv[i], Value: kmsg.StringPtr(kv[i+1])})
		}
		return out
	}
	opts, err := topicOptions(cfg("retention.ms", "3600000", "max.message.bytes", "51200", "cleanup.policy", "delete",
		"segment.bytes", "1024", "compression.type", "zstd", "min.insync.replicas", "1", "retention.bytes", "-1"))
	if err != nil || opts[optionLogRetention] != "1h0m0s" || opts[optionMaxMessageBytes] != "51200" || len(opts) != 2 {
		t.Fatalf("options %v, %v", opts, err)
	}
	if opts, err := topicOptions(cfg("retention.ms", "-1")); err != nil || len(opts) != 0 {
		t.Fatalf("retention.ms -1: %v %v", opts, err)
	}
	for _, bad := range [][]string{
		{"cleanup.policy", "compact"}, {"cleanup.policy", "compact,delete"}, {"retention.ms", "soon"}, {"retention.ms", "0"},
		{"retention.bytes", "1000"}, {"max.message.bytes", "0"}, {"compression.type", "brotli"},
		{"message.timestamp.type", "LogAppendTime"}, {"min.insync.replicas", "2"}, {"no.such.config", "x"},
	} {
		if _, err := topicOptions(cfg(bad...)); err == nil || err.code != kerr.InvalidConfig || err.msg == "" {
			t.Errorf("%v: %v, want INVALID_CONFIG with a message", bad, err)
		}
	}
	if err := checkBatchSizes(buildBatch(t, 0, 0, string(make([]byte, 2000))), 1000); err == nil || err.code != kerr.MessageTooLarge {
		t.Fatalf("a 2000-byte batch under a 1000-byte limit: %v", err)
	}
	if err := checkBatchSizes(buildBatch(t, 0, 0, "small"), 1000); err != nil {
		t.Fatal(err)
	}
}
