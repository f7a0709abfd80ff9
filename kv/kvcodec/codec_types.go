package kvcodec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// valueCodec encodes and decodes the non-null values of one Arrow type.
type valueCodec struct {
	// encode appends the row encoding of arr[i] (not null) to dst.
	encode func(dst []byte, arr arrow.Array, i int) []byte
	// decode reads one value from the front of src, appends it to b and
	// returns the rest of src.
	decode func(b array.Builder, src []byte) ([]byte, error)
	// key appends the order-preserving encoding of arr[i] (not null); nil
	// when the type cannot be a key column.
	key func(dst []byte, arr arrow.Array, i int) []byte
}

// storageBuilder is implemented by the builders of extension types.
type storageBuilder interface{ StorageBuilder() array.Builder }

func newValueCodec(dt arrow.DataType) (*valueCodec, error) {
	if ext, ok := dt.(arrow.ExtensionType); ok {
		inner, err := newValueCodec(ext.StorageType())
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", ext.ExtensionName(), err)
		}
		vc := &valueCodec{
			encode: func(dst []byte, arr arrow.Array, i int) []byte {
				return inner.encode(dst, arr.(array.ExtensionArray).Storage(), i)
			},
			decode: func(b array.Builder, src []byte) ([]byte, error) {
				return inner.decode(b.(storageBuilder).StorageBuilder(), src)
			},
		}
		if inner.key != nil {
			vc.key = func(dst []byte, arr arrow.Array, i int) []byte {
				return inner.key(dst, arr.(array.ExtensionArray).Storage(), i)
			}
		}
		return vc, nil
	}
	switch t := dt.(type) {
	case *arrow.BooleanType:
		enc := func(dst []byte, arr arrow.Array, i int) []byte {
			if arr.(*array.Boolean).Value(i) {
				return append(dst, 1)
			}
			return append(dst, 0)
		}
		return &valueCodec{encode: enc, key: enc, decode: func(b array.Builder, src []byte) ([]byte, error) {
			if len(src) < 1 || src[0] > 1 {
				return nil, fmt.Errorf("%w: boolean", ErrBadRow)
			}
			b.(*array.BooleanBuilder).Append(src[0] == 1)
			return src[1:], nil
		}}, nil
	case *arrow.Int8Type:
		return signed(1, func(a arrow.Array, i int) int64 { return int64(a.(*array.Int8).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Int8Builder).Append(int8(v)) }), nil
	case *arrow.Int16Type:
		return signed(2, func(a arrow.Array, i int) int64 { return int64(a.(*array.Int16).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Int16Builder).Append(int16(v)) }), nil
	case *arrow.Int32Type:
		return signed(4, func(a arrow.Array, i int) int64 { return int64(a.(*array.Int32).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Int32Builder).Append(int32(v)) }), nil
	case *arrow.Int64Type:
		return signed(8, func(a arrow.Array, i int) int64 { return a.(*array.Int64).Value(i) },
			func(b array.Builder, v int64) { b.(*array.Int64Builder).Append(v) }), nil
	case *arrow.Uint8Type:
		return unsigned(1, func(a arrow.Array, i int) uint64 { return uint64(a.(*array.Uint8).Value(i)) },
			func(b array.Builder, v uint64) { b.(*array.Uint8Builder).Append(uint8(v)) }), nil
	case *arrow.Uint16Type:
		return unsigned(2, func(a arrow.Array, i int) uint64 { return uint64(a.(*array.Uint16).Value(i)) },
			func(b array.Builder, v uint64) { b.(*array.Uint16Builder).Append(uint16(v)) }), nil
	case *arrow.Uint32Type:
		return unsigned(4, func(a arrow.Array, i int) uint64 { return uint64(a.(*array.Uint32).Value(i)) },
			func(b array.Builder, v uint64) { b.(*array.Uint32Builder).Append(uint32(v)) }), nil
	case *arrow.Uint64Type:
		return unsigned(8, func(a arrow.Array, i int) uint64 { return a.(*array.Uint64).Value(i) },
			func(b array.Builder, v uint64) { b.(*array.Uint64Builder).Append(v) }), nil
	case *arrow.Date32Type:
		return signed(4, func(a arrow.Array, i int) int64 { return int64(a.(*array.Date32).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Date32Builder).Append(arrow.Date32(v)) }), nil
	case *arrow.Date64Type:
		return signed(8, func(a arrow.Array, i int) int64 { return int64(a.(*array.Date64).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Date64Builder).Append(arrow.Date64(v)) }), nil
	case *arrow.Time32Type:
		return signed(4, func(a arrow.Array, i int) int64 { return int64(a.(*array.Time32).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Time32Builder).Append(arrow.Time32(v)) }), nil
	case *arrow.Time64Type:
		return signed(8, func(a arrow.Array, i int) int64 { return int64(a.(*array.Time64).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.Time64Builder).Append(arrow.Time64(v)) }), nil
	case *arrow.TimestampType:
		return signed(8, func(a arrow.Array, i int) int64 { return int64(a.(*array.Timestamp).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(v)) }), nil
	case *arrow.DurationType:
		return signed(8, func(a arrow.Array, i int) int64 { return int64(a.(*array.Duration).Value(i)) },
			func(b array.Builder, v int64) { b.(*array.DurationBuilder).Append(arrow.Duration(v)) }), nil
	case *arrow.Float32Type:
		return &valueCodec{
			encode: func(dst []byte, arr arrow.Array, i int) []byte {
				return binary.LittleEndian.AppendUint32(dst, math.Float32bits(arr.(*array.Float32).Value(i)))
			},
			decode: func(b array.Builder, src []byte) ([]byte, error) {
				if len(src) < 4 {
					return nil, fmt.Errorf("%w: float32", ErrBadRow)
				}
				b.(*array.Float32Builder).Append(math.Float32frombits(binary.LittleEndian.Uint32(src)))
				return src[4:], nil
			},
			key: func(dst []byte, arr arrow.Array, i int) []byte {
				return appendFloatKey(dst, float64(arr.(*array.Float32).Value(i)))
			},
		}, nil
	case *arrow.Float64Type:
		return &valueCodec{
			encode: func(dst []byte, arr arrow.Array, i int) []byte {
				return binary.LittleEndian.AppendUint64(dst, math.Float64bits(arr.(*array.Float64).Value(i)))
			},
			decode: func(b array.Builder, src []byte) ([]byte, error) {
				if len(src) < 8 {
					return nil, fmt.Errorf("%w: float64", ErrBadRow)
				}
				b.(*array.Float64Builder).Append(math.Float64frombits(binary.LittleEndian.Uint64(src)))
				return src[8:], nil
			},
			key: func(dst []byte, arr arrow.Array, i int) []byte {
				return appendFloatKey(dst, arr.(*array.Float64).Value(i))
			},
		}, nil
	case *arrow.Decimal128Type:
		return &valueCodec{
			encode: func(dst []byte, arr arrow.Array, i int) []byte {
				v := arr.(*array.Decimal128).Value(i)
				dst = binary.LittleEndian.AppendUint64(dst, v.LowBits())
				return binary.LittleEndian.AppendUint64(dst, uint64(v.HighBits()))
			},
			decode: func(b array.Builder, src []byte) ([]byte, error) {
				if len(src) < 16 {
					return nil, fmt.Errorf("%w: decimal128", ErrBadRow)
				}
				lo, hi := binary.LittleEndian.Uint64(src), int64(binary.LittleEndian.Uint64(src[8:]))
				b.(*array.Decimal128Builder).Append(decimal128.New(hi, lo))
				return src[16:], nil
			},
			key: func(dst []byte, arr arrow.Array, i int) []byte {
				v := arr.(*array.Decimal128).Value(i)
				dst = binary.BigEndian.AppendUint64(dst, uint64(v.HighBits())^(1<<63))
				return binary.BigEndian.AppendUint64(dst, v.LowBits())
			},
		}, nil
	case *arrow.MonthDayNanoIntervalType:
		return &valueCodec{
			encode: func(dst []byte, arr arrow.Array, i int) []byte {
				v := arr.(*array.MonthDayNanoInterval).Value(i)
				dst = binary.LittleEndian.AppendUint32(dst, uint32(v.Months))
				dst = binary.LittleEndian.AppendUint32(dst, uint32(v.Days))
				return binary.LittleEndian.AppendUint64(dst, uint64(v.Nanoseconds))
			},
			decode: func(b array.Builder, src []byte) ([]byte, error) {
				if len(src) < 16 {
					return nil, fmt.Errorf("%w: interval", ErrBadRow)
				}
				b.(*array.MonthDayNanoIntervalBuilder).Append(arrow.MonthDayNanoInterval{
					Months:      int32(binary.LittleEndian.Uint32(src)),
					Days:        int32(binary.LittleEndian.Uint32(src[4:])),
					Nanoseconds: int64(binary.LittleEndian.Uint64(src[8:])),
				})
				return src[16:], nil
			},
			key: func(dst []byte, arr arrow.Array, i int) []byte {
				v := arr.(*array.MonthDayNanoInterval).Value(i)
				dst = binary.BigEndian.AppendUint32(dst, uint32(v.Months)^(1<<31))
				dst = binary.BigEndian.AppendUint32(dst, uint32(v.Days)^(1<<31))
				return binary.BigEndian.AppendUint64(dst, uint64(v.Nanoseconds)^(1<<63))
			},
		}, nil
	case *arrow.StringType:
		return bytesCodec(func(a arrow.Array, i int) []byte { return []byte(a.(*array.String).Value(i)) },
			func(b array.Builder, v []byte) { b.(*array.StringBuilder).BinaryBuilder.Append(v) }), nil
	case *arrow.LargeStringType:
		return bytesCodec(func(a arrow.Array, i int) []byte { return []byte(a.(*array.LargeString).Value(i)) },
			func(b array.Builder, v []byte) { b.(*array.LargeStringBuilder).BinaryBuilder.Append(v) }), nil
	case *arrow.BinaryType:
		return bytesCodec(func(a arrow.Array, i int) []byte { return a.(*array.Binary).Value(i) },
			func(b array.Builder, v []byte) { b.(*array.BinaryBuilder).Append(v) }), nil
	case *arrow.LargeBinaryType:
		return bytesCodec(func(a arrow.Array, i int) []byte { return a.(*array.LargeBinary).Value(i) },
			func(b array.Builder, v []byte) { b.(*array.BinaryBuilder).Append(v) }), nil
	case *arrow.FixedSizeBinaryType:
		width := t.ByteWidth
		enc := func(dst []byte, arr arrow.Array, i int) []byte {
			return append(dst, arr.(*array.FixedSizeBinary).Value(i)...)
		}
		return &valueCodec{encode: enc, key: enc, decode: func(b array.Builder, src []byte) ([]byte, error) {
			if len(src) < width {
				return nil, fmt.Errorf("%w: fixed_size_binary[%d]", ErrBadRow, width)
			}
			b.(*array.FixedSizeBinaryBuilder).Append(src[:width])
			return src[width:], nil
		}}, nil
	case *arrow.ListType:
		elem, err := newValueCodec(t.Elem())
		if err != nil {
			return nil, fmt.Errorf("list element: %w", err)
		}
		return listCodec(elem), nil
	}
	return nil, fmt.Errorf("type %s is not supported", dt)
}

