package pgwire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Wire format codes.
const (
	textFormat   int16 = pgtype.TextFormatCode
	binaryFormat int16 = pgtype.BinaryFormatCode
)

// codec encodes result values and decodes parameters and COPY fields for one
// connection. It wraps a pgtype.Map, which is not safe for concurrent use, so
// each connection has its own codec.
type codec struct {
	m *pgtype.Map
	// loc is the session's TimeZone: timestamptz values are rendered in it
	// in text format, and timestamptz input without an offset is read in it.
	loc *time.Location
}

func newCodec(loc *time.Location) *codec {
	m := pgtype.NewMap()
	// Decoded timestamptz values are instants; give them in UTC rather than
	// in the server process's local zone.
	m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
	return &codec{m: m, loc: loc}
}

// TextValues renders values as the engine gives them (engine.GoValue), one
// per type OID, in PostgreSQL's text output, timestamptz in loc; a nil
// value is "". It is for messages (an error's detail), not for results.
func TextValues(oids []uint32, vals []any, loc *time.Location) ([]string, error) {
	c := newCodec(loc)
	out := make([]string, len(vals))
	for i, v := range vals {
		b, null, err := c.encode(nil, oids[i], textFormat, v)
		if err != nil {
			return nil, err
		}
		if !null {
			out[i] = string(b)
		}
	}
	return out, nil
}

// encode appends the encoding of v, for a column of type oid in the given
// format, to buf. null reports SQL NULL, in which case nothing is appended.
func (c *codec) encode(buf []byte, oid uint32, format int16, v any) (out []byte, null bool, err error) {
	switch v := v.(type) {
	case nil:
		return buf, true, nil
	case Text:
		if format == textFormat {
			return append(buf, v...), false, nil
		}
		decoded, err := c.decode(oid, textFormat, []byte(v))
		if err != nil {
			return buf, false, fmt.Errorf("convert text value %q to binary %s: %w", string(v), typeName(oid), err)
		}
		if decoded == nil {
			return buf, true, nil
		}
		return c.encode(buf, oid, format, decoded)
	case time.Time:
		if oid == pgtype.TimestamptzOID && format == textFormat {
			return appendTimestamptz(buf, v.In(c.loc)), false, nil
		}
	case pgtype.Interval:
		if format == textFormat && oid == pgtype.IntervalOID && v.Valid {
			return appendInterval(buf, v), false, nil
		}
	case float64:
		if format == textFormat && (oid == pgtype.Float8OID || oid == pgtype.Float4OID) {
			return appendFloat(buf, v, 64), false, nil
		}
	case float32:
		if format == textFormat && (oid == pgtype.Float8OID || oid == pgtype.Float4OID) {
			return appendFloat(buf, float64(v), 32), false, nil
		}
	case string:
		if oid == pgtype.UUIDOID && format != textFormat {
			// A uuid in its text form (the engine's): parse it for binary.
			return c.encode(buf, oid, format, Text(v))
		}
	case []any:
		if elem, ok := sqltypes.ArrayElemOID(oid); ok {
			out, err := c.encodeArray(buf, elem, format, v)
			return out, false, err
		}
	case pgtype.InfinityModifier:
		// ±infinity, as decode returns it for dates and timestamps.
		switch oid {
		case pgtype.TimestamptzOID:
			return c.encode(buf, oid, format, pgtype.Timestamptz{InfinityModifier: v, Valid: true})
		case pgtype.TimestampOID:
			return c.encode(buf, oid, format, pgtype.Timestamp{InfinityModifier: v, Valid: true})
		case pgtype.DateOID:
			return c.encode(buf, oid, format, pgtype.Date{InfinityModifier: v, Valid: true})
		}
	}
	if _, known := c.m.TypeForOID(oid); !known {
		// A type pgtype does not know: pass bytes and strings through.
		switch v := v.(type) {
		case string:
			return append(buf, v...), false, nil
		case []byte:
			return append(buf, v...), false, nil
		}
		if format == textFormat {
			return fmt.Append(buf, v), false, nil
		}
		return buf, false, fmt.Errorf("cannot encode %T in binary format for unknown type OID %d", v, oid)
	}
	start := len(buf)
	if buf == nil {
		buf = make([]byte, 0, 16)
	}
	out, err = c.m.Encode(oid, format, v, buf)
	if err != nil {
		if format == textFormat && isTextType(oid) {
			// Text columns take any scalar, printed the way PostgreSQL's
			// ::text cast would.
			if s, ok := scalarText(v); ok {
				return append(buf[:start], s...), false, nil
			}
		}
		return buf[:start], false, err
	}
	if out == nil {
		return buf[:start], true, nil
	}
	return out, false, nil
}

