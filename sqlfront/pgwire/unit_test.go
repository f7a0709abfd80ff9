package pgwire

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestParseOptions(t *testing.T) {
	got := parseOptions(`-c TimeZone=Europe/Paris --search_path=a,b -csearch-x=1 -c name=with\ space -X`)
	want := map[string]string{"timezone": "Europe/Paris", "search_path": "a,b", "search_x": "1", "name": "with space"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseOptions = %v, want %v", got, want)
	}
	params, unknown, err := parseStartupParams([]byte("user\x00bob\x00options\x00-c DateStyle=German\x00_pq_.x\x001\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if params["user"] != "bob" || params["datestyle"] != "German" || len(unknown) != 1 || unknown[0] != "_pq_.x" {
		t.Fatalf("params %v, unknown %v", params, unknown)
	}
	for _, bad := range []string{"user\x00bob\x00", "user\x00bob", "user\x00bob\x00\x00x"} {
		if _, _, err := parseStartupParams([]byte(bad)); err == nil {
			t.Errorf("parseStartupParams(%q) accepted", bad)
		}
	}
}

func TestLoadLocation(t *testing.T) {
	for name, offset := range map[string]int{"UTC": 0, "+02": 7200, "-05:30": -19800, "Asia/Kolkata": 19800} {
		loc, err := loadLocation(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, off := time.Date(2024, 1, 1, 0, 0, 0, 0, loc).Zone(); off != offset {
			t.Errorf("%s: offset %d, want %d", name, off, offset)
		}
	}
	if _, err := loadLocation("Mars/Olympus"); err == nil {
		t.Error("unknown zone accepted")
	}
}

// TestDecode pins the Go type of every decoded parameter type, in both
// formats: the table in the package documentation.
func TestDecode(t *testing.T) {
	berlin, _ := loadLocation("Europe/Berlin")
	c := newCodec(berlin)
	ts := time.Date(2024, 3, 4, 5, 6, 7, 890000000, time.UTC)
	cases := []struct {
		oid  uint32
		text string
		want any
	}{
		{pgtype.BoolOID, "on", true},
		{pgtype.Int2OID, "-12", int16(-12)},
		{pgtype.Int4OID, " 7 ", int32(7)},
		{pgtype.Int8OID, "+9000000000", int64(9000000000)},
		{pgtype.Float4OID, "1.5", float32(1.5)},
		{pgtype.Float8OID, "-2.25", -2.25},
		{pgtype.NumericOID, "12.50", pgtype.Numeric{Int: big.NewInt(1250), Exp: -2, Valid: true}},
		{pgtype.TextOID, "héllo", "héllo"},
		{pgtype.VarcharOID, "v", "v"},
		{0, "unspecified", "unspecified"},
		{pgtype.ByteaOID, `\x0102`, []byte{1, 2}},
		{pgtype.DateOID, "2024-03-04", time.Date(2024, 3, 4, 0, 0, 0, 0, time.UTC)},
		{pgtype.TimestampOID, "2024-03-04 05:06:07.89", ts},
		{pgtype.TimestamptzOID, "2024-03-04 06:06:07.89+01", ts},
		{pgtype.TimestamptzOID, "1500-06-07 08:09:10.5+00", time.Date(1500, 6, 7, 8, 9, 10, 500000000, time.UTC)},
		{pgtype.TimestamptzOID, "2500-06-07 08:09:10.000001+00", time.Date(2500, 6, 7, 8, 9, 10, 1000, time.UTC)},
		{pgtype.TimestamptzOID, "infinity", pgtype.Infinity},
		// ISO 8601 with a T, as JSON-minded clients send it.
		{pgtype.TimestamptzOID, "2024-03-04T05:06:07.89Z", ts},
		{pgtype.TimestamptzOID, "2024-03-04T06:06:07.89+01:00", ts},
		{pgtype.TimestamptzOID, "2024-03-04t05:06:07.89z", ts},
		{pgtype.TimestampOID, "2024-03-04T05:06:07.89", ts},
		{pgtype.TimestampOID, "2024-03-04T05:06:07.89Z", ts},
		{pgtype.TimestampOID, "1999-12-31 23:59:59.999999", time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		{pgtype.DateOID, "1200-02-29", time.Date(1200, 2, 29, 0, 0, 0, 0, time.UTC)},
		{pgtype.DateOID, "-infinity", pgtype.NegativeInfinity},
		{pgtype.Float8OID, "NaN", math.NaN()},
		{pgtype.Float4OID, "-Infinity", float32(math.Inf(-1))},
		{pgtype.BoolOID, "f", false},
		{pgtype.UUIDOID, "00010203-0405-0607-0809-0a0b0c0d0e0f", [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{pgtype.JSONOID, `{"a": [1]}`, `{"a": [1]}`},
		{pgtype.JSONBOID, `{"a": [1]}`, `{"a": [1]}`},
		{pgtype.IntervalOID, "1 day 02:00:00", pgtype.Interval{Days: 1, Microseconds: 7200e6, Valid: true}},
		{pgtype.Int8ArrayOID, "{1,NULL,3}", []any{int64(1), nil, int64(3)}},
	}
	for _, tc := range cases {
		got, err := c.decode(tc.oid, textFormat, []byte(tc.text))
		if err != nil {
			t.Errorf("decode text %s %q: %v", typeName(tc.oid), tc.text, err)
			continue
		}
		if !sameValue(got, tc.want) {
			t.Errorf("decode text %s %q = %#v, want %#v", typeName(tc.oid), tc.text, got, tc.want)
		}
		if tc.oid == 0 {
			continue
		}
		// The binary encoding of the same value decodes to the same Go value.
		bin, null, err := c.encode(nil, tc.oid, binaryFormat, tc.want)
		if err != nil || null {
			t.Errorf("encode binary %s %#v: %v", typeName(tc.oid), tc.want, err)
			continue
		}
		got, err = c.decode(tc.oid, binaryFormat, bin)
		if err != nil || !sameValue(got, tc.want) {
			t.Errorf("decode binary %s = %#v, %v; want %#v", typeName(tc.oid), got, err, tc.want)
		}
	}
	// PostgreSQL reads a timestamptz without an offset in the session zone.
	got, err := c.decode(pgtype.TimestamptzOID, textFormat, []byte("2024-07-01 12:00:00"))
	if want := time.Date(2024, 7, 1, 10, 0, 0, 0, time.UTC); err != nil || !got.(time.Time).Equal(want) {
		t.Errorf("timestamptz without offset = %v, %v; want %v", got, err, want)
	}
	// Scientific notation for numeric.
	got, err = c.decode(pgtype.NumericOID, textFormat, []byte("1.5e3"))
	if err != nil || got.(pgtype.Numeric).Int.Int64() != 15 || got.(pgtype.Numeric).Exp != 2 {
		t.Errorf("numeric 1.5e3 = %#v, %v", got, err)
	}
	if v, err := c.decode(pgtype.Int8OID, textFormat, nil); v != nil || err != nil {
		t.Errorf("NULL decoded to %#v, %v", v, err)
	}
}

// sameValue is reflect.DeepEqual with NaN equal to NaN and times compared
// as instants.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case float64:
		if bf, ok := b.(float64); ok && math.IsNaN(a) && math.IsNaN(bf) {
			return true
		}
	case time.Time:
		bt, ok := b.(time.Time)
		return ok && a.Equal(bt) && a.Location() == bt.Location()
	}
	return reflect.DeepEqual(a, b)
}

func TestDecodeErrors(t *testing.T) {
	c := newCodec(time.UTC)
	for _, tc := range []struct {
		oid    uint32
		format int16
		input  string
		code   string
		msg    string
	}{
		{pgtype.Int8OID, textFormat, "12x", CodeInvalidTextRepresentation, `invalid input syntax for type bigint: "12x"`},
		{pgtype.Int4OID, textFormat, "3000000000", CodeNumericValueOutOfRange, `value "3000000000" is out of range for type integer`},
		{pgtype.BoolOID, textFormat, "maybe", CodeInvalidTextRepresentation, `invalid input syntax for type boolean: "maybe"`},
		{pgtype.DateOID, textFormat, "2024-13-45", CodeInvalidTextRepresentation, `invalid input syntax for type date: "2024-13-45"`},
		{pgtype.UUIDOID, textFormat, "nope", CodeInvalidTextRepresentation, `invalid input syntax for type uuid: "nope"`},
		{pgtype.TextOID, textFormat, "\xff\xfe", CodeCharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8"`},
		{pgtype.Int8OID, binaryFormat, "\x00\x01", CodeInvalidBinaryRepresentation, `incorrect binary data format for type bigint`},
		{pgtype.Float8OID, textFormat, "1e400", CodeNumericValueOutOfRange, `value "1e400" is out of range for type double precision`},
		{pgtype.BoolOID, binaryFormat, "\x02", CodeInvalidBinaryRepresentation, `incorrect binary data format for type boolean`},
		{pgtype.DateOID, binaryFormat, "\x00", CodeInvalidBinaryRepresentation, `incorrect binary data format for type date`},
	} {
		_, err := c.decode(tc.oid, tc.format, []byte(tc.input))
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Message != tc.msg {
			t.Errorf("decode %s %q: got %v, want %s %s", typeName(tc.oid), tc.input, err, tc.code, tc.msg)
		}
	}
}

func TestEncodeText(t *testing.T) {
	kolkata, _ := loadLocation("Asia/Kolkata")
	c := newCodec(kolkata)
	for _, tc := range []struct {
		oid  uint32
		v    any
		want string
	}{
		{pgtype.TimestamptzOID, time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.UTC), "2024-01-02 08:34:05.6+05:30"},
		{pgtype.TimestamptzOID, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), "2024-01-02 08:34:05+05:30"},
		{pgtype.Int8OID, 42, "42"},
		{pgtype.Int8OID, Text("42"), "42"},
		{pgtype.TextOID, int64(7), "7"},
		{pgtype.TextOID, 2.5, "2.5"},
		{pgtype.TextOID, true, "true"},
		{pgtype.NumericOID, 1.25, "1.25"},
		{pgtype.BoolOID, false, "f"},
		{pgtype.ByteaOID, []byte("hi"), `\x6869`},
		{pgtype.UUIDOID, "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000001"},
		{999999, "custom", "custom"},
		{999999, 12, "12"},
	} {
		got, null, err := c.encode(nil, tc.oid, textFormat, tc.v)
		if err != nil || null || string(got) != tc.want {
			t.Errorf("encode %s %#v = %q (null %v, err %v), want %q", typeName(tc.oid), tc.v, got, null, err, tc.want)
		}
	}
	// Text converted to binary goes through the type's codec.
	got, _, err := c.encode(nil, pgtype.Int4OID, binaryFormat, Text("258"))
	if err != nil || string(got) != "\x00\x00\x01\x02" {
		t.Errorf("Text to binary int4 = %x, %v", got, err)
	}
	if _, _, err := c.encode(nil, pgtype.Int4OID, binaryFormat, Text("x")); err == nil {
		t.Error("bad Text accepted for binary int4")
	}
	if _, null, _ := c.encode(nil, pgtype.Int4OID, binaryFormat, nil); !null {
		t.Error("nil is not NULL")
	}
}

func TestCopyOptions(t *testing.T) {
	for _, tc := range []struct {
		set  [][2]string
		code string // "" for valid
	}{
		{[][2]string{{"format", "csv"}, {"header", ""}, {"delimiter", ";"}}, ""},
		{[][2]string{{"FORMAT", "BINARY"}}, ""},
		{[][2]string{{"format", "csv"}, {"header", "match"}, {"quote", "'"}, {"escape", "\\"}, {"null", "NA"}}, ""},
		{[][2]string{{"format", "text"}, {"header", "true"}}, ""},
		{[][2]string{{"encoding", "utf-8"}, {"freeze", ""}}, ""},
		{[][2]string{{"format", "csv"}, {"format", "csv"}}, CodeSyntaxError},
		{[][2]string{{"format", "json"}}, CodeInvalidParameterValue},
		{[][2]string{{"delimiter", "ab"}}, CodeFeatureNotSupported},
		{[][2]string{{"delimiter", "\n"}}, CodeInvalidParameterValue},
		{[][2]string{{"delimiter", "\\"}}, CodeInvalidParameterValue},
		{[][2]string{{"format", "binary"}, {"null", "x"}}, CodeSyntaxError},
		{[][2]string{{"format", "binary"}, {"delimiter", ","}}, CodeSyntaxError},
		{[][2]string{{"quote", "'"}}, CodeFeatureNotSupported},
		{[][2]string{{"format", "csv"}, {"delimiter", "\""}}, CodeInvalidParameterValue},
		{[][2]string{{"format", "csv"}, {"null", "a,b"}}, CodeInvalidParameterValue},
		{[][2]string{{"header", "sometimes"}}, CodeInvalidParameterValue},
		{[][2]string{{"encoding", "latin1"}}, CodeFeatureNotSupported},
		{[][2]string{{"oids", "true"}}, CodeFeatureNotSupported},
		{[][2]string{{"force_quote", "*"}}, CodeFeatureNotSupported},
		{[][2]string{{"colour", "blue"}}, CodeSyntaxError},
	} {
		var o CopyOptions
		var err error
		for _, kv := range tc.set {
			if err = o.Set(kv[0], kv[1]); err != nil {
				break
			}
		}
		if err == nil {
			err = o.Validate()
		}
		var e *Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%v: %v", tc.set, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code):
			t.Errorf("%v: got %v, want SQLSTATE %s", tc.set, err, tc.code)
		}
	}
}

// parseAll runs a parser over chunks and returns the rows as strings (NULL
// for nil) with line numbers, or the error.
func parseAll(opts CopyOptions, ncols int, chunks ...string) ([]string, error) {
	cols := make([]Column, ncols)
	for i := range cols {
		cols[i] = NewColumn(fmt.Sprintf("c%d", i+1), pgtype.TextOID)
	}
	p := newCopyParser(opts.withDefaults(), cols, 0)
	var rows []string
	emit := func(line int64, fields [][]byte) error {
		var parts []string
		for _, f := range fields {
			if f == nil {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, fmt.Sprintf("%q", f))
			}
		}
		rows = append(rows, fmt.Sprintf("%d:%s", line, strings.Join(parts, ",")))
		return nil
	}
	for _, c := range chunks {
		if err := p.feed([]byte(c), emit); err != nil {
			return rows, err
		}
	}
	return rows, p.finish(emit)
}

