package kvcodec

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Go values. A point lookup knows its key as Go values (bound parameters)
// and wants the row as Go values (for the wire), so AppendKeyValues and
// DecodeValues work on them directly, without Arrow arrays. A column's Go
// value is what the Value method of its Arrow array returns, for the
// storage type of extension types:
//
//	Boolean                         bool
//	Int8 … Int64, Uint8 … Uint64    int8 … int64, uint8 … uint64
//	Float32, Float64                float32, float64
//	Decimal128                      decimal128.Num (the column's scale)
//	String, LargeString             string
//	Binary, LargeBinary             []byte
//	FixedSizeBinary(n) (uuid)       []byte of length n
//	Date32, Date64                  arrow.Date32, arrow.Date64
//	Time32, Time64                  arrow.Time32, arrow.Time64
//	Timestamp, Duration             arrow.Timestamp, arrow.Duration
//	MonthDayNanoInterval            arrow.MonthDayNanoInterval
//	List                            []any of the elements' Go values
//
// and nil is NULL. The encodings are those of the Arrow paths: a key from
// AppendKeyValues is byte-identical to AppendKey's for the same values.

// goCodec is the Go-value side of a valueCodec.
type goCodec struct {
	// key appends the order-preserving encoding of v; nil when the type
	// cannot be a key column.
	key func(dst []byte, v any) ([]byte, error)
	// value reads one value from the front of src.
	value func(src []byte) (any, []byte, error)
	// skip returns src past its first value.
	skip func(src []byte) ([]byte, error)
}

// AppendKeyValues appends the encoded primary key whose column values are
// vals, in key order, each of the column's Go type (see above).
func (c *Codec) AppendKeyValues(dst []byte, vals []any) ([]byte, error) {
	if len(vals) != len(c.keyCols) {
		return nil, fmt.Errorf("kv: key has %d values, the primary key %d columns", len(vals), len(c.keyCols))
	}
	var err error
	for n, k := range c.keyCols {
		if vals[n] == nil {
			return nil, fmt.Errorf("kv: key column %q: %w", c.schema.Field(k).Name, ErrNullKey)
		}
		if dst, err = c.gos[k].key(dst, vals[n]); err != nil {
			return nil, fmt.Errorf("kv: key column %q: %w", c.schema.Field(k).Name, err)
		}
	}
	return dst, nil
}

// DecodeValues decodes the columns cols (table column indexes, in any order,
// repeats allowed) of an encoded row into out, which has len(cols) entries:
// each the column's Go value (see above), nil for NULL; a column the row
// lacks (added after it was stored) gets its missing value. Columns not
// asked for are skipped, not decoded.
func (c *Codec) DecodeValues(row []byte, cols []int, out []any) error {
	if len(out) != len(cols) {
		return fmt.Errorf("kv: %d columns asked for, %d outputs", len(cols), len(out))
	}
	ncols, bitmap, src, err := c.rowParts(row)
	if err != nil {
		return err
	}
	if c.visOf != nil {
		// Schema's indexes, to the stored columns'.
		stored := make([]int, len(cols))
		for j, col := range cols {
			stored[j] = slices.Index(c.visOf, col)
			if col < 0 {
				stored[j] = -1
			}
		}
		cols = stored
	}
	for _, col := range cols {
		if col < 0 || col >= len(c.cols) {
			return fmt.Errorf("kv: column %d out of range (schema has %d columns)", col, c.visible.NumFields())
		}
	}
	for n, gc := range c.gos[:ncols] {
		wanted := false
		for _, col := range cols {
			if col == n {
				wanted = true
				break
			}
		}
		null := bitmap[n/8]&(1<<(n%8)) != 0
		if !wanted || null {
			if !null {
				var err error
				if src, err = gc.skip(src); err != nil {
					return fmt.Errorf("kv: column %q: %w", c.schema.Field(n).Name, err)
				}
			}
			if null {
				for j, col := range cols {
					if col == n {
						out[j] = nil
					}
				}
			}
			continue
		}
		v, rest, err := gc.value(src)
		if err != nil {
			return fmt.Errorf("kv: column %q: %w", c.schema.Field(n).Name, err)
		}
		src = rest
		for j, col := range cols {
			if col == n {
				out[j] = v
			}
		}
	}
	if len(src) != 0 {
		return fmt.Errorf("kv: %w: %d trailing bytes", ErrBadRow, len(src))
	}
	for j, col := range cols {
		if col < ncols {
			continue
		}
		out[j] = nil
		if m := c.missing[col]; m != nil {
			v, _, err := c.gos[col].value(m)
			if err != nil {
				// NewTableCodec encoded it.
				panic(fmt.Sprintf("kv: the missing value %x of column %q does not decode: %v", m, c.schema.Field(col).Name, err))
			}
			out[j] = v
		}
	}
	return nil
}

