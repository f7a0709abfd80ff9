package pgwire

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// The seed corpora live in testdata/fuzz/<FuzzTarget>/ and are generated
// from fuzzSeeds by
//
//	go test -run TestFuzzSeeds -write-fuzz-seeds ./sqlfront/pgwire/
//
// Run a target with, for example,
//
//	go test -run '^$' -fuzz FuzzConn -fuzztime 60s ./sqlfront/pgwire/
var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite testdata/fuzz seed corpora")

func encodeMessages(msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			panic(err)
		}
	}
	return b
}

// fuzzStartup has one parameter, so that its encoding (from a map) is
// stable; the database defaults to the user.
var fuzzStartup = encodeMessages(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
	Parameters: map[string]string{"user": "mink"}})

func fuzzSeeds() map[string][][]any {
	binaryCopy := string(binaryHeader()) + "\x00\x03\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01a\xff\xff\xff\xff\xff\xff"
	return map[string][][]any{
		"FuzzConn": {
			{encodeMessages(&pgproto3.Query{String: "select 1"})},
			{encodeMessages(&pgproto3.Query{String: "select * from t; select n from series(3); begin; fail 22012; rollback"})},
			{encodeMessages(&pgproto3.Query{String: ""}, &pgproto3.Query{String: "bogus"}, &pgproto3.Terminate{})},
			{encodeMessages(
				&pgproto3.Parse{Name: "s", Query: "select $1::int8, $2::text, $3::numeric", ParameterOIDs: []uint32{20}},
				&pgproto3.Describe{ObjectType: 'S', Name: "s"},
				&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s", ParameterFormatCodes: []int16{1, 0, 0},
					Parameters: [][]byte{{0, 0, 0, 0, 0, 0, 0, 7}, []byte("x"), []byte("1.5e3")}, ResultFormatCodes: []int16{1}},
				&pgproto3.Describe{ObjectType: 'P', Name: "p"},
				&pgproto3.Execute{Portal: "p", MaxRows: 1},
				&pgproto3.Execute{Portal: "p"},
				&pgproto3.Close{ObjectType: 'P', Name: "p"},
				&pgproto3.Sync{})},
			{encodeMessages(
				&pgproto3.Parse{Query: "select * from t"},
				&pgproto3.Bind{ResultFormatCodes: []int16{1}},
				&pgproto3.Execute{MaxRows: 2},
				&pgproto3.Flush{},
				&pgproto3.Execute{},
				&pgproto3.Sync{})},
			{encodeMessages(&pgproto3.Query{String: "copy c from stdin"}, &pgproto3.CopyData{Data: []byte("1\ta\\tb\t1.5\n2\t\\N\t\\N\n")}, &pgproto3.CopyDone{},
				&pgproto3.Query{String: "copy c to stdout with (format csv, header)"})},
			{encodeMessages(&pgproto3.Query{String: "copy c from stdin with (format csv, header)"}, &pgproto3.CopyData{Data: []byte("id,name,score\n1,\"a\"\"b\",2\n")}, &pgproto3.CopyDone{})},
			{encodeMessages(&pgproto3.Query{String: "copy c from stdin binary"}, &pgproto3.CopyData{Data: []byte(binaryCopy)}, &pgproto3.CopyDone{},
				&pgproto3.Query{String: "copy c to stdout with (format binary)"})},
			{encodeMessages(&pgproto3.Query{String: "copy c from stdin"}, &pgproto3.CopyData{Data: []byte("x\n")}, &pgproto3.CopyFail{Message: "no"}, &pgproto3.CopyData{Data: []byte("y")})},
			{append(encodeMessages(&pgproto3.Query{String: "select 1"}), 'Q', 0, 0, 0, 9, 's')},
			{[]byte("GET / HTTP/1.1\r\n\r\n")},
			// Starting with a zero byte: the input is the startup phase itself.
			{append(binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, sslRequestCode), fuzzStartup...)},
			{binary.BigEndian.AppendUint32([]byte{0, 0, 0, 16, 4, 210, 22, 46}, 1)},
			{[]byte{0, 0, 0, 8, 0, 2, 0, 0}},
		},
		"FuzzCopyText": {
			{[]byte("1\tone\t1.5\n2\t\\N\t\\x41\\101\\n\n"), uint(5)},
			{[]byte("a\\\tb\tc\\\nd\te\r\nx\ty\tz\r\n"), uint(3)},
			{[]byte("1\t2\t3\n\\.\nignored"), uint(0)},
			{[]byte("1\r2\n"), uint(1)},
		},
		"FuzzCopyCSV": {
			{[]byte("1,\"a,b\",\"say \"\"hi\"\"\"\n2,,\"\"\n"), uint(7)},
			{[]byte("\"multi\nline\",x,y\r\n\\.\r\n"), uint(2)},
			{[]byte("\"open,1,2\n"), uint(4)},
		},
		"FuzzCopyBinary": {
			{[]byte(binaryCopy), uint(13)},
			{append(append([]byte(nil), binaryHeader()...), 0, 3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe), uint(20)},
			{[]byte("PGCOPY\n\xff\r\n\x00\x00\x01\x00\x00\x00\x00\x00\x00"), uint(2)},
		},
		"FuzzDecode": {
			{uint(0), true, []byte{0, 0, 0, 0, 0, 0, 0, 1}},
			{uint(5), false, []byte("12.5e-3")},
			{uint(5), true, []byte{0, 2, 0, 0, 0, 0, 0, 2, 0, 1, 0x13, 0x88}},
			{uint(8), false, []byte("2024-01-02 03:04:05+05:30")},
			{uint(12), true, []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 7}},
		},
	}
}