func TestCopyTextParser(t *testing.T) {
	text := CopyOptions{}
	for _, tc := range []struct {
		in   string
		cols int
		want string // rows joined by " | ", or "error: ..."
	}{
		{"a\tb\n", 2, `1:"a","b"`},
		{"a\tb", 2, `1:"a","b"`},
		{"\\N\t\n", 2, `1:NULL,""`},
		{"\\\\N\t\\N\n", 2, `1:"\\N",NULL`},
		{"\\b\\f\\n\\r\\t\\v\\\\\\z\t\\101\\1012\\x41\\x4a1\\xg\n", 2, "1:\"\\b\\f\\n\\r\\t\\v\\\\z\",\"AA2AJ1xg\""},
		{"a\\\tb\tc\n", 2, `1:"a\tb","c"`},
		{"x\\\ny\tz\n", 2, `1:"x\ny","z"`},
		{"1\n2\n3\n", 1, `1:"1" | 2:"2" | 3:"3"`},
		{"1\r\n2\r\n", 1, `1:"1" | 2:"2"`},
		{"1\r2\r", 1, `1:"1" | 2:"2"`},
		{"1\n2\r\n", 1, "error: line 2: ERROR: literal carriage return found in data (SQLSTATE 22P04)"},
		{"1\r\n2\n", 1, "error: line 2: ERROR: literal newline found in data (SQLSTATE 22P04)"},
		{"1\n\\.\n2\n", 1, `1:"1"`},
		{"1\n\\.", 1, `1:"1"`},
		{"\n", 1, `1:""`},
		{"a\tb\tc\n", 2, "error: line 1: ERROR: extra data after last expected column (SQLSTATE 22P04)"},
		{"ok\tok\nshort\n", 2, `error: line 2: ERROR: missing data for column "c2" (SQLSTATE 22P04)`},
		{"trailing\\", 1, `1:"trailing"`},
	} {
		for split := 0; split <= len(tc.in); split++ {
			rows, err := parseAll(text, tc.cols, tc.in[:split], tc.in[split:])
			got := strings.Join(rows, " | ")
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want {
				t.Errorf("%q split at %d:\n got %s\nwant %s", tc.in, split, got, tc.want)
				break
			}
		}
	}
	header := CopyOptions{Header: true, HeaderMatch: true}
	if _, err := parseAll(header, 2, "c1\tc2\n1\t2\n"); err != nil {
		t.Errorf("HEADER MATCH rejected matching names: %v", err)
	}
	if _, err := parseAll(header, 2, "c1\tx\n1\t2\n"); err == nil || !strings.Contains(err.Error(), `column name mismatch in header line field 2: got "x", expected "c2"`) {
		t.Errorf("HEADER MATCH: %v", err)
	}
}

