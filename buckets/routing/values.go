package routing

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// AppendValue appends the canonical encoding (see AppendArrowValue) of v, a
// value of a column of Arrow type dt given as its Go value: what the Value
// method of the column's array returns (bool, int8 … int64, uint8 …
// uint32, float32, float64, string, []byte, decimal128.Num, arrow.Date32,
// arrow.Time64, arrow.Timestamp; for an extension type, its storage's),
// nil for null. The encoding is byte-identical to AppendArrowValue's of the
// same value in an array of type dt, so a point lookup that knows its key as
// Go values routes to the bucket its row was written to.
func AppendValue(dst []byte, dt arrow.DataType, v any) ([]byte, error) {
	if ext, ok := dt.(arrow.ExtensionType); ok {
		dt = ext.StorageType()
	}
	if v == nil {
		return append(dst, tagNull), nil
	}
	mismatch := func() ([]byte, error) {
		return nil, fmt.Errorf("routing: a %T value is not a %s value", v, dt)
	}
	dst = append(dst, tagValue)
	switch t := dt.(type) {
	case *arrow.BooleanType:
		b, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case *arrow.Int8Type:
		return intValue[int8](dst, v, mismatch)
	case *arrow.Int16Type:
		return intValue[int16](dst, v, mismatch)
	case *arrow.Int32Type:
		return intValue[int32](dst, v, mismatch)
	case *arrow.Int64Type:
		return intValue[int64](dst, v, mismatch)
	case *arrow.Uint8Type:
		return intValue[uint8](dst, v, mismatch)
	case *arrow.Uint16Type:
		return intValue[uint16](dst, v, mismatch)
	case *arrow.Uint32Type:
		return intValue[uint32](dst, v, mismatch)
	case *arrow.Date32Type:
		return intValue[arrow.Date32](dst, v, mismatch)
	case *arrow.Float32Type:
		f, ok := v.(float32)
		if !ok {
			return mismatch()
		}
		return appendFloat(dst, float64(f)), nil
	case *arrow.Float64Type:
		f, ok := v.(float64)
		if !ok {
			return mismatch()
		}
		return appendFloat(dst, f), nil
	case *arrow.StringType, *arrow.LargeStringType:
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		return append(dst, s...), nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		b, ok := v.([]byte)
		if !ok {
			return mismatch()
		}
		return appendBytes(dst, b), nil
	case *arrow.FixedSizeBinaryType:
		b, ok := v.([]byte)
		if !ok || len(b) != t.ByteWidth {
			return mismatch()
		}
		return append(dst, b...), nil
	case *arrow.Time64Type:
		x, ok := v.(arrow.Time64)
		if !ok {
			return mismatch()
		}
		return appendInt(dst, toMicros(int64(x), t.Unit)), nil
	case *arrow.TimestampType:
		x, ok := v.(arrow.Timestamp)
		if !ok {
			return mismatch()
		}
		return appendInt(dst, toMicros(int64(x), t.Unit)), nil
	case *arrow.Decimal128Type:
		d, ok := v.(decimal128.Num)
		if !ok {
			return mismatch()
		}
		dst = append(dst, byte(t.Scale))
		dst = binary.BigEndian.AppendUint64(dst, uint64(d.HighBits()))
		return binary.BigEndian.AppendUint64(dst, d.LowBits()), nil
	}
	return nil, fmt.Errorf("routing: cannot use a %s column as a bucket key", dt)
}

func intValue[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32](dst []byte, v any, mismatch func() ([]byte, error)) ([]byte, error) {
	x, ok := v.(T)
	if !ok {
		return mismatch()
	}
	return appendInt(dst, int64(x)), nil
}

// PartitionValueOf is PartitionValue of a value given as its Go value (see
// AppendValue) in a column of Arrow type dt.
func PartitionValueOf(dt arrow.DataType, v any) (string, error) {
	if v == nil {
		return "NULL", nil
	}
	bad := func() (string, error) {
		return "", fmt.Errorf("%w: partitioning by a %s column is not supported", ErrPartitionType, dt)
	}
	switch t := dt.(type) {
	case *arrow.StringType:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case *arrow.Int16Type:
		if x, ok := v.(int16); ok {
			return strconv.FormatInt(int64(x), 10), nil
		}
	case *arrow.Int32Type:
		if x, ok := v.(int32); ok {
			return strconv.FormatInt(int64(x), 10), nil
		}
	case *arrow.Int64Type:
		if x, ok := v.(int64); ok {
			return strconv.FormatInt(x, 10), nil
		}
	case *arrow.BooleanType:
		if x, ok := v.(bool); ok {
			return strconv.FormatBool(x), nil
		}
	case *arrow.Date32Type:
		if x, ok := v.(arrow.Date32); ok {
			return x.ToTime().Format("2006-01-02"), nil
		}
	case *arrow.TimestampType:
		if x, ok := v.(arrow.Timestamp); ok {
			return x.ToTime(t.Unit).UTC().Format("2006-01-02 15:04:05.999999"), nil
		}
	default:
		return bad()
	}
	return "", fmt.Errorf("routing: a %T value is not a %s value", v, dt)
}