func wrongGoType(dt arrow.DataType, v any) error {
	return fmt.Errorf("a %T value is not a %s value", v, dt)
}

func newGoCodec(dt arrow.DataType) (*goCodec, error) {
	if ext, ok := dt.(arrow.ExtensionType); ok {
		return newGoCodec(ext.StorageType())
	}
	fixed := func(width int) func([]byte) ([]byte, error) {
		return func(src []byte) ([]byte, error) {
			if len(src) < width {
				return nil, fmt.Errorf("%w: %s", ErrBadRow, dt)
			}
			return src[width:], nil
		}
	}
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				b, ok := v.(bool)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				if b {
					return append(dst, 1), nil
				}
				return append(dst, 0), nil
			},
			value: func(src []byte) (any, []byte, error) {
				if len(src) < 1 || src[0] > 1 {
					return nil, nil, fmt.Errorf("%w: boolean", ErrBadRow)
				}
				return src[0] == 1, src[1:], nil
			},
			skip: fixed(1),
		}, nil
	case *arrow.Int8Type:
		return signedGo[int8](dt, 1, func(v int64) any { return int8(v) }), nil
	case *arrow.Int16Type:
		return signedGo[int16](dt, 2, func(v int64) any { return int16(v) }), nil
	case *arrow.Int32Type:
		return signedGo[int32](dt, 4, func(v int64) any { return int32(v) }), nil
	case *arrow.Int64Type:
		return signedGo[int64](dt, 8, func(v int64) any { return v }), nil
	case *arrow.Date32Type:
		return signedGo[arrow.Date32](dt, 4, func(v int64) any { return arrow.Date32(v) }), nil
	case *arrow.Date64Type:
		return signedGo[arrow.Date64](dt, 8, func(v int64) any { return arrow.Date64(v) }), nil
	case *arrow.Time32Type:
		return signedGo[arrow.Time32](dt, 4, func(v int64) any { return arrow.Time32(v) }), nil
	case *arrow.Time64Type:
		return signedGo[arrow.Time64](dt, 8, func(v int64) any { return arrow.Time64(v) }), nil
	case *arrow.TimestampType:
		return signedGo[arrow.Timestamp](dt, 8, func(v int64) any { return arrow.Timestamp(v) }), nil
	case *arrow.DurationType:
		return signedGo[arrow.Duration](dt, 8, func(v int64) any { return arrow.Duration(v) }), nil
	case *arrow.Uint8Type:
		return unsignedGo[uint8](dt, 1, func(v uint64) any { return uint8(v) }), nil
	case *arrow.Uint16Type:
		return unsignedGo[uint16](dt, 2, func(v uint64) any { return uint16(v) }), nil
	case *arrow.Uint32Type:
		return unsignedGo[uint32](dt, 4, func(v uint64) any { return uint32(v) }), nil
	case *arrow.Uint64Type:
		return unsignedGo[uint64](dt, 8, func(v uint64) any { return v }), nil
	case *arrow.Float32Type:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				f, ok := v.(float32)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				return appendFloatKey(dst, float64(f)), nil
			},
			value: func(src []byte) (any, []byte, error) {
				if len(src) < 4 {
					return nil, nil, fmt.Errorf("%w: float32", ErrBadRow)
				}
				return math.Float32frombits(binary.LittleEndian.Uint32(src)), src[4:], nil
			},
			skip: fixed(4),
		}, nil
	case *arrow.Float64Type:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				f, ok := v.(float64)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				return appendFloatKey(dst, f), nil
			},
			value: func(src []byte) (any, []byte, error) {
				if len(src) < 8 {
					return nil, nil, fmt.Errorf("%w: float64", ErrBadRow)
				}
				return math.Float64frombits(binary.LittleEndian.Uint64(src)), src[8:], nil
			},
			skip: fixed(8),
		}, nil
	case *arrow.Decimal128Type:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				d, ok := v.(decimal128.Num)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				dst = binary.BigEndian.AppendUint64(dst, uint64(d.HighBits())^(1<<63))
				return binary.BigEndian.AppendUint64(dst, d.LowBits()), nil
			},
			value: func(src []byte) (any, []byte, error) {
				if len(src) < 16 {
					return nil, nil, fmt.Errorf("%w: decimal128", ErrBadRow)
				}
				lo, hi := binary.LittleEndian.Uint64(src), int64(binary.LittleEndian.Uint64(src[8:]))
				return decimal128.New(hi, lo), src[16:], nil
			},
			skip: fixed(16),
		}, nil
	case *arrow.MonthDayNanoIntervalType:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				iv, ok := v.(arrow.MonthDayNanoInterval)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				dst = binary.BigEndian.AppendUint32(dst, uint32(iv.Months)^(1<<31))
				dst = binary.BigEndian.AppendUint32(dst, uint32(iv.Days)^(1<<31))
				return binary.BigEndian.AppendUint64(dst, uint64(iv.Nanoseconds)^(1<<63)), nil
			},
			value: func(src []byte) (any, []byte, error) {
				if len(src) < 16 {
					return nil, nil, fmt.Errorf("%w: interval", ErrBadRow)
				}
				return arrow.MonthDayNanoInterval{
					Months:      int32(binary.LittleEndian.Uint32(src)),
					Days:        int32(binary.LittleEndian.Uint32(src[4:])),
					Nanoseconds: int64(binary.LittleEndian.Uint64(src[8:])),
				}, src[16:], nil
			},
			skip: fixed(16),
		}, nil
	case *arrow.StringType, *arrow.LargeStringType:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				s, ok := v.(string)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				return appendBytesKey(dst, s), nil
			},
			value: func(src []byte) (any, []byte, error) {
				b, rest, err := lengthPrefixed(src)
				if err != nil {
					return nil, nil, err
				}
				return string(b), rest, nil
			},
			skip: skipLengthPrefixed,
		}, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				b, ok := v.([]byte)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				return appendBytesKey(dst, b), nil
			},
			value: func(src []byte) (any, []byte, error) {
				b, rest, err := lengthPrefixed(src)
				if err != nil {
					return nil, nil, err
				}
				return append([]byte{}, b...), rest, nil
			},
			skip: skipLengthPrefixed,
		}, nil
	case *arrow.FixedSizeBinaryType:
		width := t.ByteWidth
		return &goCodec{
			key: func(dst []byte, v any) ([]byte, error) {
				b, ok := v.([]byte)
				if !ok {
					return nil, wrongGoType(dt, v)
				}
				if len(b) != width {
					return nil, fmt.Errorf("a value of %d bytes is not a %s value", len(b), dt)
				}
				return append(dst, b...), nil
			},
			value: func(src []byte) (any, []byte, error) {
				if len(src) < width {
					return nil, nil, fmt.Errorf("%w: fixed_size_binary[%d]", ErrBadRow, width)
				}
				return append([]byte{}, src[:width]...), src[width:], nil
			},
			skip: fixed(width),
		}, nil
	case *arrow.ListType:
		elem, err := newGoCodec(t.Elem())
		if err != nil {
			return nil, err
		}
		list := func(src []byte, decode bool) (any, []byte, error) {
			n, w := binary.Uvarint(src)
			// n elements take at least their null bitmap; NULL elements
			// take nothing more, so n may exceed the bytes left.
			if w <= 0 || n > 1<<31 || (n+7)/8 > uint64(len(src)-w) {
				return nil, nil, fmt.Errorf("%w: list length", ErrBadRow)
			}
			src = src[w:]
			nb := int(n+7) / 8
			if len(src) < nb {
				return nil, nil, fmt.Errorf("%w: list null bitmap", ErrBadRow)
			}
			bitmap := src[:nb]
			src = src[nb:]
			var out []any
			if decode {
				out = make([]any, n)
			}
			var err error
			for j := range int(n) {
				if bitmap[j/8]&(1<<(j%8)) != 0 {
					continue
				}
				if !decode {
					if src, err = elem.skip(src); err != nil {
						return nil, nil, err
					}
					continue
				}
				if out[j], src, err = elem.value(src); err != nil {
					return nil, nil, err
				}
			}
			return out, src, nil
		}
		return &goCodec{
			value: func(src []byte) (any, []byte, error) { return list(src, true) },
			skip: func(src []byte) ([]byte, error) {
				_, rest, err := list(src, false)
				return rest, err
			},
		}, nil
	}
	return nil, fmt.Errorf("type %s is not supported", dt)
}