func TestCopyCSVParser(t *testing.T) {
	csv := CopyOptions{Format: CopyCSV}
	for _, tc := range []struct {
		opts CopyOptions
		in   string
		cols int
		want string
	}{
		{csv, "a,b\n", 2, `1:"a","b"`},
		{csv, ",\"\"\n", 2, `1:NULL,""`},
		{csv, "\"a,b\",\"say \"\"hi\"\"\"\n", 2, `1:"a,b","say \"hi\""`},
		{csv, "\"multi\nline\",x\nnext,y\n", 2, `1:"multi\nline","x" | 3:"next","y"`},
		{csv, "\"crlf\r\ninside\",x\r\nnext,y\r\n", 2, `1:"crlf\r\ninside","x" | 3:"next","y"`},
		{csv, "a\"b\"c,d\n", 2, `1:"abc","d"`},
		{csv, "\\.\n", 1, ""},
		{csv, "\"\\.\"\n", 1, `1:"\\."`},
		{csv, "1\n\\.\nignored\n", 1, `1:"1"`},
		{csv, "\"open\n", 1, "error: line 1: ERROR: unterminated CSV quoted field (SQLSTATE 22P04)"},
		{csv, "a,b,c\n", 2, "error: line 1: ERROR: extra data after last expected column (SQLSTATE 22P04)"},
		{CopyOptions{Format: CopyCSV, Delimiter: ';', Quote: '\'', Escape: '\\', Null: "NULL", NullSet: true},
			"'it\\'s';NULL;'NULL'\n", 3, `1:"it's",NULL,"NULL"`},
		{CopyOptions{Format: CopyCSV, Escape: '\\'}, "\"a\\\"b\\\\c\\d\"\n", 1, `1:"a\"b\\c\\d"`},
		{CopyOptions{Format: CopyCSV, Header: true}, "h1,\"h\n2\"\n1,2\n", 2, `3:"1","2"`},
	} {
		for split := 0; split <= len(tc.in); split++ {
			rows, err := parseAll(tc.opts, tc.cols, tc.in[:split], tc.in[split:])
			got := strings.Join(rows, " | ")
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want {
				t.Errorf("%q split at %d:\n got %s\nwant %s", tc.in, split, got, tc.want)
				break
			}
		}
	}
}