// decode converts a parameter or COPY field of type oid from the wire to a Go
// value. src nil is NULL. Errors are *Error with PostgreSQL's SQLSTATE and
// message.
func (c *codec) decode(oid uint32, format int16, src []byte) (any, error) {
	if src == nil {
		return nil, nil
	}
	if format == textFormat && !utf8.Valid(src) {
		return nil, Errorf(CodeCharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\"")
	}
	switch oid {
	case 0, pgtype.UnknownOID, pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		if format == binaryFormat && !utf8.Valid(src) {
			return nil, Errorf(CodeCharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\"")
		}
		return string(src), nil
	case pgtype.JSONOID, pgtype.JSONBOID:
		text := src
		if format == binaryFormat && oid == pgtype.JSONBOID {
			// jsonb's binary form is a version byte (1) and the JSON text.
			switch {
			case len(src) > 0 && src[0] == 1:
				text = src[1:]
			case json.Valid(src):
				// A client that was told the column is json (mink
				// describes jsonb columns as json) sends json's binary
				// form, the bare text.
			default:
				return nil, Errorf(CodeInvalidBinaryRepresentation, "unsupported jsonb version number")
			}
		}
		if !json.Valid(text) {
			return nil, Errorf(CodeInvalidTextRepresentation, "invalid input syntax for type %s", typeName(oid))
		}
		return string(text), nil
	}
	// The fixed-width scalars first: COPY decodes every field here, and
	// finding that a type is not an array is a search of the array types.
	if v, err, ok := decodeFast(oid, format, src); ok {
		if err != nil {
			return nil, inputError(oid, format, src, err)
		}
		return v, nil
	}
	if elem, ok := sqltypes.ArrayElemOID(oid); ok {
		return c.decodeArray(oid, elem, format, src)
	}
	if oid == pgtype.ByteaOID && format == textFormat && !bytes.HasPrefix(src, []byte(`\x`)) {
		// PostgreSQL's escape format (pgtype reads only hex): bytes as
		// they are, \\ for a backslash, \ooo for any byte.
		if b, ok := decodeByteaEscape(src); ok {
			return b, nil
		}
		return nil, inputError(oid, format, src, errors.New("invalid escape sequence"))
	}
	if oid == pgtype.NumericOID {
		if format == binaryFormat {
			return decodeNumericBinary(src)
		}
		if len(src) > maxNumericTextLen {
			return nil, Errorf(CodeNumericValueOutOfRange, "value overflows numeric format")
		}
	}
	t, ok := c.m.TypeForOID(oid)
	if !ok {
		if format == textFormat {
			return string(src), nil
		}
		return append([]byte(nil), src...), nil
	}
	if format == textFormat {
		src = trimTextInput(oid, src)
	}
	v, err := t.Codec.DecodeValue(c.m, oid, format, src)
	if err == nil {
		return v, nil
	}
	if format == textFormat {
		switch oid {
		case pgtype.TimestamptzOID:
			// PostgreSQL reads a timestamptz without an offset in the
			// session's zone.
			if ts, ok := c.m.TypeForOID(pgtype.TimestampOID); ok {
				if v, err3 := ts.Codec.DecodeValue(c.m, pgtype.TimestampOID, format, src); err3 == nil {
					if tm, ok := v.(time.Time); ok {
						return time.Date(tm.Year(), tm.Month(), tm.Day(), tm.Hour(), tm.Minute(), tm.Second(), tm.Nanosecond(), c.loc).UTC(), nil
					}
					return v, nil
				}
			}
		case pgtype.NumericOID:
			if n, ok := parseNumericExponent(string(src)); ok {
				return n, nil
			}
		case pgtype.TimestampOID:
			// PostgreSQL ignores a zone in timestamp-without-time-zone
			// input and keeps the wall-clock time (pgjdbc sends "+00").
			if m := trailingZone.FindIndex(src); m != nil {
				if v, err2 := t.Codec.DecodeValue(c.m, oid, format, src[:m[0]]); err2 == nil {
					return v, nil
				}
			}
		}
	}
	return nil, inputError(oid, format, src, err)
}