// signed is the codec of a signed integer type of width bytes: little-endian
// in rows; big-endian with the sign bit flipped in keys, so that negative
// values sort first.
func signed(width int, get func(arrow.Array, int) int64, put func(array.Builder, int64)) *valueCodec {
	shift := uint(64 - 8*width)
	return &valueCodec{
		encode: func(dst []byte, arr arrow.Array, i int) []byte {
			return appendLE(dst, uint64(get(arr, i)), width)
		},
		decode: func(b array.Builder, src []byte) ([]byte, error) {
			if len(src) < width {
				return nil, fmt.Errorf("%w: int%d", ErrBadRow, 8*width)
			}
			// Sign-extend the width-byte value.
			v := int64(readLE(src, width)<<shift) >> shift
			put(b, v)
			return src[width:], nil
		},
		key: func(dst []byte, arr arrow.Array, i int) []byte {
			v := uint64(get(arr, i)) ^ (1 << (8*width - 1))
			return appendBE(dst, v, width)
		},
	}
}

// unsigned is the codec of an unsigned integer type of width bytes.
func unsigned(width int, get func(arrow.Array, int) uint64, put func(array.Builder, uint64)) *valueCodec {
	return &valueCodec{
		encode: func(dst []byte, arr arrow.Array, i int) []byte {
			return appendLE(dst, get(arr, i), width)
		},
		decode: func(b array.Builder, src []byte) ([]byte, error) {
			if len(src) < width {
				return nil, fmt.Errorf("%w: uint%d", ErrBadRow, 8*width)
			}
			put(b, readLE(src, width))
			return src[width:], nil
		},
		key: func(dst []byte, arr arrow.Array, i int) []byte {
			return appendBE(dst, get(arr, i), width)
		},
	}
}

