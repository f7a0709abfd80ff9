package routing

import (
	"context"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func testRecord(t *testing.T, ids []int64, names []string) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range ids {
		b.Field(0).(*array.Int64Builder).Append(ids[i])
		b.Field(1).(*array.StringBuilder).Append(names[i])
	}
	return b.NewRecordBatch()
}

// The hash is an on-disk contract: these buckets must never change.
func TestGoldenBuckets(t *testing.T) {
	rec := testRecord(t, []int64{1, 2, 3, 42, -7, math.MaxInt64}, []string{"a", "b", "", "ann", "zoë", "x"})
	defer rec.Release()
	got, err := Buckets(rec, []int{0, 1}, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenBuckets
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d: bucket %d, want %d (the routing hash changed: existing tables would be misrouted)", i, got[i], want[i])
		}
	}
}

var goldenBuckets = []int{0, 6, 4, 5, 2, 6}

// Integer keys hash the same whatever their width, and floats normalise.
func TestCanonicalEncoding(t *testing.T) {
	i32 := array.NewInt32Builder(memory.DefaultAllocator)
	i32.Append(42)
	a32 := i32.NewArray()
	i64 := array.NewInt64Builder(memory.DefaultAllocator)
	i64.Append(42)
	a64 := i64.NewArray()
	k32, _ := AppendArrowValue(nil, a32, 0)
	k64, _ := AppendArrowValue(nil, a64, 0)
	if string(k32) != string(k64) {
		t.Fatalf("int32 and int64 42 encode differently: %x %x", k32, k64)
	}
	f := array.NewFloat64Builder(memory.DefaultAllocator)
	f.Append(math.Copysign(0, -1))
	f.Append(0)
	f.AppendNull()
	fa := f.NewArray()
	neg, _ := AppendArrowValue(nil, fa, 0)
	pos, _ := AppendArrowValue(nil, fa, 1)
	null, _ := AppendArrowValue(nil, fa, 2)
	if string(neg) != string(pos) || string(null) != "\x00" {
		t.Fatalf("-0 %x, +0 %x, null %x", neg, pos, null)
	}
	// Length prefixes keep ("ab","c") and ("a","bc") apart.
	r1 := testRecord(t, []int64{1}, []string{"ab"})
	r2 := testRecord(t, []int64{1}, []string{"a"})
	k1, _ := RowKey(nil, r1, []int{1, 1}, 0)
	k2, _ := RowKey(nil, r2, []int{1, 1}, 0)
	if string(k1) == string(k2) {
		t.Fatal("composite keys collide")
	}
}

func TestSplit(t *testing.T) {
	var ids []int64
	var names []string
	for i := int64(0); i < 1000; i++ {
		ids = append(ids, i)
		names = append(names, string(rune('a'+i%26)))
	}
	rec := testRecord(t, ids, names)
	defer rec.Release()
	parts, err := Split(context.Background(), rec, []int{0}, 7)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for b, p := range parts {
		if p == nil {
			continue
		}
		defer p.Release()
		total += int(p.NumRows())
		of, _ := Buckets(p, []int{0}, 7)
		last := int64(-1)
		for i, ob := range of {
			if ob != b {
				t.Fatalf("row in part %d hashes to bucket %d", b, ob)
			}
			id := p.Column(0).(*array.Int64).Value(i)
			if id <= last {
				t.Fatalf("order not kept in bucket %d", b)
			}
			last = id
			if p.Column(1).(*array.String).Value(i) != string(rune('a'+id%26)) {
				t.Fatalf("row %d lost its name column", id)
			}
		}
	}
	if total != 1000 {
		t.Fatalf("%d rows after split, want 1000", total)
	}
}

// Columns Arrow's Take kernel does not support (month-day-nano intervals)
// are split too.
func TestSplitInterval(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "iv", Type: arrow.FixedWidthTypes.MonthDayNanoInterval}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := int64(0); i < 100; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.MonthDayNanoIntervalBuilder).Append(arrow.MonthDayNanoInterval{Months: int32(i), Days: 1, Nanoseconds: i * 1000})
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	parts, err := Split(context.Background(), rec, []int{0}, 4)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range parts {
		if p == nil {
			continue
		}
		total += int(p.NumRows())
		ids := p.Column(0).(*array.Int64)
		ivs := p.Column(1).(*array.MonthDayNanoInterval)
		for i := 0; i < ids.Len(); i++ {
			if ivs.Value(i).Months != int32(ids.Value(i)) || ivs.Value(i).Nanoseconds != ids.Value(i)*1000 {
				t.Fatalf("row %d: interval %+v", ids.Value(i), ivs.Value(i))
			}
		}
		p.Release()
	}
	if total != 100 {
		t.Fatalf("%d rows after split", total)
	}
}

// A uuid bucket key routes by its 16 bytes, the same as the fixed-size
// binary it is stored as, and the split keeps the uuid column's type.
func TestSplitUUID(t *testing.T) {
	uuidType := extensions.NewUUIDType()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: uuidType}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	storage := array.NewFixedSizeBinaryBuilder(memory.DefaultAllocator, &arrow.FixedSizeBinaryType{ByteWidth: 16})
	defer storage.Release()
	ns := array.NewInt64Builder(memory.DefaultAllocator)
	defer ns.Release()
	var ids [][16]byte
	for i := range 64 {
		var id [16]byte
		id[0], id[15] = byte(i), byte(i*7)
		ids = append(ids, id)
		storage.Append(id[:])
		ns.Append(int64(i))
	}
	st, n := storage.NewArray(), ns.NewArray()
	defer st.Release()
	defer n.Release()
	idArr := array.NewExtensionArrayWithStorage(uuidType, st)
	defer idArr.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{idArr, n}, 64)
	defer rec.Release()
	parts, err := Split(context.Background(), rec, []int{0}, 4)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for bucket, p := range parts {
		if p == nil {
			continue
		}
		if !arrow.TypeEqual(p.Schema().Field(0).Type, uuidType) {
			t.Fatalf("bucket %d: id column is %s, want uuid", bucket, p.Schema().Field(0).Type)
		}
		rows := p.Column(1).(*array.Int64)
		for i := 0; i < int(p.NumRows()); i++ {
			id := ids[rows.Value(i)]
			want := Bucket(append([]byte{tagValue}, id[:]...), 4)
			if bucket != want {
				t.Fatalf("row %d in bucket %d, its bytes hash to %d", rows.Value(i), bucket, want)
			}
		}
		total += int(p.NumRows())
		p.Release()
	}
	if total != 64 {
		t.Fatalf("%d rows after split", total)
	}
}
