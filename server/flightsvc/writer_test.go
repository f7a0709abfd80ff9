package flightsvc

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
)

// everyType has a column of every type a mink table can have, and arrays.
var everyType = []struct{ name, typ string }{
	{"b", "boolean"}, {"i2", "smallint"}, {"i4", "integer"}, {"i8", "bigint"},
	{"f4", "real"}, {"f8", "double precision"}, {"n", "numeric(12,2)"}, {"nu", "numeric"},
	{"t", "text"}, {"vc", "varchar(5)"}, {"ch", "char(3)"}, {"by", "bytea"},
	{"d", "date"}, {"tm", "time"}, {"ts", "timestamp"}, {"tz", "timestamptz"},
	{"iv", "interval"}, {"u", "uuid"}, {"j", "json"}, {"jb", "jsonb"},
	{"ai", "integer[]"}, {"at", "text[]"},
}

// everyTypeRows: typical values, extremes, a row of NULLs, and more rows
// so that slices start inside a validity bitmap's byte.
const everyTypeRows = `[
{"b": true, "i2": -32768, "i4": 2147483647, "i8": -9223372036854775808, "f4": 1.5, "f8": -2.25e300,
 "n": "9999999999.99", "nu": "123456789012345678.0123456789", "t": "héllo ✓", "vc": "abcde", "ch": "ab",
 "by": "AP8=", "d": "2024-02-29", "tm": "23:59:59.999999", "ts": "2024-02-29 12:34:56.789012",
 "tz": "2024-02-29T12:34:56.789012Z", "iv": {"months": 14, "days": -3, "nanoseconds": 3723000001000},
 "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": "{\"a\": [1, 2.5, null]}", "jb": "{\"k\": \"v\"}",
 "ai": [1, null, 3], "at": ["x", null, ""]},
{"b": false, "i2": 32767, "i4": -2147483648, "i8": 9223372036854775807, "f4": -0.25, "f8": 5e-324,
 "n": "-0.01", "nu": "-0.0000000001", "t": "", "vc": "", "ch": "",
 "by": "", "d": "1900-01-01", "tm": "00:00:00", "ts": "1900-01-01 00:00:00",
 "tz": "1969-12-31T23:59:59.999999Z", "iv": {"months": 0, "days": 0, "nanoseconds": 0},
 "u": "00000000-0000-0000-0000-000000000000", "j": "null", "jb": "[]", "ai": [], "at": []},
{"b": null, "i2": null, "i4": null, "i8": null, "f4": null, "f8": null, "n": null, "nu": null, "t": null,
 "vc": null, "ch": null, "by": null, "d": null, "tm": null, "ts": null, "tz": null, "iv": null, "u": null,
 "j": null, "jb": null, "ai": null, "at": null}`

func everyTypeBatch(t *testing.T) arrow.RecordBatch {
	t.Helper()
	cols := make([]sqltypes.Column, len(everyType))
	for i, c := range everyType {
		typ, err := sqltypes.Parse(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = sqltypes.Column{Name: c.name, Type: typ}
	}
	// Rows 3… repeat the first two, so that a slice can start at an odd row.
	first := strings.Index(everyTypeRows, "\n{") + 1
	second := strings.Index(everyTypeRows[first:], "\n{") + first + 1
	rows := everyTypeRows
	for range 5 {
		rows += ",\n" + strings.TrimSuffix(everyTypeRows[first:second], ",\n") + ",\n" + strings.TrimSuffix(everyTypeRows[second:strings.LastIndex(everyTypeRows, "\n{")], ",")
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sqltypes.Schema(cols), strings.NewReader(rows+"]"))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	t.Cleanup(rec.Release)
	return rec
}

// sentMessages records what a DoGet stream was sent, as encoded on the wire.
type sentMessages struct {
	t   *testing.T
	out [][]byte
}

// SendMsg is what recordWriter calls.
func (s *sentMessages) SendMsg(m any) error {
	b, err := flightwire.Codec{}.Marshal(m)
	if err != nil {
		s.t.Fatal(err)
	}
	s.out = append(s.out, b.Materialize())
	return nil
}

// Send is what flight.Writer calls.
func (s *sentMessages) Send(fd *flight.FlightData) error {
	b, err := proto.Marshal(fd)
	if err != nil {
		s.t.Fatal(err)
	}
	s.out = append(s.out, b)
	return nil
}

// TestRecordWriterSendsFlightWritersBytes: for batches of every column
// type, whole and sliced at odd rows, recordWriter sends the very bytes
// arrow-go's flight.Writer sends (the path it replaced), and they decode to
// the batches written.
func TestRecordWriterSendsFlightWritersBytes(t *testing.T) {
	rec := everyTypeBatch(t)
	if rec.NumRows() < 12 {
		t.Fatalf("%d rows", rec.NumRows())
	}
	parts := []arrow.RecordBatch{rec, rec.NewSlice(1, 3), rec.NewSlice(3, 12), rec.NewSlice(2, 3), rec.NewSlice(5, 5)}
	for _, p := range parts[1:] {
		defer p.Release()
	}
	var old, zc sentMessages
	old.t, zc.t = t, t
	ow := flight.NewRecordWriter(&old, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(memory.DefaultAllocator))
	nw := newRecordWriter(&zc, rec.Schema(), memory.DefaultAllocator)
	for i, p := range parts {
		meta := []byte(`{"offset":` + string(rune('0'+i)) + `}`)
		if err := ow.WriteWithAppMetadata(p, meta); err != nil {
			t.Fatal(err)
		}
		if err := nw.WriteWithAppMetadata(p, meta); err != nil {
			t.Fatal(err)
		}
	}
	if err := ow.Close(); err != nil {
		t.Fatal(err)
	}
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	if len(zc.out) != len(old.out) || len(zc.out) != 1+len(parts) {
		t.Fatalf("%d messages sent, flight.Writer sent %d, want %d", len(zc.out), len(old.out), 1+len(parts))
	}
	for i := range old.out {
		if !bytes.Equal(zc.out[i], old.out[i]) {
			t.Errorf("message %d: %d bytes differ from flight.Writer's %d", i, len(zc.out[i]), len(old.out[i]))
		}
	}

	// And they read back as the batches written.
	var got []arrow.RecordBatch
	rdr, err := flight.NewRecordReader(&replay{msgs: zc.out})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		r := rdr.RecordBatch()
		r.Retain()
		defer r.Release()
		got = append(got, r)
	}
	if len(got) != len(parts) {
		t.Fatalf("read %d batches, want %d", len(got), len(parts))
	}
	for i := range parts {
		if !array.RecordEqual(got[i], parts[i]) {
			t.Errorf("batch %d reads back as\n%v\nwant\n%v", i, got[i], parts[i])
		}
	}
}

// replay is a DoGet stream of encoded messages.
type replay struct{ msgs [][]byte }

func (r *replay) Recv() (*flight.FlightData, error) {
	if len(r.msgs) == 0 {
		return nil, io.EOF
	}
	var fd flight.FlightData
	err := proto.Unmarshal(r.msgs[0], &fd)
	r.msgs = r.msgs[1:]
	return &fd, err
}
