package flightsvc

import (
	"bytes"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/flightwire"
)

// batchWriter writes record batches with app_metadata to a DoGet stream.
type batchWriter interface {
	WriteWithAppMetadata(rec arrow.RecordBatch, appMetadata []byte) error
}

// msgSender is the part of a gRPC server stream the recordWriter uses.
type msgSender interface {
	SendMsg(m any) error
}

// recordWriter is flight.Writer without its copies: flight.Writer copies
// each IPC body into one buffer, which gRPC's protobuf codec copies again
// into the message's encoding. recordWriter sends each message as a
// flightwire.DataMessage whose body is the record's own buffers (and the
// IPC writer's padding), which gRPC writes to the connection from there.
// The messages are the same bytes flight.Writer sends. It needs a server
// with flightwire.Codec (flightwire.ServerOptions) and records in memory
// nothing writes to again (DataMessage): mink's batches are immutable and
// Go-allocated.
type recordWriter struct {
	*ipc.Writer
	pw *dataPayloadWriter
}

// newRecordWriter returns a writer of records of schema to stream.
func newRecordWriter(stream msgSender, schema *arrow.Schema, alloc memory.Allocator) *recordWriter {
	pw := &dataPayloadWriter{stream: stream}
	return &recordWriter{Writer: ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(schema), ipc.WithAllocator(alloc)), pw: pw}
}

// WriteWithAppMetadata writes rec in one message with appMetadata (held
// until the message is sent).
func (w *recordWriter) WriteWithAppMetadata(rec arrow.RecordBatch, appMetadata []byte) error {
	w.pw.appMetadata = appMetadata
	defer func() { w.pw.appMetadata = nil }()
	return w.Write(rec)
}

// dataPayloadWriter is the ipc.PayloadWriter of a recordWriter.
type dataPayloadWriter struct {
	stream      msgSender
	appMetadata []byte // of the next payload
}

func (p *dataPayloadWriter) Start() error { return nil }
func (p *dataPayloadWriter) Close() error { return nil }

func (p *dataPayloadWriter) WritePayload(payload ipc.Payload) error {
	msg := &flightwire.DataMessage{AppMetadata: p.appMetadata}
	if meta := payload.Meta(); meta != nil {
		// The flatbuffer is small, and its buffer is the IPC writer's to
		// release: copy it.
		msg.Header = bytes.Clone(meta.Bytes())
		meta.Release()
	}
	var body bodyPieces
	if err := payload.SerializeBody(&body); err != nil {
		return err
	}
	msg.Body = body
	return p.stream.SendMsg(msg)
}

// bodyPieces collects the slices an IPC payload's body is written in,
// without copying them: unlike an ordinary io.Writer, it keeps them (see
// recordWriter).
type bodyPieces [][]byte

func (b *bodyPieces) Write(p []byte) (int, error) {
	*b = append(*b, p)
	return len(p), nil
}