// TestCopyWriteRoundTrip writes awkward values with each format's writer and
// reads them back with the parser.
func TestCopyWriteRoundTrip(t *testing.T) {
	values := []any{"plain", "", nil, "tab\there", "nl\nhere", "cr\rhere", `back\slash`, `\.`, `\N`, "quote\"d", "comma,semi;", "NULL", "é"}
	cols := make([]Column, len(values))
	for i := range cols {
		cols[i] = NewColumn(fmt.Sprintf("c%d", i), pgtype.TextOID)
	}
	for _, opts := range []CopyOptions{
		{Format: CopyText},
		{Format: CopyText, Delimiter: ',', Header: true},
		{Format: CopyCSV},
		{Format: CopyCSV, Header: true, Null: "NULL", NullSet: true, Quote: '\'', Escape: '\\', Delimiter: ';'},
		{Format: CopyBinary},
	} {
		opts = opts.withDefaults()
		w := &copyWriter{opts: opts, columns: cols, codec: newCodec(time.UTC)}
		data := w.header()
		data, err := w.appendRow(data, values)
		if err != nil {
			t.Fatal(err)
		}
		data, _ = w.appendRow(data, values)
		data = append(data, w.trailer()...)
		p := newCopyParser(opts, cols, 0)
		var rows [][]any
		emit := func(line int64, fields [][]byte) error {
			row := make([]any, len(fields))
			for i, f := range fields {
				if f != nil {
					row[i] = string(f)
				}
			}
			rows = append(rows, row)
			return nil
		}
		if err := p.feed(data, emit); err != nil {
			t.Fatalf("%v: %v\n%q", opts.Format, err, data)
		}
		if err := p.finish(emit); err != nil {
			t.Fatalf("%v: %v", opts.Format, err)
		}
		if len(rows) != 2 || !reflect.DeepEqual(rows[0], values) || !reflect.DeepEqual(rows[1], values) {
			t.Errorf("%v %+v: read back %q\nfrom %q", opts.Format, opts, rows, data)
		}
	}
}

