package pgwire

import (
	"encoding/binary"
	"fmt"
	"math"

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