// TestFuzzSeeds checks that the checked-in seed corpora are the ones
// fuzzSeeds describes (and rewrites them with -write-fuzz-seeds).
func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		for i, seed := range seeds {
			var b bytes.Buffer
			b.WriteString("go test fuzz v1\n")
			for _, v := range seed {
				switch v := v.(type) {
				case []byte:
					fmt.Fprintf(&b, "[]byte(%q)\n", v)
				case uint:
					fmt.Fprintf(&b, "uint(%d)\n", v)
				case bool:
					fmt.Fprintf(&b, "bool(%v)\n", v)
				default:
					t.Fatalf("seed value of type %T", v)
				}
			}
			path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
			if *writeFuzzSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, b.Bytes()) {
				t.Errorf("%s is missing or stale (%v): run go test -run TestFuzzSeeds -write-fuzz-seeds", path, err)
			}
		}
	}
}

var fuzzServer struct {
	once sync.Once
	srv  *Server
}

// FuzzConn feeds arbitrary bytes to a connection as a client's stream, after
// a valid startup message unless the input starts with a zero byte (then the
// input is the startup phase). The connection must end without a panic
// escaping it, without hanging and without leaking its goroutines.
func FuzzConn(f *testing.F) {
	fuzzServer.once.Do(func() {
		srv, err := NewServer(Config{
			Handler:        &testHandler{fuzzing: true},
			Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
			MaxMessageSize: 1 << 16,
			StartupTimeout: 5 * time.Second,
		})
		if err != nil {
			f.Fatal(err)
		}
		fuzzServer.srv = srv
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		c := newConn(fuzzServer.srv, server)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.serve(false)
		}()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			io.Copy(io.Discard, client)
		}()
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if len(data) == 0 || data[0] != 0 {
			client.Write(fuzzStartup)
		}
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection still running 10s after the client closed")
		}
		<-drained
	})
}

