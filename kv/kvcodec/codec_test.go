package kvcodec

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// allTypesSchema has a column of every Arrow type a mink table stores
// (docs/sql-types.md), plus a few more primitives.
func allTypesSchema(t testing.TB) *arrow.Schema {
	jsonType, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		t.Fatal(err)
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i2", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i4", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f4", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f8", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "num", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bytea", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "date", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "time", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "tstz", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "iv", Type: arrow.FixedWidthTypes.MonthDayNanoInterval, Nullable: true},
		{Name: "uuid", Type: extensions.NewUUIDType(), Nullable: true},
		{Name: "json", Type: jsonType, Nullable: true},
		{Name: "ints", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "i1", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
	}, nil)
}

// randomAllTypes builds n random rows of allTypesSchema, about one value in
// five null.
func randomAllTypes(t testing.TB, rng *rand.Rand, n int) arrow.RecordBatch {
	schema := allTypesSchema(t)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	str := func() string {
		buf := make([]byte, rng.IntN(6))
		for i := range buf {
			buf[i] = "ab\x00\xff"[rng.IntN(4)]
		}
		return string(buf)
	}
	for range n {
		for c, f := range b.Fields() {
			if rng.IntN(5) == 0 {
				f.AppendNull()
				continue
			}
			switch c {
			case 0:
				f.(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
			case 1:
				f.(*array.Int16Builder).Append(int16(rng.Uint32()))
			case 2:
				f.(*array.Int32Builder).Append(int32(rng.Uint32()))
			case 3:
				f.(*array.Int64Builder).Append(int64(rng.Uint64()) >> rng.IntN(64))
			case 4:
				f.(*array.Float32Builder).Append(float32(rng.NormFloat64()))
			case 5:
				f.(*array.Float64Builder).Append([]float64{0, math.Inf(1), math.Inf(-1), -1.5, 1e300, rng.NormFloat64()}[rng.IntN(6)])
			case 6:
				f.(*array.Decimal128Builder).Append(decimal128.FromI64(rng.Int64N(2e11) - 1e11))
			case 7:
				f.(*array.StringBuilder).Append(str())
			case 8:
				f.(*array.BinaryBuilder).Append([]byte(str()))
			case 9:
				f.(*array.Date32Builder).Append(arrow.Date32(rng.Int32N(100000) - 50000))
			case 10:
				f.(*array.Time64Builder).Append(arrow.Time64(rng.Int64N(86400e6)))
			case 11, 12:
				f.(*array.TimestampBuilder).Append(arrow.Timestamp(rng.Int64N(4e15) - 2e15))
			case 13:
				f.(*array.MonthDayNanoIntervalBuilder).Append(arrow.MonthDayNanoInterval{
					Months: rng.Int32N(100) - 50, Days: rng.Int32N(100) - 50, Nanoseconds: rng.Int64N(1e12) - 5e11})
			case 14:
				f.(*extensions.UUIDBuilder).Append(uuid.New())
			case 15:
				f.(*array.ExtensionBuilder).StorageBuilder().(*array.StringBuilder).Append(`{"k": "` + str() + `"}`)
			case 16:
				lb := f.(*array.ListBuilder)
				lb.Append(true)
				vb := lb.ValueBuilder().(*array.Int32Builder)
				for range rng.IntN(4) {
					if rng.IntN(4) == 0 {
						vb.AppendNull()
					} else {
						vb.Append(rng.Int32())
					}
				}
			case 17:
				f.(*array.Uint8Builder).Append(uint8(rng.Uint32()))
			case 18:
				f.(*array.Int8Builder).Append(int8(rng.Uint32()))
			default:
				t.Fatalf("column %d not generated", c)
			}
		}
	}
	return b.NewRecordBatch()
}

func TestRowRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rec := randomAllTypes(t, rng, 500)
	defer rec.Release()
	c, err := NewCodec(rec.Schema(), []int{3})
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]byte
	for i := range int(rec.NumRows()) {
		row, err := c.AppendRow(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	got, err := c.DecodeRows(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !array.RecordEqual(got, rec) {
		for col := range rec.NumCols() {
			if !array.Equal(got.Column(int(col)), rec.Column(int(col))) {
				t.Errorf("column %s: got %v, want %v", rec.ColumnName(int(col)), got.Column(int(col)), rec.Column(int(col)))
			}
		}
		t.Fatal("decoded rows differ")
	}
	// A truncated or extended row is an error, never a wrong row.
	for _, bad := range [][]byte{nil, {2}, rows[0][:len(rows[0])-1], append(slices.Clone(rows[0]), 0)} {
		if err := c.NewRowBuilder(nil).Append(bad); !errors.Is(err, ErrBadRow) {
			t.Errorf("decode %x: %v, want ErrBadRow", bad, err)
		}
	}
}

// TestKeyOrder checks that encoded keys sort like their values, column by
// column, for every key-able type.
func TestKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rec := randomAllTypes(t, rng, 400)
	defer rec.Release()
	for col := range int(rec.NumCols()) {
		f := rec.Schema().Field(col)
		c, err := NewCodec(rec.Schema(), []int{col})
		if f.Type.ID() == arrow.LIST {
			if err == nil {
				t.Errorf("%s: a list column was accepted as a key", f.Name)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		type kv struct {
			key []byte
			row int
		}
		var keys []kv
		for i := range int(rec.NumRows()) {
			k, err := c.AppendKey(nil, rec, i)
			if rec.Column(col).IsNull(i) {
				if !errors.Is(err, ErrNullKey) {
					t.Fatalf("%s: null key: %v", f.Name, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, kv{k, i})
		}
		slices.SortFunc(keys, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
		for i := 1; i < len(keys); i++ {
			a, b := keys[i-1], keys[i]
			order := compareValues(t, rec.Column(col), a.row, b.row)
			if order > 0 || (order == 0) != bytes.Equal(a.key, b.key) {
				t.Fatalf("%s: key %x (%s) sorts before %x (%s), but the values compare %d",
					f.Name, a.key, rec.Column(col).ValueStr(a.row), b.key, rec.Column(col).ValueStr(b.row), order)
			}
		}
	}
}

// compareValues compares rows i and j of a key-able column.
func compareValues(t testing.TB, arr arrow.Array, i, j int) int {
	switch a := arr.(type) {
	case *array.Boolean:
		return cmp.Compare(b2i(a.Value(i)), b2i(a.Value(j)))
	case *array.Int8:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int16:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint8:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Float32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Float64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Decimal128:
		return a.Value(i).Cmp(a.Value(j))
	case *array.String:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Binary:
		return bytes.Compare(a.Value(i), a.Value(j))
	case *array.Date32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Time64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Timestamp:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.MonthDayNanoInterval:
		x, y := a.Value(i), a.Value(j)
		return cmp.Or(cmp.Compare(x.Months, y.Months), cmp.Compare(x.Days, y.Days), cmp.Compare(x.Nanoseconds, y.Nanoseconds))
	case array.ExtensionArray:
		return compareValues(t, a.Storage(), i, j)
	case *array.FixedSizeBinary:
		return bytes.Compare(a.Value(i), a.Value(j))
	}
	t.Fatalf("no comparison for %s", arr.DataType())
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCompositeKeyOrder: a composite key sorts by its first column, then
// the next; a string that is a prefix of another sorts first.
func TestCompositeKeyOrder(t *testing.T) {
	c := testCodec(t)
	rows := []testRow{{id: -5, name: "b"}, {id: -5, name: "b\x00"}, {id: -5, name: "ba"}, {id: 0, name: ""}, {id: 0, name: "\x00"}, {id: 7, name: "a"}, {id: 300, name: ""}}
	keys, _ := encodeRows(t, c, rows...)
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatalf("keys out of order: %x", keys)
	}
	for i := 1; i < len(keys); i++ {
		if bytes.HasPrefix(keys[i], keys[i-1]) {
			t.Fatalf("key %x is a prefix of %x", keys[i-1], keys[i])
		}
	}
}

func TestCodecRejects(t *testing.T) {
	if _, err := NewCodec(testSchema, nil); err == nil {
		t.Error("a codec without key columns")
	}
	if _, err := NewCodec(testSchema, []int{0, 0}); err == nil {
		t.Error("a key column twice")
	}
	reserved := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: ChangeTypeColumn, Type: arrow.BinaryTypes.String}}, nil)
	if _, err := NewCodec(reserved, []int{0}); err == nil {
		t.Errorf("a column named %s", ChangeTypeColumn)
	}
	unsupported := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)}}, nil)
	if _, err := NewCodec(unsupported, []int{0}); err == nil {
		t.Error("a map column")
	}
}

// TestAppendKeyOf: a key built from key values alone equals the key of the
// row, as a point lookup needs.
func TestAppendKeyOf(t *testing.T) {
	c := testCodec(t)
	keys, _ := encodeRows(t, c, testRow{id: 42, name: "x"})
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.Append(42)
	ids := ib.NewArray()
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	sb.Append("x")
	names := sb.NewArray()
	defer ids.Release()
	defer names.Release()
	k, err := c.AppendKeyOf(nil, []arrow.Array{ids, names}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k, keys[0]) {
		t.Fatalf("AppendKeyOf %x, AppendKey %x", k, keys[0])
	}
	if _, err := c.AppendKeyOf(nil, []arrow.Array{names, ids}, 0); err == nil {
		t.Fatal("key columns of the wrong types were accepted")
	}
}
