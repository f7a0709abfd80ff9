// Package routing maps rows to buckets. The server and the Go client share
// it: a row's bucket is FNV-1a 64 of the canonical encoding of its bucket key,
// modulo the table's bucket count. The encoding and the hash are part of the
// on-disk contract (docs/format/routing.md) and never change for an existing
// table.
//
// All functions are pure and safe for concurrent use.
package routing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Hash is FNV-1a 64 of key.
func Hash(key []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range key {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// Bucket is the bucket, in [0, buckets), of an encoded key.
func Bucket(key []byte, buckets int) int {
	if buckets <= 0 {
		panic(fmt.Sprintf("routing: bucket count %d", buckets))
	}
	return int(Hash(key) % uint64(buckets))
}

// Tags that start each encoded value.
const (
	tagNull  = 0x00
	tagValue = 0x01
)

// AppendArrowValue appends the canonical encoding of row i of arr to dst.
//
// Encoding: a tag byte (0 null, 1 value), then for a value:
//   - booleans: one byte 0 or 1;
//   - integers of any width: the value as a big-endian int64;
//   - floats of any width: the float64 bits, big-endian, with -0 as +0 and
//     every NaN as the one canonical NaN;
//   - strings and binaries: uvarint length, then the bytes;
//   - date32: the days as a big-endian int64;
//   - time64, timestamp: microseconds as a big-endian int64 (the unit is
//     converted; the time zone does not matter, instants are compared);
//   - decimal128: scale byte, then the 16-byte big-endian two's complement;
//   - fixed-size binary: the bytes;
//   - extension types (uuid): as their storage type.
func AppendArrowValue(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	if ext, ok := arr.(array.ExtensionArray); ok {
		// uuid and other extension types hash as their storage.
		arr = ext.Storage()
	}
	if arr.IsNull(i) {
		return append(dst, tagNull), nil
	}
	dst = append(dst, tagValue)
	switch a := arr.(type) {
	case *array.Boolean:
		if a.Value(i) {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case *array.Int8:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Int16:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Int32:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Int64:
		return appendInt(dst, a.Value(i)), nil
	case *array.Uint8:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Uint16:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Uint32:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Float32:
		return appendFloat(dst, float64(a.Value(i))), nil
	case *array.Float64:
		return appendFloat(dst, a.Value(i)), nil
	case *array.String:
		return appendBytes(dst, []byte(a.Value(i))), nil
	case *array.LargeString:
		return appendBytes(dst, []byte(a.Value(i))), nil
	case *array.Binary:
		return appendBytes(dst, a.Value(i)), nil
	case *array.LargeBinary:
		return appendBytes(dst, a.Value(i)), nil
	case *array.FixedSizeBinary:
		return append(dst, a.Value(i)...), nil
	case *array.Date32:
		return appendInt(dst, int64(a.Value(i))), nil
	case *array.Time64:
		return appendInt(dst, toMicros(int64(a.Value(i)), a.DataType().(*arrow.Time64Type).Unit)), nil
	case *array.Timestamp:
		return appendInt(dst, toMicros(int64(a.Value(i)), a.DataType().(*arrow.TimestampType).Unit)), nil
	case *array.Decimal128:
		v := a.Value(i)
		dst = append(dst, byte(a.DataType().(*arrow.Decimal128Type).Scale))
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.HighBits()))
		return binary.BigEndian.AppendUint64(dst, v.LowBits()), nil
	}
	return nil, fmt.Errorf("routing: cannot use a %s column as a bucket key", arr.DataType())
}

func appendInt(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

func appendFloat(dst []byte, f float64) []byte {
	switch {
	case f == 0:
		f = 0 // -0 → +0
	case math.IsNaN(f):
		f = math.NaN()
	}
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(f))
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func toMicros(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1e6
	case arrow.Millisecond:
		return v * 1e3
	case arrow.Nanosecond:
		return v / 1e3
	}
	return v
}

// RowKey appends the encoded key of row i from the key columns of rec.
func RowKey(dst []byte, rec arrow.RecordBatch, keyCols []int, i int) ([]byte, error) {
	var err error
	for _, c := range keyCols {
		if dst, err = AppendArrowValue(dst, rec.Column(c), i); err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.ColumnName(c), err)
		}
	}
	return dst, nil
}

