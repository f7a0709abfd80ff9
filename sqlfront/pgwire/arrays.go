package pgwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Arrays of the types mink has (text[], integer[], …) are one-dimensional
// with lower bound 1. Their values are []any of the element type's values
// (see the package documentation); elements are encoded and decoded with
// the element type's own rules (codec.encode and codec.decode), so an
// element of a timestamptz[] prints in the session's zone as a scalar
// does.

// encodeArray appends the wire form of elems as an array whose elements
// have type elemOID.
func (c *codec) encodeArray(buf []byte, elemOID uint32, format int16, elems []any) ([]byte, error) {
	if format == textFormat {
		buf = append(buf, '{')
		var scratch []byte
		for i, e := range elems {
			if i > 0 {
				buf = append(buf, ',')
			}
			if t, ok := e.(pgtype.Time); ok && t.Valid && elemOID == pgtype.TimeOID {
				// PostgreSQL's time_out: fractional digits only as needed.
				buf = appendTimeText(buf, t.Microseconds)
				continue
			}
			var null bool
			var err error
			scratch, null, err = c.encode(scratch[:0], elemOID, textFormat, e)
			if err != nil {
				return buf, err
			}
			if null {
				buf = append(buf, "NULL"...)
				continue
			}
			buf = sqltypes.AppendArrayElement(buf, string(scratch))
		}
		return append(buf, '}'), nil
	}
	// Binary: ndim, has-null flag, element type, then per dimension its
	// length and lower bound, then the elements, each a length (-1 for
	// NULL) and its bytes.
	hasNull := int32(0)
	for _, e := range elems {
		if e == nil {
			hasNull = 1
		}
	}
	if len(elems) == 0 {
		buf = binary.BigEndian.AppendUint32(buf, 0)
		buf = binary.BigEndian.AppendUint32(buf, 0)
		return binary.BigEndian.AppendUint32(buf, elemOID), nil
	}
	buf = binary.BigEndian.AppendUint32(buf, 1)
	buf = binary.BigEndian.AppendUint32(buf, uint32(hasNull))
	buf = binary.BigEndian.AppendUint32(buf, elemOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(elems)))
	buf = binary.BigEndian.AppendUint32(buf, 1)
	for _, e := range elems {
		at := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		var null bool
		var err error
		buf, null, err = c.encode(buf, elemOID, binaryFormat, e)
		if err != nil {
			return buf, err
		}
		if null {
			binary.BigEndian.PutUint32(buf[at:], math.MaxUint32) // -1
			buf = buf[:at+4]
			continue
		}
		binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	}
	return buf, nil
}

// decodeArray reads an array parameter or COPY field whose elements have
// type elemOID into []any. Errors are *Error: 22P02 for malformed text and
// multi-dimensional values (mink stores one dimension), 22P03 for a
// malformed binary array, and the element type's errors.
func (c *codec) decodeArray(oid, elemOID uint32, format int16, src []byte) (any, error) {
	if format == textFormat {
		elems, err := sqltypes.ParseArrayText(string(src))
		if err != nil {
			return nil, toWireError(err)
		}
		out := make([]any, len(elems))
		for i, e := range elems {
			if e == nil {
				continue
			}
			v, err := c.decode(elemOID, textFormat, []byte(*e))
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	bad := func(msg string) error {
		return Errorf(CodeInvalidBinaryRepresentation, "invalid binary array for type %s: %s", typeName(oid), msg)
	}
	if len(src) < 12 {
		return nil, bad("too short")
	}
	ndim := int32(binary.BigEndian.Uint32(src))
	flags := binary.BigEndian.Uint32(src[4:])
	got := binary.BigEndian.Uint32(src[8:])
	if flags > 1 {
		return nil, bad("invalid flags")
	}
	if got != elemOID {
		return nil, Errorf(CodeDatatypeMismatch, "binary data has array element type %d (%s) instead of expected %d (%s)", got, typeName(got), elemOID, typeName(elemOID))
	}
	switch {
	case ndim == 0:
		return []any{}, nil
	case ndim > 1:
		return nil, Errorf(CodeInvalidTextRepresentation, "multidimensional arrays are not supported by mink")
	case ndim < 0:
		return nil, bad("invalid number of dimensions")
	}
	if len(src) < 20 {
		return nil, bad("too short")
	}
	n := int32(binary.BigEndian.Uint32(src[12:]))
	if n < 0 || int64(n)*4 > int64(len(src)) {
		return nil, bad("invalid array length")
	}
	src = src[20:]
	out := make([]any, n)
	for i := range out {
		if len(src) < 4 {
			return nil, bad("too short")
		}
		l := int32(binary.BigEndian.Uint32(src))
		src = src[4:]
		if l == -1 {
			continue
		}
		if l < 0 || int(l) > len(src) {
			return nil, bad("invalid element length")
		}
		v, err := c.decode(elemOID, binaryFormat, src[:l:l])
		if err != nil {
			return nil, err
		}
		out[i] = v
		src = src[l:]
	}
	if len(src) != 0 {
		return nil, bad("trailing data")
	}
	return out, nil
}

// toWireError converts a *sqltypes.Error into an *Error with its SQLSTATE.
func toWireError(err error) error {
	if e, ok := err.(*sqltypes.Error); ok {
		return &Error{Code: e.Code, Message: e.Message}
	}
	return fmt.Errorf("%w", err)
}

// appendTimeText appends a time of day as PostgreSQL prints it:
// HH:MM:SS, then the fraction of a second without trailing zeros.
func appendTimeText(buf []byte, us int64) []byte {
	sec, frac := us/1_000_000, us%1_000_000
	two := func(b []byte, v int64) []byte {
		if v < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, v, 10)
	}
	buf = two(buf, sec/3600)
	buf = two(append(buf, ':'), sec/60%60)
	buf = two(append(buf, ':'), sec%60)
	if frac != 0 {
		digits := strconv.AppendInt(nil, frac+1_000_000, 10)[1:] // 6 digits
		for len(digits) > 0 && digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		buf = append(append(buf, '.'), digits...)
	}
	return buf
}