// decodeByteaEscape decodes bytea's escape text format; ok is false for a
// backslash that starts neither \\ nor three octal digits (the first at
// most 3).
func decodeByteaEscape(src []byte) ([]byte, bool) {
	out := make([]byte, 0, len(src))
	octal := func(c byte) bool { return c >= '0' && c <= '7' }
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c != '\\':
			out = append(out, c)
		case i+1 < len(src) && src[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(src) && src[i+1] <= '3' && octal(src[i+1]) && octal(src[i+2]) && octal(src[i+3]):
			out = append(out, (src[i+1]-'0')<<6|(src[i+2]-'0')<<3|(src[i+3]-'0'))
			i += 3
		default:
			return nil, false
		}
	}
	return out, true
}

// errBinarySize is a binary value of the wrong length for its type.
var errBinarySize = errors.New("wrong binary size")

// postgresEpoch is 2000-01-01, the zero of PostgreSQL's date and timestamp.
var postgresEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// decodeFast decodes the types that bulk loads carry most, giving the same
// values as pgtype without its type lookups and plans. ok is false for a
// type it leaves to pgtype.
func decodeFast(oid uint32, format int16, src []byte) (v any, err error, ok bool) {
	if format == binaryFormat {
		switch oid {
		case pgtype.Int8OID:
			if len(src) != 8 {
				return nil, errBinarySize, true
			}
			return int64(binary.BigEndian.Uint64(src)), nil, true
		case pgtype.Int4OID:
			if len(src) != 4 {
				return nil, errBinarySize, true
			}
			return int32(binary.BigEndian.Uint32(src)), nil, true
		case pgtype.Int2OID:
			if len(src) != 2 {
				return nil, errBinarySize, true
			}
			return int16(binary.BigEndian.Uint16(src)), nil, true
		case pgtype.Float8OID:
			if len(src) != 8 {
				return nil, errBinarySize, true
			}
			return math.Float64frombits(binary.BigEndian.Uint64(src)), nil, true
		case pgtype.Float4OID:
			if len(src) != 4 {
				return nil, errBinarySize, true
			}
			return math.Float32frombits(binary.BigEndian.Uint32(src)), nil, true
		case pgtype.BoolOID:
			if len(src) != 1 || src[0] > 1 {
				return nil, errBinarySize, true
			}
			return src[0] == 1, nil, true
		case pgtype.TimestamptzOID, pgtype.TimestampOID:
			if len(src) != 8 {
				return nil, errBinarySize, true
			}
			switch us := int64(binary.BigEndian.Uint64(src)); us {
			case math.MaxInt64:
				return pgtype.Infinity, nil, true
			case math.MinInt64:
				return pgtype.NegativeInfinity, nil, true
			default:
				return time.Unix(postgresEpoch.Unix()+us/1e6, us%1e6*1e3).UTC(), nil, true
			}
		case pgtype.DateOID:
			if len(src) != 4 {
				return nil, errBinarySize, true
			}
			switch days := int32(binary.BigEndian.Uint32(src)); days {
			case math.MaxInt32:
				return pgtype.Infinity, nil, true
			case math.MinInt32:
				return pgtype.NegativeInfinity, nil, true
			default:
				return postgresEpoch.AddDate(0, 0, int(days)), nil, true
			}
		}
		return nil, nil, false
	}
	switch oid {
	case pgtype.Int8OID:
		n, err := strconv.ParseInt(trimASCIISpace(src), 10, 64)
		return n, err, true
	case pgtype.Int4OID:
		n, err := strconv.ParseInt(trimASCIISpace(src), 10, 32)
		return int32(n), err, true
	case pgtype.Int2OID:
		n, err := strconv.ParseInt(trimASCIISpace(src), 10, 16)
		return int16(n), err, true
	case pgtype.Float8OID:
		f, err := strconv.ParseFloat(trimASCIISpace(src), 64)
		return f, err, true
	}
	return nil, nil, false
}

func trimASCIISpace(b []byte) string {
	return strings.TrimSpace(string(b))
}