func TestCopyBinaryParser(t *testing.T) {
	header := string(binaryHeader())
	for _, tc := range []struct {
		in   string
		want string
	}{
		{header + "\x00\x01\x00\x00\x00\x01a\xff\xff", `1:"a"`},
		{header + "\x00\x01\xff\xff\xff\xff\x00\x01\x00\x00\x00\x00", `1:NULL | 2:""`}, // no trailer is fine
		{"PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x02ab\x00\x01\x00\x00\x00\x01z\xff\xff", `1:"z"`},
		{header + "\x00\x01\x00\x00\x00\x05abc", "error: line 1: ERROR: unexpected EOF in COPY data (SQLSTATE 22P04)"},
		{header + "\x00\x01\xff\xff\xff\xfe", "error: line 1: ERROR: invalid field size (SQLSTATE 22P04)"},
		{header + "\xff\xffmore", "error: line 1: ERROR: received copy data after EOF marker (SQLSTATE 22P04)"},
		{"PGCOPY\n\xff\r\n\x00\x00\x01\x00\x00\x00\x00\x00\x00", "error: line 0: ERROR: invalid COPY file header (WITH OIDS) (SQLSTATE 22P04)"},
		{"PGCOPY\n\xff\r\n\x00\x00\x02\x00\x00\x00\x00\x00\x00", "error: line 0: ERROR: unrecognized critical flags in COPY file header (SQLSTATE 22P04)"},
		{"PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\xff\xff\xff\xff", "error: line 0: ERROR: invalid COPY file header (missing length) (SQLSTATE 22P04)"},
		{"NOTCOPY", "error: line 0: ERROR: COPY file signature not recognized (SQLSTATE 22P04)"},
		{"", "error: line 0: ERROR: COPY file signature not recognized (SQLSTATE 22P04)"},
	} {
		for split := 0; split <= len(tc.in); split++ {
			rows, err := parseAll(CopyOptions{Format: CopyBinary}, 1, tc.in[:split], tc.in[split:])
			got := strings.Join(rows, " | ")
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want {
				t.Errorf("%q split at %d:\n got %s\nwant %s", tc.in, split, got, tc.want)
				break
			}
		}
	}
}

