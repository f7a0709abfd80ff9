package pgwire

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestArrayTextEncoding: array values print as PostgreSQL's array_out does.
func TestArrayTextEncoding(t *testing.T) {
	c := newCodec(time.UTC)
	for _, tc := range []struct {
		oid  uint32
		v    []any
		want string
	}{
		{pgtype.TextArrayOID, []any{}, `{}`},
		{pgtype.TextArrayOID, []any{"a", "b c", nil, "NULL", "", `q"x`, `b\s`, "x,y", "{z}"}, `{a,"b c",NULL,"NULL","","q\"x","b\\s","x,y","{z}"}`},
		{pgtype.Int4ArrayOID, []any{int32(1), nil, int32(-3)}, `{1,NULL,-3}`},
		{pgtype.Float8ArrayOID, []any{1.5, 1e100}, `{1.5,1e+100}`},
		{pgtype.BoolArrayOID, []any{true, false}, `{t,f}`},
		{pgtype.ByteaArrayOID, []any{[]byte{1, 0xff}}, `{"\\x01ff"}`},
		{pgtype.DateArrayOID, []any{time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)}, `{2024-02-29}`},
		{pgtype.TimestamptzArrayOID, []any{time.Date(2024, 2, 29, 10, 0, 0, 0, time.UTC)}, `{"2024-02-29 10:00:00+00"}`},
		{pgtype.UUIDArrayOID, []any{[16]byte{0xa0, 0xee}}, `{a0ee0000-0000-0000-0000-000000000000}`},
		{1183, []any{pgtype.Time{Microseconds: 45296500000, Valid: true}, pgtype.Time{Microseconds: 86_400_000_000, Valid: true}, pgtype.Time{Microseconds: 1, Valid: true}, nil},
			`{12:34:56.5,24:00:00,00:00:00.000001,NULL}`},
	} {
		got, null, err := c.encode(nil, tc.oid, textFormat, tc.v)
		if err != nil || null || string(got) != tc.want {
			t.Errorf("encode(%d, %v) = %s, %v, %v; want %s", tc.oid, tc.v, got, null, err, tc.want)
		}
	}
}

// TestArrayRoundTrip encodes random text[], int8[] and float8[] values in
// both formats, decodes them with pgx's own codecs and with mink's decode,
// and compares. Elements mix the characters array text must quote.
func TestArrayRoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCodec(time.UTC)
	m := pgtype.NewMap()
	alphabet := []string{"a", "Z", " ", "\t", "\n", `"`, `\`, ",", "{", "}", "NULL", "null", "é", "'"}
	randText := func() any {
		if rng.IntN(6) == 0 {
			return nil
		}
		s := ""
		for k := rng.IntN(4); k > 0; k-- {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		return s
	}
	for n := 0; n < 500; n++ {
		var oid uint32
		elems := make([]any, rng.IntN(5))
		switch rng.IntN(3) {
		case 0:
			oid = pgtype.TextArrayOID
			for i := range elems {
				elems[i] = randText()
			}
		case 1:
			oid = pgtype.Int8ArrayOID
			for i := range elems {
				if rng.IntN(5) > 0 {
					elems[i] = int64(rng.Uint64())
				}
			}
		case 2:
			oid = pgtype.Float8ArrayOID
			for i := range elems {
				if rng.IntN(5) > 0 {
					elems[i] = rng.NormFloat64() * 1e10
				}
			}
		}
		for _, format := range []int16{textFormat, binaryFormat} {
			wire, null, err := c.encode(nil, oid, format, elems)
			if err != nil || null {
				t.Fatalf("seed %d: encode %v: %v", seed, elems, err)
			}
			var viaPgx []any
			if err := m.Scan(oid, format, wire, &viaPgx); err != nil {
				t.Fatalf("seed %d: pgx cannot read %q (format %d): %v", seed, wire, format, err)
			}
			if len(viaPgx) != len(elems) {
				t.Fatalf("seed %d: pgx read %v from %q, want %v", seed, viaPgx, wire, elems)
			}
			for i := range elems {
				if !reflect.DeepEqual(viaPgx[i], elems[i]) {
					t.Fatalf("seed %d: pgx read %#v from %q, want %#v", seed, viaPgx, wire, elems)
				}
			}
			back, err := c.decode(oid, format, wire)
			if err != nil || !reflect.DeepEqual(back, elems) {
				t.Fatalf("seed %d: decode(%q, format %d) = %#v, %v; want %#v", seed, wire, format, back, err, elems)
			}
		}
	}
}

// TestArrayDecodeErrors: malformed and multi-dimensional input is 22P02,
// a malformed binary array 22P03, a bad element the element type's error.
func TestArrayDecodeErrors(t *testing.T) {
	c := newCodec(time.UTC)
	m := pgtype.NewMap()
	twoDim, err := m.Encode(pgtype.Int4ArrayOID, binaryFormat, [][]int32{{1, 2}, {3, 4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		oid    uint32
		format int16
		in     string
		code   string
	}{
		{pgtype.TextArrayOID, textFormat, `{a`, "22P02"},
		{pgtype.TextArrayOID, textFormat, `a,b`, "22P02"},
		{pgtype.Int4ArrayOID, textFormat, `{{1,2},{3,4}}`, "22P02"},
		{pgtype.Int4ArrayOID, textFormat, `{1,x}`, "22P02"},
		{pgtype.Int4ArrayOID, binaryFormat, string(twoDim), "22P02"},
		{pgtype.Int4ArrayOID, binaryFormat, "\x00\x00\x00\x01", "22P03"},
		{pgtype.Int4ArrayOID, binaryFormat, "\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x17\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x01", "22P03"},
	} {
		_, err := c.decode(tc.oid, tc.format, []byte(tc.in))
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("decode(%d, %d, %q) = %v, want %s", tc.oid, tc.format, tc.in, err, tc.code)
		}
	}
}
