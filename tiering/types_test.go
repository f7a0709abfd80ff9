package tiering

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// lakeTypeNames are column types of every kind a table column may have,
// with the modifiers that change the lake type (numeric's precision and
// scale) or the stored values (lengths).
var lakeTypeNames = []string{
	"boolean", "smallint", "integer", "bigint", "real", "double precision",
	"numeric", "numeric(38,0)", "numeric(38,38)", "numeric(12,2)", "numeric(1,0)",
	"text", "varchar(5)", "varchar", "char(3)", "bpchar", "bytea",
	"date", "time", "timestamp", "timestamptz", "interval", "uuid", "json", "jsonb",
}

// lakeArrayTypeNames are array column types, of elements of every kind
// (TestLakeTypesCoverEveryStorableKind): log tables' round trip covers
// them.
var lakeArrayTypeNames = []string{
	"boolean[]", "smallint[]", "integer[]", "bigint[]", "real[]", "double precision[]",
	"numeric[]", "numeric(12,2)[]", "text[]", "varchar(5)[]", "char(3)[]", "bytea[]",
	"date[]", "time[]", "timestamp[]", "timestamptz[]", "interval[]", "uuid[]", "json[]", "jsonb[]",
}

// TestLakeTypesCoverEveryStorableKind: the round-trip tests below cover
// every kind of column type mink accepts; a new kind fails here until it
// is added to lakeTypeNames (and given a lake mapping).
func TestLakeTypesCoverEveryStorableKind(t *testing.T) {
	covered := map[sqltypes.Kind]bool{}
	for _, name := range lakeTypeNames {
		typ, err := sqltypes.Parse(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		covered[typ.Kind()] = true
		if _, _, err := lakeType(typ, func() int { return 100 }); err != nil {
			t.Errorf("%s has no lake type: %v", name, err)
		}
	}
	elems := map[sqltypes.Kind]bool{}
	for _, name := range lakeArrayTypeNames {
		typ, err := sqltypes.Parse(name)
		if err != nil || typ.Kind() != sqltypes.Array {
			t.Fatalf("%s: %v, %v", name, typ, err)
		}
		elems[typ.Elem().Kind()] = true
		if _, _, err := lakeType(typ, func() int { return 100 }); err != nil {
			t.Errorf("%s has no lake type: %v", name, err)
		}
	}
	for k := sqltypes.Invalid + 1; k < sqltypes.Unknown; k++ {
		if k == sqltypes.Array || !sqltypes.Of(k).Storable() {
			continue
		}
		if !covered[k] {
			t.Errorf("column type %s is not in lakeTypeNames", sqltypes.Of(k).Name())
		}
		if !elems[k] {
			t.Errorf("array type %s[] is not in lakeArrayTypeNames", sqltypes.Of(k).Name())
		}
	}
}

// typesSpec is a table with key columns first, then one nullable column
// ("c<i>") and one NOT NULL column ("n<i>") of every type of lakeTypeNames.
func typesSpec(name string, buckets int, key []catalog.Column) catalog.TableSpec {
	spec := catalog.TableSpec{Name: name, Buckets: buckets, Columns: key}
	for _, c := range key {
		spec.PrimaryKey = append(spec.PrimaryKey, c.Name)
	}
	for i, typ := range lakeTypeNames {
		spec.Columns = append(spec.Columns,
			catalog.Column{Name: fmt.Sprintf("c%d", i), Type: typ},
			catalog.Column{Name: fmt.Sprintf("n%d", i), Type: typ, NotNull: true})
	}
	return spec
}

func sqlColumns(t *testing.T, spec catalog.TableSpec) []sqltypes.Column {
	t.Helper()
	cols := make([]sqltypes.Column, len(spec.Columns))
	for i, c := range spec.Columns {
		typ, err := sqltypes.Parse(c.Type)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = sqltypes.Column{Name: c.Name, Type: typ, NotNull: c.NotNull}
	}
	return cols
}

// genColumn returns n values of type typ: the type's edge values first
// (nulls among them when nullable), then random values (about one in six
// NULL when nullable).
func genColumn(rng *rand.Rand, typ sqltypes.Type, n int, nullable bool) arrow.Array {
	if typ.Kind() == sqltypes.Array {
		return genList(rng, typ, n, nullable)
	}
	dt := typ.ArrowType()
	ext, isExt := dt.(arrow.ExtensionType)
	if isExt {
		dt = ext.StorageType()
	}
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	edges := edgeValues(typ)
	if nullable {
		edges = append(edges, nil)
	}
	for i := range n {
		var v any
		switch {
		case i < len(edges):
			v = edges[i]
		case nullable && rng.IntN(6) == 0:
			v = nil
		default:
			v = randomValue(rng, typ)
		}
		appendValue(b, v)
	}
	a := b.NewArray()
	if isExt {
		defer a.Release()
		return array.NewExtensionArrayWithStorage(ext, a)
	}
	return a
}

// genList returns n arrays of type typ: an empty array first, then NULL
// when nullable, then arrays of 0 to 4 elements (about one in six NULL
// when nullable), whose elements are genColumn's (the element type's edge
// values first, NULL elements among them).
func genList(rng *rand.Rand, typ sqltypes.Type, n int, nullable bool) arrow.Array {
	offsets := make([]int32, n+1)
	valid := make([]byte, (n+7)/8)
	nulls := 0
	for i := range n {
		l := int32(rng.IntN(5))
		isNull := nullable && (i == 1 || (i > 1 && rng.IntN(6) == 0))
		switch {
		case i == 0:
			l = 0
		case isNull:
			l = 0
			nulls++
		}
		if !isNull {
			bitutil.SetBit(valid, i)
		}
		offsets[i+1] = offsets[i] + l
	}
	elems := genColumn(rng, typ.Elem(), int(offsets[n]), true)
	defer elems.Release()
	d := array.NewData(typ.ArrowType(), n,
		[]*memory.Buffer{memory.NewBufferBytes(valid), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{elems.Data()}, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// edgeValues are the extreme values of a type: integer limits, float
// infinities, NaN and -0, numeric's largest values at its precision,
// DuckDB's infinite dates and timestamps, 24:00:00, intervals with mixed
// signs and sub-microsecond parts.
func edgeValues(typ sqltypes.Type) []any {
	switch typ.Kind() {
	case sqltypes.Bool:
		return []any{true, false}
	case sqltypes.Int2:
		return []any{int16(math.MinInt16), int16(math.MaxInt16), int16(0), int16(-1)}
	case sqltypes.Int4:
		return []any{int32(math.MinInt32), int32(math.MaxInt32), int32(0), int32(-1)}
	case sqltypes.Int8:
		return []any{int64(math.MinInt64), int64(math.MaxInt64), int64(0), int64(-1)}
	case sqltypes.Float4:
		return []any{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1)),
			float32(math.MaxFloat32), float32(-math.MaxFloat32), float32(math.SmallestNonzeroFloat32)}
	case sqltypes.Float8:
		return []any{math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1),
			math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64}
	case sqltypes.Numeric:
		dt := typ.ArrowType().(*arrow.Decimal128Type)
		maxv := decimal128.GetMaxValue(dt.Precision)
		return []any{maxv, maxv.Negate(), decimal128.FromI64(0), decimal128.FromI64(1), decimal128.FromI64(-1)}
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		out := []any{"", "ü", "日本🦆", `'"\` + "\t\n", "\\N"}
		if n := typ.Length(); n > 0 {
			for i, v := range out {
				out[i] = string([]rune(v.(string))[:min(n, len([]rune(v.(string))))])
			}
		}
		return out
	case sqltypes.JSON, sqltypes.JSONB:
		return []any{`{}`, `[]`, `null`, `{"a": [1, 2.5e10, null, "x"], "b": {"c": "é🦆"}}`, `-0.0`}
	case sqltypes.Bytea:
		return []any{[]byte{}, []byte{0}, []byte{0xff, 0, 0x80}}
	case sqltypes.Date:
		// DuckDB's infinity and -infinity, 0001-01-01, 1970-01-01.
		return []any{arrow.Date32(math.MaxInt32), arrow.Date32(-math.MaxInt32), arrow.Date32(-719162), arrow.Date32(0)}
	case sqltypes.Time:
		return []any{arrow.Time64(0), arrow.Time64(86_400_000_000), arrow.Time64(86_399_999_999)}
	case sqltypes.Timestamp, sqltypes.Timestamptz:
		// DuckDB's infinity and -infinity, 4713 BC, the epoch and just before.
		return []any{arrow.Timestamp(math.MaxInt64), arrow.Timestamp(-math.MaxInt64), arrow.Timestamp(-210_866_803_200_000_000),
			arrow.Timestamp(0), arrow.Timestamp(-1)}
	case sqltypes.Interval:
		return []any{
			arrow.MonthDayNanoInterval{},
			arrow.MonthDayNanoInterval{Months: 1, Days: 2, Nanoseconds: 3_000},
			arrow.MonthDayNanoInterval{Months: -1, Days: -2, Nanoseconds: -3_000},
			arrow.MonthDayNanoInterval{Months: 14, Days: -3, Nanoseconds: 3_723_000_000_000},
			arrow.MonthDayNanoInterval{Months: math.MaxInt32, Days: math.MinInt32, Nanoseconds: math.MaxInt64},
			arrow.MonthDayNanoInterval{Months: math.MinInt32, Days: math.MaxInt32, Nanoseconds: math.MinInt64},
			arrow.MonthDayNanoInterval{Nanoseconds: 1},
		}
	case sqltypes.UUID:
		ff := make([]byte, 16)
		for i := range ff {
			ff[i] = 0xff
		}
		return []any{make([]byte, 16), ff}
	}
	panic(fmt.Sprintf("no edge values for %s", typ.Name()))
}

func randomValue(rng *rand.Rand, typ sqltypes.Type) any {
	switch typ.Kind() {
	case sqltypes.Bool:
		return rng.IntN(2) == 0
	case sqltypes.Int2:
		return int16(rng.Uint32())
	case sqltypes.Int4:
		return int32(rng.Uint32())
	case sqltypes.Int8:
		return int64(rng.Uint64())
	case sqltypes.Float4:
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10)))
	case sqltypes.Float8:
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
	case sqltypes.Numeric:
		dt := typ.ArrowType().(*arrow.Decimal128Type)
		digits := 1 + rng.IntN(int(dt.Precision))
		var s strings.Builder
		for range digits {
			s.WriteByte(byte('0' + rng.IntN(10)))
		}
		v, _ := new(big.Int).SetString(s.String(), 10)
		if rng.IntN(2) == 0 {
			v.Neg(v)
		}
		return decimal128.FromBigInt(v)
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		n := rng.IntN(12)
		if typ.Length() > 0 {
			n = rng.IntN(typ.Length() + 1)
		}
		alphabet := []rune("abcxyz 09'\"\\é日🦆")
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(r)
		if typ.Kind() == sqltypes.Char {
			s = strings.TrimRight(s, " ") // stored unpadded
		}
		return s
	case sqltypes.JSON, sqltypes.JSONB:
		return fmt.Sprintf(`{"k": %d, "s": "v%d"}`, rng.Int64(), rng.IntN(100))
	case sqltypes.Bytea:
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case sqltypes.Date:
		return arrow.Date32(rng.Int32N(2_000_000) - 1_000_000)
	case sqltypes.Time:
		return arrow.Time64(rng.Int64N(86_400_000_001))
	case sqltypes.Timestamp, sqltypes.Timestamptz:
		return arrow.Timestamp(rng.Int64N(8e15) - 4e15)
	case sqltypes.Interval:
		return arrow.MonthDayNanoInterval{Months: rng.Int32N(2001) - 1000, Days: rng.Int32N(20001) - 10000,
			Nanoseconds: (rng.Int64N(2e12) - 1e12) * 1000}
	case sqltypes.UUID:
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	panic(fmt.Sprintf("no random values for %s", typ.Name()))
}

func appendValue(b array.Builder, v any) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Int16Builder:
		b.Append(v.(int16))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.Decimal128Builder:
		b.Append(v.(decimal128.Num))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	case *array.FixedSizeBinaryBuilder:
		b.Append(v.([]byte))
	case *array.Date32Builder:
		b.Append(v.(arrow.Date32))
	case *array.Time64Builder:
		b.Append(v.(arrow.Time64))
	case *array.TimestampBuilder:
		b.Append(v.(arrow.Timestamp))
	case *array.MonthDayNanoIntervalBuilder:
		b.Append(v.(arrow.MonthDayNanoInterval))
	default:
		panic(fmt.Sprintf("appendValue: %T", b))
	}
}

// sameValue reports whether row i of a and row j of b are the same value,
// bit for bit (NaN equals NaN, -0 does not equal 0).
func sameValue(a arrow.Array, i int, b arrow.Array, j int) bool {
	if a.IsNull(i) || b.IsNull(j) {
		return a.IsNull(i) == b.IsNull(j)
	}
	switch a := a.(type) {
	case *array.List:
		b, ok := b.(*array.List)
		if !ok {
			return false
		}
		as, ae := a.ValueOffsets(i)
		bs, be := b.ValueOffsets(j)
		if ae-as != be-bs {
			return false
		}
		for k := range ae - as {
			if !sameValue(storage(a.ListValues()), int(as+k), storage(b.ListValues()), int(bs+k)) {
				return false
			}
		}
		return true
	case *array.Float32:
		b, ok := b.(*array.Float32)
		return ok && math.Float32bits(a.Value(i)) == math.Float32bits(b.Value(j))
	case *array.Float64:
		b, ok := b.(*array.Float64)
		return ok && math.Float64bits(a.Value(i)) == math.Float64bits(b.Value(j))
	}
	return array.SliceEqual(a, int64(i), int64(i+1), b, int64(j), int64(j+1))
}

// rowRef is a row the test wrote: row of rec (whose columns start at
// column shift: 1 for a changelog record), at offset.
type rowRef struct {
	rec    arrow.RecordBatch
	shift  int
	row    int
	offset uint64
}

// appendBatch appends rec to bucket's stream and commits it; it returns
// the offset of its first row.
func (e *env) appendBatch(id catalog.TableID, bucket catalog.BucketID, rec arrow.RecordBatch) uint64 {
	e.t.Helper()
	var end, le uint64
	e.cat.Read(func(v *catalog.View) {
		end = v.Streams[catalog.StreamID(bucket)].End
		le = v.Streams[catalog.StreamID(bucket)].Epoch
	})
	e.src.add(bucket, Batch{Offset: end, Record: rec})
	e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(bucket), Epoch: le,
		Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", bucket, end), Start: end, End: end + uint64(rec.NumRows()), Size: 1}}})
	return end
}

// checkTypedLake reads the current lake snapshot of a table with
// iceberg-go and through a LakeReader and checks that it holds exactly
// the rows of want (by bucket and row key), with every value unchanged
// once converted to the bucket types. key names a row: its __offset for
// a log table, its primary key for a primary-key table. It returns the
// number of rows read through iceberg-go.
func checkTypedLake(t *testing.T, e *env, id catalog.TableID, spec catalog.TableSpec, want map[string]rowRef,
	key func(rec arrow.RecordBatch, i int) string) {
	t.Helper()
	cols := sqlColumns(t, spec)
	minkSchema := sqltypes.Schema(cols)

	compareRecord := func(how string, rec arrow.RecordBatch, seen map[string]bool) {
		t.Helper()
		conv := make([]arrow.Array, len(cols))
		for c, col := range cols {
			idx := rec.Schema().FieldIndices(col.Name)
			if len(idx) != 1 {
				t.Fatalf("%s: no column %q in %s", how, col.Name, rec.Schema())
			}
			a, err := convertArray(rec.Column(idx[0]), col.Type.ArrowType())
			if err != nil {
				t.Fatalf("%s: column %q (%s): %v", how, col.Name, rec.Column(idx[0]).DataType(), err)
			}
			defer a.Release()
			conv[c] = a
		}
		offsets := rec.Column(rec.Schema().FieldIndices(OffsetColumn)[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			k := key(rec, i)
			if seen[k] {
				t.Fatalf("%s: row %s read twice", how, k)
			}
			seen[k] = true
			w, ok := want[k]
			if !ok {
				t.Errorf("%s: the lake has row %s, which the table does not", how, k)
				continue
			}
			if got := uint64(offsets.Value(i)); got != w.offset {
				t.Errorf("%s: row %s has __offset %d, want %d", how, k, got, w.offset)
			}
			for c, col := range cols {
				exp := w.rec.Column(c + w.shift)
				if !sameValue(conv[c], i, exp, w.row) {
					t.Errorf("%s: row %s column %s (%s): got %s, want %s", how, k, col.Name, col.Type.Name(),
						conv[c].ValueStr(i), exp.ValueStr(w.row))
				}
			}
		}
	}

	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The Iceberg schema: an interval is struct<months, days, nanoseconds>.
	for _, c := range cols {
		f, ok := tbl.Schema().FindFieldByName(c.Name)
		if !ok {
			t.Fatalf("Iceberg schema has no field %q: %s", c.Name, tbl.Schema())
		}
		if f.Required != c.NotNull {
			t.Errorf("field %s: required=%v, column NOT NULL=%v", c.Name, f.Required, c.NotNull)
		}
		if c.Type.Kind() == sqltypes.Interval {
			want := fmt.Sprintf("struct<%d: months: required int, %d: days: required int, %d: nanoseconds: required long>", f.ID+1, f.ID+2, f.ID+3)
			if got := f.Type.String(); got != want {
				t.Errorf("field %s (interval) has Iceberg type %s, want %s", c.Name, got, want)
			}
		}
	}
	// mink's own schema (its ids) is the one iceberg-go stored.
	ls, err := newLakeSchema(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ls.createdSchema().Equals(tbl.Schema()) {
		t.Errorf("lake schema %s, mink's %s", tbl.Schema(), ls.createdSchema())
	}
	seen := map[string]bool{}
	_, recs, err := tbl.Scan().ToArrowRecords(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		compareRecord("iceberg-go", rec, seen)
		rec.Release()
	}
	if len(seen) != len(want) {
		t.Errorf("iceberg-go read %d rows, the table has %d", len(seen), len(want))
	}

	// The union read's lake part (LakeReader, conform) in the bucket types.
	fields := append(minkSchema.Fields(),
		arrow.Field{Name: BucketColumn, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: OffsetColumn, Type: arrow.PrimitiveTypes.Int64})
	req := ScanRequest{Table: id, Snapshot: e.tiered(id).LakeSnapshotID, Schema: arrow.NewSchema(fields, nil)}
	seen = map[string]bool{}
	err = NewLakeReader(e.store.Inner(), storeURL, nil).Scan(e.ctx, req, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(req.Schema) {
			t.Fatalf("LakeReader batch schema %s, want %s", rec.Schema(), req.Schema)
		}
		compareRecord("LakeReader", rec, seen)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Errorf("LakeReader read %d rows, the table has %d", len(seen), len(want))
	}
}

func bucketOf(rec arrow.RecordBatch, i int) catalog.BucketID {
	return catalog.BucketID(rec.Column(rec.Schema().FieldIndices(BucketColumn)[0]).(*array.Int64).Value(i))
}

// TestLakeTypesRoundTripLog: a log table with a nullable and a NOT NULL
// column of every type, filled with each type's edge values, NULLs and
// seeded random values over two rounds, reads back unchanged through
// iceberg-go and through the LakeReader, also after compaction.
func TestLakeTypesRoundTripLog(t *testing.T) {
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s))
	e := newEnv(t)
	spec := typesSpec("types", 2, []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}})
	spec.PrimaryKey = nil
	for i, typ := range lakeArrayTypeNames {
		spec.Columns = append(spec.Columns,
			catalog.Column{Name: fmt.Sprintf("a%d", i), Type: typ},
			catalog.Column{Name: fmt.Sprintf("an%d", i), Type: typ, NotNull: true})
	}
	id := e.createTable(spec)
	cols := sqlColumns(t, spec)
	schema := sqltypes.Schema(cols)
	want := map[string]rowRef{}
	logKey := func(b catalog.BucketID, off uint64) string { return fmt.Sprintf("b%d@%d", b, off) }
	tr := e.tierer()
	next := int64(0)
	for round := range 2 {
		for _, b := range sortedKeys(e.ends(id)) {
			n := 40 + rng.IntN(200)
			arrs := make([]arrow.Array, len(cols))
			for c, col := range cols {
				if c == 0 {
					ib := array.NewInt64Builder(memory.DefaultAllocator)
					for range n {
						ib.Append(next)
						next++
					}
					arrs[c] = ib.NewArray()
					ib.Release()
					continue
				}
				arrs[c] = genColumn(rng, col.Type, n, !col.NotNull)
			}
			rec := array.NewRecordBatch(schema, arrs, int64(n))
			for _, a := range arrs {
				a.Release()
			}
			start := e.appendBatch(id, b, rec)
			for i := range n {
				want[logKey(b, start+uint64(i))] = rowRef{rec: rec, row: i, offset: start + uint64(i)}
			}
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkTypedLake(t, e, id, spec, want, func(rec arrow.RecordBatch, i int) string {
			return logKey(bucketOf(rec, i), uint64(rec.Column(rec.Schema().FieldIndices(OffsetColumn)[0]).(*array.Int64).Value(i)))
		})
	}
	// Compaction rewrites each bucket's two files as one, values unchanged.
	res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 1})
	if err != nil || !res.Committed {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	checkTypedLake(t, e, id, spec, want, func(rec arrow.RecordBatch, i int) string {
		return logKey(bucketOf(rec, i), uint64(rec.Column(rec.Schema().FieldIndices(OffsetColumn)[0]).(*array.Int64).Value(i)))
	})
	for b, files := range e.readLakeFiles(id) {
		if len(files) != 1 {
			t.Errorf("bucket %d has %d files after compaction, want 1", b, len(files))
		}
	}
}

// TestLakeTypesRoundTripPK: a primary-key table keyed by (bigint,
// interval), with every type and an array of every type as non-key
// columns, over rounds of inserts,
// updates (-U/+U and bare +U) and deletes: the lake holds exactly the
// table's rows, unchanged, each bucket's files sorted by key.
func TestLakeTypesRoundTripPK(t *testing.T) {
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s))
	e := newEnv(t)
	spec := typesSpec("pktypes", 2, []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true},
		{Name: "iv", Type: "interval", NotNull: true},
	})
	for i, typ := range lakeArrayTypeNames {
		spec.Columns = append(spec.Columns,
			catalog.Column{Name: fmt.Sprintf("a%d", i), Type: typ},
			catalog.Column{Name: fmt.Sprintf("an%d", i), Type: typ, NotNull: true})
	}
	id := e.createTable(spec)
	cols := sqlColumns(t, spec)
	fields := append([]arrow.Field{{Name: "_change_type", Type: arrow.BinaryTypes.String}}, sqltypes.Schema(cols).Fields()...)
	clSchema := arrow.NewSchema(fields, nil)

	type pkKey struct {
		id int64
		iv arrow.MonthDayNanoInterval
	}
	keyString := func(b catalog.BucketID, k pkKey) string {
		return fmt.Sprintf("b%d/%d/%d/%d/%d", b, k.id, k.iv.Months, k.iv.Days, k.iv.Nanoseconds)
	}
	ivEdges := edgeValues(sqltypes.Of(sqltypes.Interval))
	model := map[string]rowRef{}
	live := map[catalog.BucketID][]pkKey{}
	tr := e.tierer()
	next := int64(0)
	for round := range 4 {
		for _, b := range sortedKeys(e.ends(id)) {
			n := 30 + rng.IntN(120)
			var types []string
			var keys []pkKey
			for len(types) < n {
				op := rng.IntN(10)
				if len(live[b]) == 0 || op < 5 || round == 0 {
					k := pkKey{id: next % 7, iv: randomValue(rng, sqltypes.Of(sqltypes.Interval)).(arrow.MonthDayNanoInterval)}
					if int(next) < len(ivEdges) {
						k.iv = ivEdges[next].(arrow.MonthDayNanoInterval)
					}
					next++
					live[b] = append(live[b], k)
					types, keys = append(types, "+I"), append(keys, k)
					continue
				}
				i := rng.IntN(len(live[b]))
				k := live[b][i]
				switch {
				case op < 7 && len(types)+2 <= n:
					types, keys = append(types, "-U", "+U"), append(keys, k, k)
				case op < 8:
					types, keys = append(types, "+U"), append(keys, k)
				default:
					types, keys = append(types, "-D"), append(keys, k)
					live[b] = append(live[b][:i], live[b][i+1:]...)
				}
			}
			arrs := make([]arrow.Array, len(clSchema.Fields()))
			sb := array.NewStringBuilder(memory.DefaultAllocator)
			sb.AppendValues(types, nil)
			arrs[0] = sb.NewArray()
			sb.Release()
			ib := array.NewInt64Builder(memory.DefaultAllocator)
			vb := array.NewMonthDayNanoIntervalBuilder(memory.DefaultAllocator)
			for _, k := range keys {
				ib.Append(k.id)
				vb.Append(k.iv)
			}
			arrs[1], arrs[2] = ib.NewArray(), vb.NewArray()
			ib.Release()
			vb.Release()
			for c := 2; c < len(cols); c++ {
				arrs[c+1] = genColumn(rng, cols[c].Type, n, !cols[c].NotNull)
			}
			rec := array.NewRecordBatch(clSchema, arrs, int64(n))
			for _, a := range arrs {
				a.Release()
			}
			start := e.appendBatch(id, b, rec)
			for i, ct := range types {
				ks := keyString(b, keys[i])
				switch ct {
				case "+I", "+U":
					model[ks] = rowRef{rec: rec, shift: 1, row: i, offset: start + uint64(i)}
				case "-D":
					delete(model, ks)
				}
			}
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		keyOf := func(rec arrow.RecordBatch, i int) pkKey {
			ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
			iv, err := convertArray(rec.Column(rec.Schema().FieldIndices("iv")[0]), arrow.FixedWidthTypes.MonthDayNanoInterval)
			if err != nil {
				t.Fatal(err)
			}
			defer iv.Release()
			return pkKey{ids.Value(i), iv.(*array.MonthDayNanoInterval).Value(i)}
		}
		checkTypedLake(t, e, id, spec, model, func(rec arrow.RecordBatch, i int) string {
			return keyString(bucketOf(rec, i), keyOf(rec, i))
		})
		// Each file (a batch of iceberg-go's scan holds rows of one file)
		// is sorted by (id, months, days, nanoseconds).
		tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := tbl.Scan().ToArrowRecords(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < int(rec.NumRows()); i++ {
				x, y := keyOf(rec, i-1), keyOf(rec, i)
				if c := cmp.Or(cmp.Compare(x.id, y.id), cmp.Compare(x.iv.Months, y.iv.Months),
					cmp.Compare(x.iv.Days, y.iv.Days), cmp.Compare(x.iv.Nanoseconds, y.iv.Nanoseconds)); c >= 0 {
					t.Errorf("round %d: lake rows out of key order: %+v then %+v", round, x, y)
				}
			}
			rec.Release()
		}
	}
}

// TestLakeIntervalPartitionColumn: a table partitioned by an interval
// column (which has no Iceberg identity partition) tiers into an
// unpartitioned lake whose rows read back unchanged.
func TestLakeIntervalPartitionColumn(t *testing.T) {
	e := newEnv(t)
	spec := catalog.TableSpec{Name: "ivpart", Buckets: 1, PartitionBy: "iv", Columns: []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true},
		{Name: "iv", Type: "interval", NotNull: true},
	}}
	id := e.createTable(spec)
	values := map[string]arrow.MonthDayNanoInterval{
		"1 mon":               {Months: 1},
		"-1 days +02:00:00.5": {Days: -1, Nanoseconds: 7_200_500_000_000},
	}
	want := map[string]rowRef{}
	schema := sqltypes.Schema(sqlColumns(t, spec))
	next := int64(0)
	for _, value := range []string{"1 mon", "-1 days +02:00:00.5"} {
		for _, b := range e.createPartition(id, value) {
			ib := array.NewInt64Builder(memory.DefaultAllocator)
			vb := array.NewMonthDayNanoIntervalBuilder(memory.DefaultAllocator)
			for range 5 {
				ib.Append(next)
				next++
				vb.Append(values[value])
			}
			ids, ivs := ib.NewArray(), vb.NewArray()
			ib.Release()
			vb.Release()
			rec := array.NewRecordBatch(schema, []arrow.Array{ids, ivs}, 5)
			ids.Release()
			ivs.Release()
			start := e.appendBatch(id, b, rec)
			for i := range 5 {
				want[fmt.Sprintf("b%d@%d", b, start+uint64(i))] = rowRef{rec: rec, row: i, offset: start + uint64(i)}
			}
		}
	}
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !tbl.Spec().IsUnpartitioned() {
		t.Errorf("lake of a table partitioned by an interval has partition spec %s", tbl.Spec())
	}
	checkTypedLake(t, e, id, spec, want, func(rec arrow.RecordBatch, i int) string {
		return fmt.Sprintf("b%d@%d", bucketOf(rec, i), rec.Column(rec.Schema().FieldIndices(OffsetColumn)[0]).(*array.Int64).Value(i))
	})
}

// TestLakeIntervalFilterNotPushed: a scan filter on an interval column
// (a struct in the lake, to which Iceberg binds no predicate) is not used
// for pruning, and the scan returns every row.
func TestLakeIntervalFilterNotPushed(t *testing.T) {
	e := newEnv(t)
	spec := catalog.TableSpec{Name: "ivf", Buckets: 1, Columns: []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true}, {Name: "iv", Type: "interval"}}}
	id := e.createTable(spec)
	schema := sqltypes.Schema(sqlColumns(t, spec))
	ids := array.NewInt64Builder(memory.DefaultAllocator)
	ids.AppendValues([]int64{1, 2}, nil)
	ivs := array.NewMonthDayNanoIntervalBuilder(memory.DefaultAllocator)
	ivs.AppendNull()
	ivs.Append(arrow.MonthDayNanoInterval{Months: 1})
	cols := []arrow.Array{ids.NewArray(), ivs.NewArray()}
	ids.Release()
	ivs.Release()
	e.appendBatch(id, sortedKeys(e.ends(id))[0], array.NewRecordBatch(schema, cols, 2))
	cols[0].Release()
	cols[1].Release()
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	for _, op := range []PredOp{PredIsNull, PredNotNull, PredEq} {
		p := Predicate{Column: "iv", Op: op}
		if op == PredEq {
			p.Values = []any{arrow.MonthDayNanoInterval{Months: 1}}
		}
		var rows int64
		err := NewLakeReader(e.store.Inner(), storeURL, nil).Scan(e.ctx,
			ScanRequest{Table: id, Snapshot: e.tiered(id).LakeSnapshotID, Schema: schema, Filter: []Predicate{p}},
			func(rec arrow.RecordBatch) error { rows += rec.NumRows(); return nil })
		if err != nil || rows != 2 {
			t.Errorf("scan with filter %s: %d rows, %v; want both rows", p, rows, err)
		}
	}
}