// inputError builds PostgreSQL's error for a value that does not decode.
func inputError(oid uint32, format int16, src []byte, err error) *Error {
	if format == binaryFormat {
		return &Error{Severity: SeverityError, Code: CodeInvalidBinaryRepresentation,
			Message: fmt.Sprintf("incorrect binary data format for type %s", typeName(oid)), Detail: err.Error(), Err: err}
	}
	if errors.Is(err, strconv.ErrRange) {
		return &Error{Severity: SeverityError, Code: CodeNumericValueOutOfRange,
			Message: fmt.Sprintf("value %q is out of range for type %s", string(src), typeName(oid)), Err: err}
	}
	return &Error{Severity: SeverityError, Code: CodeInvalidTextRepresentation,
		Message: fmt.Sprintf("invalid input syntax for type %s: %q", typeName(oid), string(src)), Err: err}
}

// trimTextInput drops the surrounding whitespace PostgreSQL's input functions
// of numeric, boolean and date/time types ignore.
func trimTextInput(oid uint32, src []byte) []byte {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID, pgtype.Float4OID, pgtype.Float8OID,
		pgtype.NumericOID, pgtype.BoolOID, pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID,
		pgtype.UUIDOID, pgtype.IntervalOID, pgtype.TimeOID:
		src = []byte(strings.TrimSpace(string(src)))
		if oid == pgtype.TimestampOID || oid == pgtype.TimestamptzOID {
			src = isoTimestamp(src)
		}
	}
	return src
}

// isoTimestamp rewrites ISO 8601 timestamp text ("2024-03-04T05:06:07Z"),
// which PostgreSQL reads as well as its own form, into that form
// ("2024-03-04 05:06:07+00") for pgtype. Other text is returned unchanged.
func isoTimestamp(src []byte) []byte {
	if len(src) < 12 || (src[10] != 'T' && src[10] != 't') || src[4] != '-' || src[7] != '-' {
		return src
	}
	out := append([]byte(nil), src...)
	out[10] = ' '
	if last := out[len(out)-1]; last == 'Z' || last == 'z' {
		out = append(out[:len(out)-1], "+00"...)
	}
	return out
}

// maxNumericTextLen bounds numeric input: PostgreSQL's numeric holds at most
// 131072 digits before the point and 16383 after, and parsing costs grow
// faster than the length.
const maxNumericTextLen = 131072 + 16383 + 64

// decodeNumericBinary decodes numeric_send's format:
//
//	int16 ndigits, int16 weight, uint16 sign, int16 dscale, ndigits × int16
//	base-10000 digits, the first of weight 10000^weight
//
// It does the work in time linear in the input, unlike pgtype's decoder,
// whose cost a client could inflate with a large weight and scale.
func decodeNumericBinary(src []byte) (any, error) {
	bad := func(what string) error {
		return &Error{Severity: SeverityError, Code: CodeInvalidBinaryRepresentation, Message: "invalid " + what + " in external \"numeric\" value"}
	}
	if len(src) < 8 {
		return nil, bad("length")
	}
	ndigits := int(binary.BigEndian.Uint16(src))
	weight := int(int16(binary.BigEndian.Uint16(src[2:])))
	sign := binary.BigEndian.Uint16(src[4:])
	dscale := int(int16(binary.BigEndian.Uint16(src[6:])))
	switch sign {
	case 0xC000:
		return pgtype.Numeric{NaN: true, Valid: true}, nil
	case 0xD000:
		return pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}, nil
	case 0xF000:
		return pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, nil
	case 0x0000, 0x4000:
	default:
		return nil, bad("sign")
	}
	if dscale < 0 || dscale > 0x3FFF {
		return nil, bad("scale")
	}
	if len(src) != 8+2*ndigits {
		return nil, bad("length")
	}
	// Accumulate four base-10000 digits (16 decimal digits) at a time.
	n := new(big.Int)
	chunk, chunkDigits := uint64(0), 0
	flush := func() {
		if chunkDigits > 0 {
			n.Mul(n, new(big.Int).Exp(big.NewInt(10000), big.NewInt(int64(chunkDigits)), nil))
			n.Add(n, new(big.Int).SetUint64(chunk))
			chunk, chunkDigits = 0, 0
		}
	}
	for i := range ndigits {
		d := binary.BigEndian.Uint16(src[8+2*i:])
		if d >= 10000 {
			return nil, bad("digit")
		}
		chunk = chunk*10000 + uint64(d)
		if chunkDigits++; chunkDigits == 4 {
			flush()
		}
	}
	flush()
	exp := (weight - ndigits + 1) * 4
	// Express the value with dscale fractional digits, as PostgreSQL
	// displays it: 1.50 stays 1.50.
	switch {
	case n.Sign() == 0:
		exp = -dscale
	case -exp < dscale:
		n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dscale+exp)), nil))
		exp = -dscale
	case -exp > dscale:
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-exp-dscale)), nil)
		if q, r := new(big.Int).QuoRem(n, div, new(big.Int)); r.Sign() == 0 {
			n, exp = q, -dscale
		}
	}
	if sign == 0x4000 {
		n.Neg(n)
	}
	return pgtype.Numeric{Int: n, Exp: int32(exp), Valid: true}, nil
}

