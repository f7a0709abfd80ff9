// Package ipcbatch encodes and decodes Arrow IPC streams of one record
// batch (a schema message, one record batch message, the end-of-stream
// marker), the payload of a bucket's stream entry, without encoding or
// parsing the schema again for every batch.
//
// A one-row INSERT makes a one-row batch, and an ipc.Writer spends most
// of its time on that batch's schema message; reading the batch back an
// ipc.Reader spends half of its time parsing the schema. An Encoder keeps
// the encoded schema message of the schemas it has seen; a Decoder keeps,
// for each schema message it has seen, readers that have already parsed
// it and are fed one record batch message at a time. The bytes are those
// of ipc.Writer, and what Decode reads is any such stream.
package ipcbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// maxSchemas bounds the schemas an Encoder or Decoder keeps; past it they
// start over (a table's schema changes rarely).
const maxSchemas = 256

// continuation starts every message of a stream; eos ends the stream.
var (
	continuation = []byte{0xff, 0xff, 0xff, 0xff}
	eos          = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
)

// Encoder encodes record batches. It is safe for concurrent use.
type Encoder struct {
	mu      sync.Mutex
	schemas []encodedSchema
}

type encodedSchema struct {
	schema *arrow.Schema
	msg    []byte // the schema message, nil to use an ipc.Writer
}

// Encode appends to dst the IPC stream of rec alone, with schema as its
// schema (rec's own when nil; its fields must be rec's).
func (e *Encoder) Encode(dst []byte, rec arrow.RecordBatch, schema *arrow.Schema) ([]byte, error) {
	if schema == nil {
		schema = rec.Schema()
	}
	msg := e.schemaMessage(schema)
	if msg == nil {
		return encodeWithWriter(dst, rec, schema)
	}
	if !sameFields(schema, rec.Schema()) {
		return nil, fmt.Errorf("ipcbatch: the batch's columns are not the schema's")
	}
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("ipcbatch: encode batch: %w", err)
	}
	defer p.Release()
	buf := bytes.NewBuffer(dst)
	buf.Write(msg)
	if _, err := p.WritePayload(buf); err != nil {
		return nil, fmt.Errorf("ipcbatch: encode batch: %w", err)
	}
	buf.Write(eos)
	return buf.Bytes(), nil
}

// schemaMessage returns the encoded schema message of schema, nil for a
// schema with dictionaries (which Encode leaves to an ipc.Writer).
func (e *Encoder) schemaMessage(schema *arrow.Schema) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, s := range e.schemas {
		if s.schema == schema || s.schema.Equal(schema) && s.schema.Metadata().Equal(schema.Metadata()) {
			if i > 0 {
				e.schemas[0], e.schemas[i] = e.schemas[i], e.schemas[0]
			}
			return s.msg
		}
	}
	var msg []byte
	if !hasDictionary(schema) {
		p := ipc.GetSchemaPayload(schema, memory.DefaultAllocator)
		var buf bytes.Buffer
		_, err := p.WritePayload(&buf)
		p.Release()
		if err == nil {
			msg = buf.Bytes()
		}
	}
	if len(e.schemas) >= maxSchemas {
		e.schemas = e.schemas[:0]
	}
	e.schemas = append(e.schemas, encodedSchema{schema: schema, msg: msg})
	return msg
}

func encodeWithWriter(dst []byte, rec arrow.RecordBatch, schema *arrow.Schema) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	w := ipc.NewWriter(buf, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("ipcbatch: encode batch: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("ipcbatch: encode batch: %w", err)
	}
	return buf.Bytes(), nil
}

func sameFields(a, b *arrow.Schema) bool {
	if a == b {
		return true
	}
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

func hasDictionary(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if typeHasDictionary(f.Type) {
			return true
		}
	}
	return false
}

func typeHasDictionary(t arrow.DataType) bool {
	if t.ID() == arrow.DICTIONARY {
		return true
	}
	if n, ok := t.(arrow.NestedType); ok {
		for _, f := range n.Fields() {
			if typeHasDictionary(f.Type) {
				return true
			}
		}
	}
	return false
}

// Decoder decodes IPC streams of one record batch. It is safe for
// concurrent use.
type Decoder struct {
	mu      sync.Mutex
	schemas map[string]*sync.Pool // schema message → *streamReader
}