// signedGo is the Go-value codec of a signed integer (or temporal) type of
// width bytes whose Go type is T.
func signedGo[T ~int8 | ~int16 | ~int32 | ~int64](dt arrow.DataType, width int, box func(int64) any) *goCodec {
	shift := uint(64 - 8*width)
	return &goCodec{
		key: func(dst []byte, v any) ([]byte, error) {
			x, ok := v.(T)
			if !ok {
				return nil, wrongGoType(dt, v)
			}
			return appendBE(dst, uint64(int64(x))^(1<<(8*width-1)), width), nil
		},
		value: func(src []byte) (any, []byte, error) {
			if len(src) < width {
				return nil, nil, fmt.Errorf("%w: int%d", ErrBadRow, 8*width)
			}
			return box(int64(readLE(src, width)<<shift) >> shift), src[width:], nil
		},
		skip: func(src []byte) ([]byte, error) {
			if len(src) < width {
				return nil, fmt.Errorf("%w: int%d", ErrBadRow, 8*width)
			}
			return src[width:], nil
		},
	}
}

// unsignedGo is the Go-value codec of an unsigned integer type.
func unsignedGo[T ~uint8 | ~uint16 | ~uint32 | ~uint64](dt arrow.DataType, width int, box func(uint64) any) *goCodec {
	return &goCodec{
		key: func(dst []byte, v any) ([]byte, error) {
			x, ok := v.(T)
			if !ok {
				return nil, wrongGoType(dt, v)
			}
			return appendBE(dst, uint64(x), width), nil
		},
		value: func(src []byte) (any, []byte, error) {
			if len(src) < width {
				return nil, nil, fmt.Errorf("%w: uint%d", ErrBadRow, 8*width)
			}
			return box(readLE(src, width)), src[width:], nil
		},
		skip: func(src []byte) ([]byte, error) {
			if len(src) < width {
				return nil, fmt.Errorf("%w: uint%d", ErrBadRow, 8*width)
			}
			return src[width:], nil
		},
	}
}

// appendBytesKey is the key encoding of strings and binaries (bytesCodec).
func appendBytesKey[B string | []byte](dst []byte, b B) []byte {
	for i := 0; i < len(b); i++ {
		if c := b[i]; c == 0 {
			dst = append(dst, 0x00, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0x00, 0x01)
}

func lengthPrefixed(src []byte) ([]byte, []byte, error) {
	n, w := binary.Uvarint(src)
	if w <= 0 || uint64(len(src)-w) < n {
		return nil, nil, fmt.Errorf("%w: bytes length", ErrBadRow)
	}
	return src[w : w+int(n)], src[w+int(n):], nil
}

func skipLengthPrefixed(src []byte) ([]byte, error) {
	_, rest, err := lengthPrefixed(src)
	return rest, err
}