// parseNumericExponent parses numeric input in scientific notation ("1.5e3"),
// which PostgreSQL accepts and pgtype does not.
func parseNumericExponent(s string) (pgtype.Numeric, bool) {
	i := strings.IndexAny(s, "eE")
	if i <= 0 {
		return pgtype.Numeric{}, false
	}
	exp, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return pgtype.Numeric{}, false
	}
	mant := s[:i]
	var scale int64
	if dot := strings.IndexByte(mant, '.'); dot >= 0 {
		scale = int64(len(mant) - dot - 1)
		mant = mant[:dot] + mant[dot+1:]
	}
	n, ok := new(big.Int).SetString(mant, 10)
	if !ok {
		return pgtype.Numeric{}, false
	}
	return pgtype.Numeric{Int: n, Exp: int32(exp - scale), Valid: true}, true
}

// appendTimestamptz renders t the way PostgreSQL does with DateStyle ISO:
// "2024-01-02 03:04:05.123456+01", minutes and seconds of the offset only
// when non-zero, BC years with " BC".
func appendTimestamptz(buf []byte, t time.Time) []byte {
	t = t.Truncate(time.Microsecond)
	year := t.Year()
	bc := year <= 0
	if bc {
		year = 1 - year
	}
	buf = fmt.Appendf(buf, "%04d-%02d-%02d %02d:%02d:%02d", year, int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second())
	if us := t.Nanosecond() / 1000; us != 0 {
		frac := strings.TrimRight(fmt.Sprintf("%06d", us), "0")
		buf = append(buf, '.')
		buf = append(buf, frac...)
	}
	_, off := t.Zone()
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	buf = fmt.Appendf(buf, "%c%02d", sign, off/3600)
	if m, s := off%3600/60, off%60; m != 0 || s != 0 {
		buf = fmt.Appendf(buf, ":%02d", m)
		if s != 0 {
			buf = fmt.Appendf(buf, ":%02d", s)
		}
	}
	if bc {
		buf = append(buf, " BC"...)
	}
	return buf
}

func isTextType(oid uint32) bool {
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.UnknownOID:
		return true
	}
	return false
}

// scalarText prints a Go scalar as text.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	case int:
		return strconv.FormatInt(int64(v), 10), true
	case int8:
		return strconv.FormatInt(int64(v), 10), true
	case int16:
		return strconv.FormatInt(int64(v), 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint8:
		return strconv.FormatUint(uint64(v), 10), true
	case uint16:
		return strconv.FormatUint(uint64(v), 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case fmt.Stringer:
		return v.String(), true
	}
	return "", false
}

// typeNames is only read (TypeForOID), which is safe concurrently.
var typeNames = pgtype.NewMap()

// typeName is the SQL name PostgreSQL uses for a type in messages.
func typeName(oid uint32) string {
	switch oid {
	case pgtype.BoolOID:
		return "boolean"
	case pgtype.Int2OID:
		return "smallint"
	case pgtype.Int4OID:
		return "integer"
	case pgtype.Int8OID:
		return "bigint"
	case pgtype.Float4OID:
		return "real"
	case pgtype.Float8OID:
		return "double precision"
	case pgtype.NumericOID:
		return "numeric"
	case pgtype.TextOID:
		return "text"
	case pgtype.VarcharOID:
		return "character varying"
	case pgtype.BPCharOID:
		return "character"
	case pgtype.ByteaOID:
		return "bytea"
	case pgtype.DateOID:
		return "date"
	case pgtype.TimestampOID:
		return "timestamp without time zone"
	case pgtype.TimestamptzOID:
		return "timestamp with time zone"
	case pgtype.TimeOID:
		return "time without time zone"
	case pgtype.IntervalOID:
		return "interval"
	case pgtype.UUIDOID:
		return "uuid"
	case pgtype.JSONOID:
		return "json"
	case pgtype.JSONBOID:
		return "jsonb"
	}
	if t, ok := typeNames.TypeForOID(oid); ok {
		if elem, isArray := strings.CutPrefix(t.Name, "_"); isArray {
			if et, ok := typeNames.TypeForName(elem); ok {
				return typeName(et.OID) + "[]"
			}
		}
		return t.Name
	}
	return fmt.Sprintf("oid %d", oid)
}

