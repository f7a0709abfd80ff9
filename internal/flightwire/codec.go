package flightwire

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
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

// Codec is gRPC's protobuf codec that also sends a *DataMessage without
// copying its body. Its name is "proto": on the wire nothing changes, and
// every other message goes through the protobuf codec.
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

// Unmarshal decodes data into v with the protobuf codec.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

// Name is the protobuf codec's.
func (Codec) Name() string { return proto.Name }
