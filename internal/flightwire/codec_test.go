package flightwire

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
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
