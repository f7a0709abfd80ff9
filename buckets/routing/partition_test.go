package routing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Partition names are part of the metadata: they must never change.
func TestPartitionValue(t *testing.T) {
	mem := memory.DefaultAllocator
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	day := time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC)
	build := func(dt arrow.DataType, appendFn func(array.Builder)) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		appendFn(b)
		b.AppendNull()
		return b.NewArray()
	}
	for _, tc := range []struct {
		arr  arrow.Array
		want string
	}{
		{build(arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append("eu-west") }), "eu-west"},
		{build(arrow.PrimitiveTypes.Int16, func(b array.Builder) { b.(*array.Int16Builder).Append(-3) }), "-3"},
		{build(arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).Append(42) }), "42"},
		{build(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(1 << 40) }), "1099511627776"},
		{build(arrow.FixedWidthTypes.Boolean, func(b array.Builder) { b.(*array.BooleanBuilder).Append(true) }), "true"},
		{build(arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).Append(arrow.Date32FromTime(day)) }), "2024-05-06"},
		{build(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, func(b array.Builder) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
		}), "2024-05-06 07:08:09.123456"},
		{build(&arrow.TimestampType{Unit: arrow.Millisecond}, func(b array.Builder) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMilli()))
		}), "2024-05-06 07:08:09.123"},
	} {
		got, err := PartitionValue(tc.arr, 0)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.arr.DataType(), got, err, tc.want)
		}
		if null, err := PartitionValue(tc.arr, 1); err != nil || null != "NULL" {
			t.Errorf("%s null: %q %v", tc.arr.DataType(), null, err)
		}
		tc.arr.Release()
	}
	f := build(arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(1) })
	defer f.Release()
	if _, err := PartitionValue(f, 0); !errors.Is(err, ErrPartitionType) {
		t.Fatalf("float partition: %v", err)
	}
}

func TestSplitByPartition(t *testing.T) {
	rec := testRecord(t, []int64{1, 2, 3, 4, 5}, []string{"b", "a", "b", "c", "a"})
	defer rec.Release()
	parts, err := SplitByPartition(context.Background(), rec, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{"b": {1, 3}, "a": {2, 5}, "c": {4}}
	order := []string{"b", "a", "c"}
	if len(parts) != 3 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, p := range parts {
		if p.Value != order[i] {
			t.Fatalf("part %d is %q, want %q (first appearance order)", i, p.Value, order[i])
		}
		ids := p.Record.Column(0).(*array.Int64).Int64Values()
		if len(ids) != len(want[p.Value]) || ids[0] != want[p.Value][0] || ids[len(ids)-1] != want[p.Value][len(ids)-1] {
			t.Fatalf("part %q ids %v, want %v", p.Value, ids, want[p.Value])
		}
		p.Record.Release()
	}
	one := testRecord(t, []int64{1, 2}, []string{"x", "x"})
	defer one.Release()
	parts, err = SplitByPartition(context.Background(), one, 1)
	if err != nil || len(parts) != 1 || parts[0].Record != one {
		t.Fatalf("one partition: %v %v (want the batch itself)", parts, err)
	}
	parts[0].Record.Release()
}