// Buckets returns the bucket of every row of rec.
func Buckets(rec arrow.RecordBatch, keyCols []int, buckets int) ([]int, error) {
	out := make([]int, rec.NumRows())
	var key []byte
	var err error
	for i := range out {
		if key, err = RowKey(key[:0], rec, keyCols, i); err != nil {
			return nil, err
		}
		out[i] = Bucket(key, buckets)
	}
	return out, nil
}

// Split splits rec into one record per bucket by the bucket of each row's
// key, keeping row order within a bucket. Buckets with no rows are nil. The
// caller releases the returned records.
func Split(ctx context.Context, rec arrow.RecordBatch, keyCols []int, buckets int) ([]arrow.RecordBatch, error) {
	of, err := Buckets(rec, keyCols, buckets)
	if err != nil {
		return nil, err
	}
	counts := make([]int, buckets)
	for _, b := range of {
		counts[b]++
	}
	out := make([]arrow.RecordBatch, buckets)
	for b, n := range counts {
		if n == int(rec.NumRows()) {
			rec.Retain()
			out[b] = rec
			return out, nil
		}
	}
	mem := memory.DefaultAllocator
	for b, n := range counts {
		if n == 0 {
			continue
		}
		idx := array.NewInt64Builder(mem)
		idx.Reserve(n)
		for row, rb := range of {
			if rb == b {
				idx.UnsafeAppend(int64(row))
			}
		}
		indices := idx.NewArray()
		idx.Release()
		taken, err := take(ctx, rec, indices.(*array.Int64))
		indices.Release()
		if err != nil {
			for _, r := range out {
				if r != nil {
					r.Release()
				}
			}
			return nil, fmt.Errorf("routing: split: %w", err)
		}
		out[b] = taken
	}
	return out, nil
}

// take selects rows of rec. Arrow's Take kernel does not handle every type
// (interval month-day-nano, for one); those columns are gathered from
// one-row slices instead, which is slower but works for any type.
func take(ctx context.Context, rec arrow.RecordBatch, indices *array.Int64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i := range cols {
		col, err := compute.TakeArray(ctx, rec.Column(i), indices)
		if err != nil {
			slices := make([]arrow.Array, indices.Len())
			for j := range slices {
				row := indices.Value(j)
				slices[j] = array.NewSlice(rec.Column(i), row, row+1)
			}
			col, err = array.Concatenate(slices, memory.DefaultAllocator)
			for _, sl := range slices {
				sl.Release()
			}
			if err != nil {
				release()
				return nil, fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
			}
		}
		cols[i] = col
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(indices.Len()))
	release()
	return out, nil
}

// RoundRobin picks the bucket of a batch for tables without a bucket key.
// It is shared by every writer on a node, so that concurrent statements
// spread over the buckets. Safe for concurrent use.
type RoundRobin struct{ next atomic.Uint64 }

// Next returns a bucket index in [0, buckets).
func (r *RoundRobin) Next(buckets int) int { return int(r.next.Add(1) % uint64(buckets)) }

// EachBucket routes rec over buckets buckets and calls fn once for every
// bucket that gets rows, with those rows: the whole batch to one bucket
// chosen by rr when keyCols is empty, else the rows split by their key's
// bucket. fn must not keep part past its return without retaining it.
func EachBucket(ctx context.Context, rec arrow.RecordBatch, keyCols []int, buckets int, rr *RoundRobin, fn func(bucket int, part arrow.RecordBatch) error) error {
	if len(keyCols) == 0 {
		return fn(rr.Next(buckets), rec)
	}
	parts, err := Split(ctx, rec, keyCols, buckets)
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.Release()
			}
		}
	}()
	for i, p := range parts {
		if p == nil {
			continue
		}
		if err := fn(i, p); err != nil {
			return err
		}
	}
	return nil
}