// parseChunks parses data with p in two chunks split at split, returning the
// rows (fields copied; nil for NULL) and the error text.
func parseChunks(p copyParser, data []byte, split int) ([][][]byte, string) {
	var rows [][][]byte
	emit := func(line int64, fields [][]byte) error {
		row := make([][]byte, len(fields))
		for i, f := range fields {
			if f != nil {
				row[i] = append([]byte{}, f...)
			}
		}
		rows = append(rows, row)
		return nil
	}
	err := p.feed(data[:split], emit)
	if err == nil {
		err = p.feed(data[split:], emit)
	}
	if err == nil {
		err = p.finish(emit)
	}
	if err != nil {
		return rows, err.Error()
	}
	return rows, ""
}

func fuzzCopyColumns(n int) []Column {
	cols := make([]Column, n)
	for i := range cols {
		cols[i] = NewColumn(fmt.Sprintf("c%d", i), pgtype.TextOID)
	}
	return cols
}

// fuzzCopyFormat checks a COPY parser on arbitrary input: it must not panic,
// the result must not depend on how the input is cut into CopyData messages,
// and rows it accepts must survive a round trip through the writer.
func fuzzCopyFormat(t *testing.T, opts CopyOptions, data []byte, split uint) {
	opts = opts.withDefaults()
	cols := fuzzCopyColumns(3)
	whole, wholeErr := parseChunks(newCopyParser(opts, cols, 0), data, len(data))
	cut := int(split % uint(len(data)+1))
	parts, partsErr := parseChunks(newCopyParser(opts, cols, 0), data, cut)
	if wholeErr != partsErr || !reflect.DeepEqual(whole, parts) {
		t.Fatalf("split at %d changes the result:\nwhole: %q %s\nsplit: %q %s", cut, whole, wholeErr, parts, partsErr)
	}
	if len(whole) == 0 {
		return
	}
	w := &copyWriter{opts: opts, columns: cols, codec: newCodec(time.UTC)}
	out := w.header()
	for _, row := range whole {
		values := make([]any, len(row))
		for i, f := range row {
			switch {
			case f == nil:
			case opts.Format == CopyBinary:
				values[i] = f // raw bytes, whatever they are
			default:
				values[i] = Text(f)
			}
		}
		var err error
		if out, err = w.appendRow(out, values); err != nil {
			t.Fatal(err)
		}
	}
	out = append(out, w.trailer()...)
	again, againErr := parseChunks(newCopyParser(opts, cols, 0), out, len(out))
	if againErr != "" || !reflect.DeepEqual(again, whole) {
		t.Fatalf("round trip changed the rows:\nparsed %q\nwrote  %q\nreread %q %s", whole, out, again, againErr)
	}
}

func FuzzCopyText(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		fuzzCopyFormat(t, CopyOptions{Format: CopyText}, data, split)
	})
}

func FuzzCopyCSV(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		fuzzCopyFormat(t, CopyOptions{Format: CopyCSV}, data, split)
	})
}

func FuzzCopyBinary(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		fuzzCopyFormat(t, CopyOptions{Format: CopyBinary}, data, split)
	})
}

// fuzzDecodeOIDs are the types FuzzDecode picks from.
var fuzzDecodeOIDs = []uint32{
	pgtype.Int8OID, pgtype.Int4OID, pgtype.Int2OID, pgtype.Float8OID, pgtype.BoolOID, pgtype.NumericOID,
	pgtype.TextOID, pgtype.DateOID, pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.UUIDOID,
	pgtype.ByteaOID, pgtype.Int8ArrayOID, pgtype.IntervalOID, pgtype.JSONBOID, pgtype.JSONOID, 0, 999999,
}

// FuzzDecode feeds arbitrary parameter or COPY field bytes to the value
// decoder: it must return a value or an *Error, never panic.
func FuzzDecode(f *testing.F) {
	c := newCodec(time.UTC)
	f.Fuzz(func(t *testing.T, typ uint, binaryFmt bool, data []byte) {
		oid := fuzzDecodeOIDs[typ%uint(len(fuzzDecodeOIDs))]
		format := textFormat
		if binaryFmt {
			format = binaryFormat
		}
		_, err := c.decode(oid, format, data)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("decode %d: error %T %v is not an *Error", oid, err, err)
			}
		}
	})
}