// bytesCodec is the codec of strings and binaries: uvarint length and the
// bytes in rows; in keys the bytes with 0x00 escaped as 0x00 0xFF and a 0x00
// 0x01 terminator, which keeps bytewise order and makes no key a prefix of
// another.
func bytesCodec(get func(arrow.Array, int) []byte, put func(array.Builder, []byte)) *valueCodec {
	return &valueCodec{
		encode: func(dst []byte, arr arrow.Array, i int) []byte {
			v := get(arr, i)
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			return append(dst, v...)
		},
		decode: func(b array.Builder, src []byte) ([]byte, error) {
			n, w := binary.Uvarint(src)
			if w <= 0 || uint64(len(src)-w) < n {
				return nil, fmt.Errorf("%w: bytes length", ErrBadRow)
			}
			put(b, src[w:w+int(n)])
			return src[w+int(n):], nil
		},
		key: func(dst []byte, arr arrow.Array, i int) []byte {
			for _, c := range get(arr, i) {
				if c == 0 {
					dst = append(dst, 0x00, 0xFF)
				} else {
					dst = append(dst, c)
				}
			}
			return append(dst, 0x00, 0x01)
		},
	}
}

// listCodec encodes a list as uvarint element count, a null bitmap of the
// elements and the non-null elements. Lists cannot be key columns.
func listCodec(elem *valueCodec) *valueCodec {
	return &valueCodec{
		encode: func(dst []byte, arr arrow.Array, i int) []byte {
			l := arr.(*array.List)
			start, end := l.ValueOffsets(i)
			values := l.ListValues()
			n := int(end - start)
			dst = binary.AppendUvarint(dst, uint64(n))
			bitmap := len(dst)
			dst = append(dst, make([]byte, (n+7)/8)...)
			for j := range n {
				if values.IsNull(int(start) + j) {
					dst[bitmap+j/8] |= 1 << (j % 8)
					continue
				}
				dst = elem.encode(dst, values, int(start)+j)
			}
			return dst
		},
		decode: func(b array.Builder, src []byte) ([]byte, error) {
			lb := b.(*array.ListBuilder)
			n, w := binary.Uvarint(src)
			// n elements take at least their null bitmap; NULL elements
			// take nothing more, so n may exceed the bytes left.
			if w <= 0 || n > 1<<31 || (n+7)/8 > uint64(len(src)-w) {
				return nil, fmt.Errorf("%w: list length", ErrBadRow)
			}
			src = src[w:]
			nb := int(n+7) / 8
			if len(src) < nb {
				return nil, fmt.Errorf("%w: list null bitmap", ErrBadRow)
			}
			bitmap := src[:nb]
			src = src[nb:]
			lb.Append(true)
			vb := lb.ValueBuilder()
			var err error
			for j := range int(n) {
				if bitmap[j/8]&(1<<(j%8)) != 0 {
					vb.AppendNull()
					continue
				}
				if src, err = elem.decode(vb, src); err != nil {
					return nil, err
				}
			}
			return src, nil
		},
	}
}

// appendFloatKey appends the order-preserving encoding of f: -0 is +0 and
// every NaN is the one canonical NaN (sorting after +Inf); positive values
// get the sign bit flipped, negative values all bits.
func appendFloatKey(dst []byte, f float64) []byte {
	switch {
	case f == 0:
		f = 0
	case math.IsNaN(f):
		f = math.NaN()
	}
	bits := math.Float64bits(f)
	if bits&(1<<63) != 0 {
		bits = ^bits
	} else {
		bits ^= 1 << 63
	}
	return binary.BigEndian.AppendUint64(dst, bits)
}

func appendLE(dst []byte, v uint64, width int) []byte {
	for i := range width {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

func readLE(src []byte, width int) uint64 {
	var v uint64
	for i := range width {
		v |= uint64(src[i]) << (8 * i)
	}
	return v
}

func appendBE(dst []byte, v uint64, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}
