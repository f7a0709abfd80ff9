package flightwire

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestDataMessageEncoding: a DataMessage encodes to the bytes the protobuf
// encoder writes for the same FlightData, so that the zero-copy path sends
// exactly what flight.Writer sent, and decodes back to it.
func TestDataMessageEncoding(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, 70_000) // a multi-byte length
	for _, tc := range []struct {
		name string
		msg  DataMessage
	}{
		{"empty", DataMessage{}},
		{"schema", DataMessage{Header: []byte("header")}},
		{"metadata only", DataMessage{AppMetadata: []byte(`{"offset":7}`)}},
		{"batch", DataMessage{Header: []byte("hdr"), AppMetadata: []byte(`{"offset":65536}`),
			Body: [][]byte{[]byte("12345678"), nil, big, []byte{1, 2, 3}, make([]byte, 5)}}},
		{"empty body pieces", DataMessage{Header: []byte("hdr"), Body: [][]byte{nil, {}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &flight.FlightData{DataHeader: tc.msg.Header, AppMetadata: tc.msg.AppMetadata, DataBody: bytes.Join(tc.msg.Body, nil)}
			wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Codec{}.Marshal(&tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			got := out.Materialize()
			if !bytes.Equal(got, wantBytes) {
				t.Fatalf("encoding differs from protobuf's:\n got %x…\nwant %x…", got[:min(len(got), 64)], wantBytes[:min(len(wantBytes), 64)])
			}
			var back flight.FlightData
			if err := (Codec{}).Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&back, want) {
				t.Fatalf("decoded %v, want %v", &back, want)
			}
		})
	}
}

// TestFlightDataDecoding: Codec decodes FlightData as the protobuf decoder
// does, from a message that arrived in several buffers, with a descriptor,
// and with a field FlightData does not have (which it leaves to protobuf).
func TestFlightDataDecoding(t *testing.T) {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"t", "bucket", "3"}}
	msg := &flight.FlightData{FlightDescriptor: desc, DataHeader: []byte("hdr"), AppMetadata: []byte(`{"offset":1}`),
		DataBody: bytes.Repeat([]byte("body"), 5000)}
	enc, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	unknown := protowire.AppendTag(append([]byte(nil), enc...), 77, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 5)
	for _, b := range [][]byte{enc, unknown, {}} {
		var want, got flight.FlightData
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		// In pieces, as frames arrive.
		var data mem.BufferSlice
		for rest := b; len(rest) > 0; {
			n := min(len(rest), 7000)
			data = append(data, mem.SliceBuffer(rest[:n]))
			rest = rest[n:]
		}
		got.AppMetadata = []byte("stale")
		if err := (Codec{}).Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, &want) {
			t.Fatalf("decoded %v, want %v", &got, &want)
		}
	}
}