// typeSize is pg_type.typlen of the standard types.
func typeSize(oid uint32) int16 {
	switch oid {
	case pgtype.BoolOID, pgtype.QCharOID:
		return 1
	case pgtype.Int2OID:
		return 2
	case pgtype.Int4OID, pgtype.Float4OID, pgtype.OIDOID, pgtype.DateOID, pgtype.XIDOID, pgtype.CIDOID:
		return 4
	case pgtype.Int8OID, pgtype.Float8OID, pgtype.TimestampOID, pgtype.TimestamptzOID, pgtype.TimeOID:
		return 8
	case pgtype.TimetzOID:
		return 12
	case pgtype.UUIDOID, pgtype.IntervalOID, pgtype.PointOID:
		return 16
	case pgtype.NameOID:
		return 64
	}
	return -1
}

// appendFloat formats a float the way PostgreSQL's float4out/float8out do
// (extra_float_digits 1, the default): the shortest text that reads back
// exactly, in exponential form when the decimal exponent is below -4 or at
// least 15 (6 for real), and NaN, Infinity, -Infinity.
func appendFloat(buf []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, "NaN"...)
	case math.IsInf(f, 1):
		return append(buf, "Infinity"...)
	case math.IsInf(f, -1):
		return append(buf, "-Infinity"...)
	}
	e := strconv.FormatFloat(f, 'e', -1, bits)
	i := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		return append(buf, e...)
	}
	return strconv.AppendFloat(buf, f, 'f', -1, bits)
}

// trailingZone matches a zone at the end of timestamp text: Z, UTC, or a
// numeric offset such as +00, -08:00, +0530.
var trailingZone = regexp.MustCompile(`\s*(Z|UTC|[+-]\d{1,2}(:?\d{2}){0,2})$`)

// appendInterval formats an interval as PostgreSQL does with IntervalStyle
// postgres: "1 year 2 mons 3 days 04:05:06.5", "-3 days", "00:00:00". The
// time part gets an explicit sign when a preceding part is negative.
func appendInterval(buf []byte, iv pgtype.Interval) []byte {
	years, months := iv.Months/12, iv.Months%12
	// As PostgreSQL's EncodeInterval: a positive field right after a
	// negative one has a plus sign ("-1 mons +37 days 22:00:00").
	negBefore := false
	first := true
	unit := func(n int64, one, many string) {
		if n == 0 {
			return
		}
		if !first {
			buf = append(buf, ' ')
		}
		first = false
		if negBefore && n > 0 {
			buf = append(buf, '+')
		}
		negBefore = n < 0
		buf = strconv.AppendInt(buf, n, 10)
		buf = append(buf, ' ')
		if n == 1 { // PostgreSQL: "-1 mons"
			buf = append(buf, one...)
		} else {
			buf = append(buf, many...)
		}
	}
	unit(int64(years), "year", "years")
	unit(int64(months), "mon", "mons")
	unit(int64(iv.Days), "day", "days")
	us := iv.Microseconds
	if us == 0 && !first {
		return buf
	}
	if !first {
		buf = append(buf, ' ')
	}
	switch {
	case us < 0:
		buf = append(buf, '-')
		us = -us
	case negBefore:
		buf = append(buf, '+')
	}
	h, rem := us/3_600_000_000, us%3_600_000_000
	m, rem := rem/60_000_000, rem%60_000_000
	sec, frac := rem/1_000_000, rem%1_000_000
	buf = fmt.Appendf(buf, "%02d:%02d:%02d", h, m, sec)
	if frac != 0 {
		f := strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
		buf = append(buf, '.')
		buf = append(buf, f...)
	}
	return buf
}
