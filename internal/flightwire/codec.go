package flightwire

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	gproto "google.golang.org/protobuf/proto"
)

// DataMessage is a FlightData message to send as it is: its data_body is
// the concatenation of Body, which gRPC writes to the connection straight
// from these slices instead of from a copy in a protobuf encoding. A
// stream's SendMsg takes it only on a server with Codec (ServerOptions).
//
// The message has no flight_descriptor (DoGet's messages carry none).
//
// The slices are sent after SendMsg returns, while gRPC's writer works
// through its queue: nothing may write to them afterwards. Memory from
// memory.GoAllocator (mink's only allocator) qualifies: releasing it
// leaves it to the garbage collector, which keeps it while gRPC holds it.
type DataMessage struct {
	Header      []byte   // data_header: the IPC message's flatbuffer
	AppMetadata []byte   // app_metadata
	Body        [][]byte // data_body, in pieces
}

// FlightData's field numbers (Flight.proto).
const (
	fieldDescriptor  protowire.Number = 1
	fieldDataHeader  protowire.Number = 2
	fieldAppMetadata protowire.Number = 3
	fieldDataBody    protowire.Number = 1000
)

// marshal returns the protobuf encoding of m as FlightData, field by field
// in number order as the protobuf encoder writes them (an empty field is
// left out, as proto3 does): one small buffer with the tags, lengths, header
// and metadata, then the body's pieces as they are.
func (m *DataMessage) marshal() mem.BufferSlice {
	var bodyLen int
	for _, b := range m.Body {
		bodyLen += len(b)
	}
	prefix := make([]byte, 0, len(m.Header)+len(m.AppMetadata)+24)
	if len(m.Header) > 0 {
		prefix = protowire.AppendTag(prefix, fieldDataHeader, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, m.Header)
	}
	if len(m.AppMetadata) > 0 {
		prefix = protowire.AppendTag(prefix, fieldAppMetadata, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, m.AppMetadata)
	}
	out := make(mem.BufferSlice, 0, 1+len(m.Body))
	if bodyLen > 0 {
		prefix = protowire.AppendTag(prefix, fieldDataBody, protowire.BytesType)
		prefix = protowire.AppendVarint(prefix, uint64(bodyLen))
	}
	out = append(out, mem.SliceBuffer(prefix))
	if bodyLen > 0 {
		for _, b := range m.Body {
			if len(b) > 0 {
				out = append(out, mem.SliceBuffer(b))
			}
		}
	}
	return out
}

// Codec is gRPC's protobuf codec that sends a *DataMessage without copying
// its body, and decodes a FlightData without copying its data_body and
// data_header out of the received message (they alias gRPC's receive
// buffer, which is then left to the garbage collector instead of going
// back to gRPC's pool). Its name is "proto": on the wire nothing changes,
// and every other message goes through the protobuf codec.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// protoCodec is gRPC's protobuf codec, registered by its proto package.
var protoCodec = encoding.GetCodecV2(proto.Name)

// Marshal encodes v.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*DataMessage); ok {
		if m == nil {
			return nil, fmt.Errorf("flightwire: marshal a nil *DataMessage")
		}
		return m.marshal(), nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal decodes data into v.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	// The reference taken here is never freed: fd's fields point into buf.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	if err := unmarshalFlightData(buf.ReadOnlyData(), fd); err != nil {
		buf.Free()
		return err
	}
	return nil
}

// unmarshalFlightData decodes b into fd as proto.Unmarshal does, but with
// the bytes fields pointing into b.
func unmarshalFlightData(b []byte, fd *flight.FlightData) error {
	gproto.Reset(fd)
	all := b
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("flightwire: decode FlightData: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != fieldDescriptor && num != fieldDataHeader && num != fieldAppMetadata && num != fieldDataBody) {
			// A field FlightData does not have, or has with another type:
			// the protobuf decoder's job (it copies).
			return gproto.Unmarshal(all, fd)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("flightwire: decode FlightData: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case fieldDescriptor:
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = &flight.FlightDescriptor{}
			}
			if err := (gproto.UnmarshalOptions{Merge: true}).Unmarshal(v, fd.FlightDescriptor); err != nil {
				return fmt.Errorf("flightwire: decode FlightData: %w", err)
			}
		case fieldDataHeader:
			fd.DataHeader = v
		case fieldAppMetadata:
			fd.AppMetadata = v
		case fieldDataBody:
			fd.DataBody = v
		}
	}
	return nil
}

// Name is the protobuf codec's.
func (Codec) Name() string { return proto.Name }