// Decode returns the first record batch of the IPC stream payload, of the
// stream's schema (its metadata included). The batch does not refer to
// payload.
func (d *Decoder) Decode(payload []byte) (arrow.RecordBatch, error) {
	schemaMsg, rest, err := splitSchema(payload)
	if err != nil {
		return ReadOne(payload)
	}
	pool := d.pool(schemaMsg)
	sr, _ := pool.Get().(*streamReader)
	if sr == nil {
		if sr, err = newStreamReader(schemaMsg); errors.Is(err, errDictionary) {
			return ReadOne(payload)
		} else if err != nil {
			return nil, err
		}
	}
	rec, err := sr.next(rest)
	if err != nil {
		sr.release()
		return nil, err
	}
	pool.Put(sr)
	return rec, nil
}

func (d *Decoder) pool(schemaMsg []byte) *sync.Pool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.schemas[string(schemaMsg)]; ok {
		return p
	}
	if d.schemas == nil || len(d.schemas) >= maxSchemas {
		d.schemas = map[string]*sync.Pool{}
	}
	p := &sync.Pool{}
	d.schemas[string(schemaMsg)] = p
	return p
}

// splitSchema splits a stream into its first message, which must be a
// schema message (no body), and the rest.
func splitSchema(payload []byte) (schemaMsg, rest []byte, err error) {
	if len(payload) < 8 || !bytes.Equal(payload[:4], continuation) {
		return nil, nil, errors.New("not a stream with continuation markers")
	}
	n := int64(binary.LittleEndian.Uint32(payload[4:8]))
	if n <= 0 || 8+n > int64(len(payload)) {
		return nil, nil, errors.New("bad first message length")
	}
	return payload[:8+n], payload[8+n:], nil
}

// ReadOne returns the first record batch of the IPC stream payload, read
// with an ipc.Reader of its own (for streams whose schemas differ from
// batch to batch, which a Decoder would keep to no use).
func ReadOne(payload []byte) (arrow.RecordBatch, error) {
	r, err := ipc.NewReader(bytes.NewReader(payload), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("ipcbatch: decode batch: %w", err)
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("ipcbatch: decode batch: %w", err)
		}
		return nil, fmt.Errorf("ipcbatch: decode batch: no record batch in the stream")
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// errDictionary: a schema with dictionaries, whose batches come with
// dictionary messages (Decode reads those with ReadOne).
var errDictionary = errors.New("ipcbatch: a schema with dictionaries")

// streamReader is an ipc.Reader that has read a schema message and is
// fed record batch messages one at a time.
type streamReader struct {
	feed   feed
	reader *ipc.Reader
}

func newStreamReader(schemaMsg []byte) (*streamReader, error) {
	sr := &streamReader{}
	sr.feed.r = ipc.NewMessageReader(bytes.NewReader(schemaMsg), ipc.WithAllocator(memory.DefaultAllocator))
	r, err := ipc.NewReaderFromMessageReader(&sr.feed, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		sr.feed.r.Release()
		return nil, fmt.Errorf("ipcbatch: decode batch: %w", err)
	}
	sr.reader = r
	if hasDictionary(r.Schema()) {
		sr.release()
		return nil, errDictionary
	}
	return sr, nil
}

// next decodes the record batch message that starts rest.
func (sr *streamReader) next(rest []byte) (arrow.RecordBatch, error) {
	sr.feed.r.Release()
	sr.feed.r = ipc.NewMessageReader(bytes.NewReader(rest), ipc.WithAllocator(memory.DefaultAllocator))
	sr.feed.pending = true
	if !sr.reader.Next() {
		if err := sr.reader.Err(); err != nil {
			return nil, fmt.Errorf("ipcbatch: decode batch: %w", err)
		}
		return nil, fmt.Errorf("ipcbatch: decode batch: no record batch in the stream")
	}
	rec := sr.reader.RecordBatch()
	rec.Retain()
	return rec, nil
}

func (sr *streamReader) release() {
	sr.reader.Release()
	sr.feed.r.Release()
}

// feed hands the reader the messages of its current message reader: the
// schema's first, then one message per next. Asked again before next
// feeds it, it reports the end of the stream.
type feed struct {
	r       ipc.MessageReader
	started bool
	pending bool
}

func (f *feed) Message() (*ipc.Message, error) {
	if !f.started {
		f.started = true
		return f.r.Message()
	}
	if !f.pending {
		return nil, io.EOF
	}
	f.pending = false
	m, err := f.r.Message()
	if err == nil && m.Type() != ipc.MessageRecordBatch {
		return nil, fmt.Errorf("message %s where a record batch belongs", m.Type())
	}
	return m, err
}

func (f *feed) Retain()  {}
func (f *feed) Release() {}