func TestDecodeNumericBinary(t *testing.T) {
	c := newCodec(time.UTC)
	for _, s := range []string{"0", "0.00", "1.50", "-1.50", "123456789012345678901234567890.123456789", "100", "1e20", "0.0001", "-0.000123400", "NaN", "Infinity", "-Infinity", "99990000"} {
		v, err := c.decode(pgtype.NumericOID, textFormat, []byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		// pgtype's encoder is the reference for the binary format.
		bin, _, err := c.encode(nil, pgtype.NumericOID, binaryFormat, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeNumericBinary(bin)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		text, _, _ := c.encode(nil, pgtype.NumericOID, textFormat, got)
		want, _, _ := c.encode(nil, pgtype.NumericOID, textFormat, v)
		if string(text) != string(want) {
			t.Errorf("%s: binary round trip gives %s, want %s", s, text, want)
		}
	}
	// A huge weight with a scale costs little and yields the exact value.
	start := time.Now()
	v, err := decodeNumericBinary([]byte{0, 1, 0x7f, 0xff, 0, 0, 0x3f, 0xff, 0, 7})
	if err != nil || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("huge numeric: %v after %v", err, time.Since(start))
	}
	if n := v.(pgtype.Numeric); n.Exp != -16383 || len(n.Int.String()) != 1+4*32767+16383 {
		t.Fatalf("huge numeric has %d digits, exp %d", len(n.Int.String()), n.Exp)
	}
	for _, bad := range [][]byte{{0, 1}, {0, 1, 0, 0, 0x12, 0x34, 0, 0, 0, 1}, {0, 1, 0, 0, 0, 0, 0, 0, 0x27, 0x10}, {0, 2, 0, 0, 0, 0, 0, 0, 0, 1}} {
		if _, err := decodeNumericBinary(bad); err == nil {
			t.Errorf("accepted %x", bad)
		}
	}
}

func TestCopyRowLimit(t *testing.T) {
	cols := fuzzCopyColumns(1)
	for _, tc := range []struct {
		opts   CopyOptions
		chunks []string
	}{
		{CopyOptions{Format: CopyText}, []string{"ok\n0123456", "789abcdef"}},
		{CopyOptions{Format: CopyCSV}, []string{"\"an open quote\n", "that never closes"}},
		{CopyOptions{Format: CopyBinary}, []string{string(binaryHeader()) + "\x00\x01\x00\x00\x00\x20"}},
	} {
		p := newCopyParser(tc.opts.withDefaults(), cols, 12)
		var err error
		for _, c := range tc.chunks {
			if err = p.feed([]byte(c), func(int64, [][]byte) error { return nil }); err != nil {
				break
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeProgramLimitExceeded {
			t.Errorf("%v: got %v, want 54000", tc.opts.Format, err)
		}
	}
}
