package routing

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestAppendValueMatchesArrow: for random values (nulls included) of every
// bucket-key type, the encoding from the Go value is byte-identical to the
// encoding from the Arrow array, so both pick the same bucket; the same for
// partition names.
func TestAppendValueMatchesArrow(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	mem := memory.DefaultAllocator
	str := func() string {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = "az\x00\xff"[rng.IntN(4)]
		}
		return string(b)
	}
	type gen struct {
		dt  arrow.DataType
		app func(b array.Builder) any // appends a value, returns its Go value
	}
	gens := []gen{
		{arrow.FixedWidthTypes.Boolean, func(b array.Builder) any {
			v := rng.IntN(2) == 0
			b.(*array.BooleanBuilder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Int8, func(b array.Builder) any {
			v := int8(rng.Uint32())
			b.(*array.Int8Builder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Int16, func(b array.Builder) any {
			v := int16(rng.Uint32())
			b.(*array.Int16Builder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Int32, func(b array.Builder) any {
			v := int32(rng.Uint32())
			b.(*array.Int32Builder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Int64, func(b array.Builder) any {
			v := int64(rng.Uint64()) >> rng.IntN(64)
			b.(*array.Int64Builder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Uint32, func(b array.Builder) any {
			v := rng.Uint32()
			b.(*array.Uint32Builder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Float32, func(b array.Builder) any {
			v := float32([]float64{0, math.Copysign(0, -1), math.NaN(), rng.NormFloat64()}[rng.IntN(4)])
			b.(*array.Float32Builder).Append(v)
			return v
		}},
		{arrow.PrimitiveTypes.Float64, func(b array.Builder) any {
			v := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(-1), rng.NormFloat64()}[rng.IntN(5)]
			b.(*array.Float64Builder).Append(v)
			return v
		}},
		{arrow.BinaryTypes.String, func(b array.Builder) any {
			v := str()
			b.(*array.StringBuilder).Append(v)
			return v
		}},
		{arrow.BinaryTypes.Binary, func(b array.Builder) any {
			v := []byte(str())
			b.(*array.BinaryBuilder).Append(v)
			return v
		}},
		{extensions.NewUUIDType(), func(b array.Builder) any {
			v := make([]byte, 16)
			for i := range v {
				v[i] = byte(rng.Uint32())
			}
			b.(*extensions.UUIDBuilder).StorageBuilder().(*array.FixedSizeBinaryBuilder).Append(v)
			return v
		}},
		{arrow.FixedWidthTypes.Date32, func(b array.Builder) any {
			v := arrow.Date32(rng.Int32N(100000) - 50000)
			b.(*array.Date32Builder).Append(v)
			return v
		}},
		{arrow.FixedWidthTypes.Time64us, func(b array.Builder) any {
			v := arrow.Time64(rng.Int64N(86400e6))
			b.(*array.Time64Builder).Append(v)
			return v
		}},
		{&arrow.TimestampType{Unit: arrow.Microsecond}, func(b array.Builder) any {
			v := arrow.Timestamp(rng.Int64N(4e15) - 2e15)
			b.(*array.TimestampBuilder).Append(v)
			return v
		}},
		{&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, func(b array.Builder) any {
			v := arrow.Timestamp(rng.Int64N(4e15) - 2e15)
			b.(*array.TimestampBuilder).Append(v)
			return v
		}},
		{&arrow.TimestampType{Unit: arrow.Nanosecond}, func(b array.Builder) any {
			v := arrow.Timestamp(rng.Int64N(4e18) - 2e18)
			b.(*array.TimestampBuilder).Append(v)
			return v
		}},
		{&arrow.Decimal128Type{Precision: 20, Scale: 3}, func(b array.Builder) any {
			v := decimal128.FromI64(rng.Int64N(2e15) - 1e15)
			b.(*array.Decimal128Builder).Append(v)
			return v
		}},
	}
	for _, g := range gens {
		b := array.NewBuilder(mem, g.dt)
		var vals []any
		for range 200 {
			if rng.IntN(6) == 0 {
				b.AppendNull()
				vals = append(vals, nil)
				continue
			}
			vals = append(vals, g.app(b))
		}
		arr := b.NewArray()
		b.Release()
		for i, v := range vals {
			want, err := AppendArrowValue([]byte{7}, arr, i)
			if err != nil {
				t.Fatalf("%s: %v", g.dt, err)
			}
			got, err := AppendValue([]byte{7}, g.dt, v)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s value %#v: AppendValue %x %v, AppendArrowValue %x", g.dt, v, got, err, want)
			}
			wantPart, werr := PartitionValue(arr, i)
			gotPart, gerr := PartitionValueOf(g.dt, v)
			if (werr == nil) != (gerr == nil) || gotPart != wantPart {
				t.Fatalf("%s value %#v: PartitionValueOf %q %v, PartitionValue %q %v", g.dt, v, gotPart, gerr, wantPart, werr)
			}
		}
		arr.Release()
	}
	// Wrong Go types and types that cannot key a bucket are errors.
	if _, err := AppendValue(nil, arrow.PrimitiveTypes.Int32, int64(1)); err == nil {
		t.Error("an int64 accepted as an Int32 value")
	}
	if _, err := AppendValue(nil, arrow.PrimitiveTypes.Uint64, uint64(1)); err == nil {
		t.Error("a Uint64 bucket key accepted")
	}
	if _, err := PartitionValueOf(arrow.PrimitiveTypes.Int64, "1"); err == nil {
		t.Error("a string accepted as an Int64 partition value")
	}
}
