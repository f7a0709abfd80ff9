package routing_test

// Test vectors for the Rust client (clients/rust): the routing encoding and
// buckets of every key type, partition values, the Arrow schema of every SQL
// type, and primary-key and row encodings (kv/kvcodec), generated here from
// the Go code so that both sides are checked byte for byte. The files are
// checked in; `go test ./buckets/routing -run TestRustVectors -rewrite`
// writes them again, and without -rewrite the test fails when the Go code
// no longer produces them.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the Rust client's test vectors in clients/rust/testdata")

const rustTestdata = "../../clients/rust/testdata"

func TestRustVectors(t *testing.T) {
	check := func(name string, v any) {
		t.Helper()
		got, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join(rustTestdata, name)
		if *rewrite {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s is out of date: the Go encoding changed, or run with -rewrite", path)
		}
	}
	check("routing.json", routingVectors(t))
	check("schemas.json", schemaVectors(t))
	check("kv.json", kvVectors(t))
}

func ipcBase64(t *testing.T, rec arrow.RecordBatch) string {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// keyBatch has one column per key type, with nulls and edge values.
func keyBatch(t *testing.T) arrow.RecordBatch {
	t.Helper()
	const n = 6
	mem := memory.DefaultAllocator
	fields := []arrow.Field{
		{Name: "bool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "int8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "int16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "int32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "int64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "uint8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "uint16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "uint32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "float32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "float64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bytea", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "fixed", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Nullable: true},
		{Name: "date", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "time_us", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "time_ns", Type: arrow.FixedWidthTypes.Time64ns, Nullable: true},
		{Name: "ts_s", Type: &arrow.TimestampType{Unit: arrow.Second}, Nullable: true},
		{Name: "ts_ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
		{Name: "ts_us", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "tstz_us", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "numeric", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	null := func(i int) bool { return i == n-1 }
	for i := 0; i < n; i++ {
		if null(i) {
			for _, f := range b.Fields() {
				f.AppendNull()
			}
			continue
		}
		s := []int64{0, 1, -1, 42, math.MaxInt32 + 5}[i]
		b.Field(0).(*array.BooleanBuilder).Append(i%2 == 1)
		b.Field(1).(*array.Int8Builder).Append(int8(s))
		b.Field(2).(*array.Int16Builder).Append(int16(s))
		b.Field(3).(*array.Int32Builder).Append(int32(s))
		b.Field(4).(*array.Int64Builder).Append(s * 1000003)
		b.Field(5).(*array.Uint8Builder).Append(uint8(s))
		b.Field(6).(*array.Uint16Builder).Append(uint16(s))
		b.Field(7).(*array.Uint32Builder).Append(uint32(s))
		b.Field(8).(*array.Float32Builder).Append([]float32{float32(math.Copysign(0, -1)), 1.5, -2.25, float32(math.NaN()), float32(math.Inf(1))}[i])
		b.Field(9).(*array.Float64Builder).Append([]float64{math.Copysign(0, -1), 1.5, -2.25, math.NaN(), 1e300}[i])
		b.Field(10).(*array.StringBuilder).Append([]string{"", "a", "zoë", "with\x00nul", string(make([]byte, 200))}[i])
		b.Field(11).(*array.BinaryBuilder).Append([]byte{byte(i), 0, 0xff})
		fixed := make([]byte, 16)
		fixed[0], fixed[15] = byte(i), 0xAB
		b.Field(12).(*array.FixedSizeBinaryBuilder).Append(fixed)
		b.Field(13).(*array.Date32Builder).Append(arrow.Date32([]int32{0, 19000, -1, 20089, -719162}[i]))
		b.Field(14).(*array.Time64Builder).Append(arrow.Time64(s * 1_000_001))
		b.Field(15).(*array.Time64Builder).Append(arrow.Time64(s*1_000_001_999 + 7))
		ts := []int64{0, 1_700_000_000, -1, 1_714_521_600, 253402300799}[i]
		b.Field(16).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
		b.Field(17).(*array.TimestampBuilder).Append(arrow.Timestamp(ts*1000 + 123))
		b.Field(18).(*array.TimestampBuilder).Append(arrow.Timestamp(ts*1_000_000 + 120_000))
		b.Field(19).(*array.TimestampBuilder).Append(arrow.Timestamp(ts*1_000_000_000 + 999_999_999))
		b.Field(20).(*array.TimestampBuilder).Append(arrow.Timestamp(ts * 1_000_000))
		b.Field(21).(*array.Decimal128Builder).Append(decimal128.FromI64(s * 12345))
	}
	return b.NewRecordBatch()
}

type routingColumnKeys struct {
	Column   string   `json:"column"`
	Keys     []string `json:"keys"`
	Buckets7 []int    `json:"buckets_7"`
}

type routingComposite struct {
	Columns []string `json:"columns"`
	Buckets int      `json:"buckets"`
	Of      []int    `json:"of"`
}

type routingPartitions struct {
	Column string   `json:"column"`
	Values []string `json:"values"`
}

func routingVectors(t *testing.T) any {
	rec := keyBatch(t)
	defer rec.Release()
	var keys []routingColumnKeys
	for c := 0; c < int(rec.NumCols()); c++ {
		ck := routingColumnKeys{Column: rec.ColumnName(c)}
		for i := 0; i < int(rec.NumRows()); i++ {
			k, err := routing.AppendArrowValue(nil, rec.Column(c), i)
			if err != nil {
				t.Fatal(err)
			}
			ck.Keys = append(ck.Keys, hex.EncodeToString(k))
		}
		var err error
		if ck.Buckets7, err = routing.Buckets(rec, []int{c}, 7); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, ck)
	}
	var composite []routingComposite
	for _, cols := range [][]string{{"int64", "text"}, {"text", "date", "numeric"}, {"ts_us", "bool", "float64"}} {
		idx := make([]int, len(cols))
		for i, name := range cols {
			idx[i] = rec.Schema().FieldIndices(name)[0]
		}
		for _, n := range []int{1, 3, 16} {
			of, err := routing.Buckets(rec, idx, n)
			if err != nil {
				t.Fatal(err)
			}
			composite = append(composite, routingComposite{Columns: cols, Buckets: n, Of: of})
		}
	}
	var parts []routingPartitions
	for _, name := range []string{"text", "int16", "int32", "int64", "bool", "date", "ts_s", "ts_ms", "ts_us", "ts_ns", "tstz_us"} {
		c := rec.Schema().FieldIndices(name)[0]
		p := routingPartitions{Column: name}
		for i := 0; i < int(rec.NumRows()); i++ {
			v, err := routing.PartitionValue(rec.Column(c), i)
			if err != nil {
				t.Fatal(err)
			}
			p.Values = append(p.Values, v)
		}
		parts = append(parts, p)
	}
	return map[string]any{"batch": ipcBase64(t, rec), "keys": keys, "composite": composite, "partitions": parts}
}

// sqlTypeNames are every column type mink has (docs/sql-types.md), with
// some of the other spellings it accepts.
var sqlTypeNames = []string{
	"boolean", "bool", "smallint", "int2", "integer", "int", "int4", "bigint", "int8",
	"real", "float4", "double precision", "float8", "float", "numeric(12,2)", "numeric(38,0)", "numeric(5)", "numeric", "decimal(10,3)",
	"text", "character varying(20)", "varchar(5)", "character varying", "character(3)", "char(2)", "char", "bpchar",
	"bytea", "date", "time without time zone", "time", "timestamp without time zone", "timestamp",
	"timestamp with time zone", "timestamptz", "interval", "uuid", "json", "jsonb",
	"text[]", "integer[]", "bigint[]", "numeric(12,2)[]", "boolean[]", "uuid[]", "jsonb[]", "timestamptz[]", "_int4", "varchar(4)[]", "interval[]", "date[]", "bytea[]", "double precision[]",
}

type schemaVector struct {
	SQLType string `json:"sql_type"`
	// Name is the canonical spelling (describe-table's type).
	Name string `json:"name"`
	// Schema is the IPC schema message (flight.SerializeSchema) of one
	// nullable field "c" of the type, as GetSchema sends it.
	Schema string `json:"schema"`
}

func schemaVectors(t *testing.T) any {
	var out []schemaVector
	for _, name := range sqlTypeNames {
		typ, err := sqltypes.Parse(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := sqltypes.Schema([]sqltypes.Column{{Name: "c", Type: typ}})
		out = append(out, schemaVector{SQLType: name, Name: typ.Name(), Schema: base64.StdEncoding.EncodeToString(flight.SerializeSchema(s, memory.DefaultAllocator))})
	}
	return out
}

type kvVector struct {
	// Columns of the table, in order, with their SQL types.
	Columns []kvColumn `json:"columns"`
	// PrimaryKey are the key columns' indices.
	PrimaryKey []int `json:"primary_key"`
	// Batch is an IPC stream of rows of the table.
	Batch string `json:"batch"`
	// Keys and Rows are each row's encoded key and row (hex).
	Keys []string `json:"keys"`
	Rows []string `json:"rows"`
}

type kvColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func kvVectors(t *testing.T) any {
	tables := []struct {
		cols []string // name:type
		pk   []int
	}{
		{[]string{"id:bigint", "name:text", "score:double precision", "ok:boolean"}, []int{0}},
		{[]string{"a:integer", "b:text", "c:smallint", "d:numeric(12,2)", "e:date", "f:timestamptz", "g:bytea", "h:uuid", "i:real", "j:interval", "k:time", "l:timestamp", "m:jsonb", "n:varchar(10)"}, []int{1, 0, 2}},
		{[]string{"k:uuid", "d:date", "v:integer[]", "w:text[]", "x:numeric"}, []int{0, 1}},
		{[]string{"t:timestamp", "n:numeric(20,4)", "f:double precision", "s:text"}, []int{0, 1, 2, 3}},
	}
	var out []kvVector
	for ti, tb := range tables {
		cols := make([]sqltypes.Column, len(tb.cols))
		var vcols []kvColumn
		for i, spec := range tb.cols {
			name, typName, _ := cut(spec)
			typ, err := sqltypes.Parse(typName)
			if err != nil {
				t.Fatal(err)
			}
			cols[i] = sqltypes.Column{Name: name, Type: typ}
			vcols = append(vcols, kvColumn{Name: name, Type: typ.Name()})
		}
		codec, err := kvcodec.NewTableCodec(cols, len(cols), tb.pk)
		if err != nil {
			t.Fatal(err)
		}
		rec := kvBatch(t, codec.Schema(), tb.pk, ti)
		v := kvVector{Columns: vcols, PrimaryKey: tb.pk, Batch: ipcBase64(t, rec)}
		for i := 0; i < int(rec.NumRows()); i++ {
			k, err := codec.AppendKey(nil, rec, i)
			if err != nil {
				t.Fatal(err)
			}
			r, err := codec.AppendRow(nil, rec, i)
			if err != nil {
				t.Fatal(err)
			}
			v.Keys = append(v.Keys, hex.EncodeToString(k))
			v.Rows = append(v.Rows, hex.EncodeToString(r))
		}
		rec.Release()
		out = append(out, v)
	}
	return out
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// kvBatch fills five rows of schema with values derived from the row
// number; key columns are never null, other columns are null in row 4.
func kvBatch(t *testing.T, schema *arrow.Schema, pk []int, seed int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	isKey := map[int]bool{}
	for _, k := range pk {
		isKey[k] = true
	}
	for row := 0; row < 5; row++ {
		for c, fb := range b.Fields() {
			if row == 4 && !isKey[c] {
				fb.AppendNull()
				continue
			}
			fillValue(t, fb, row*7+seed+c)
		}
	}
	return b.NewRecordBatch()
}

func fillValue(t *testing.T, fb array.Builder, v int) {
	s := int64(v) - 10
	switch b := fb.(type) {
	case *array.BooleanBuilder:
		b.Append(v%2 == 0)
	case *array.Int16Builder:
		b.Append(int16(s))
	case *array.Int32Builder:
		b.Append(int32(s * 1001))
	case *array.Int64Builder:
		b.Append(s * 1_000_000_007)
	case *array.Float32Builder:
		b.Append(float32(s) / 4)
	case *array.Float64Builder:
		b.Append([]float64{float64(s) / 3, math.Copysign(0, -1), math.Inf(-1)}[v%3])
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(s * 98765))
	case *array.StringBuilder:
		b.Append([]string{"", "x", "with\x00nul", "zoë", "{\"a\": 1}"}[v%5])
	case *array.BinaryBuilder:
		b.Append([]byte{byte(v), 0, 1})
	case *array.Date32Builder:
		b.Append(arrow.Date32(s * 300))
	case *array.Time64Builder:
		b.Append(arrow.Time64((s + 20) * 3_600_000_001 % 86_400_000_000))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(s * 86_400_000_123))
	case *array.MonthDayNanoIntervalBuilder:
		b.Append(arrow.MonthDayNanoInterval{Months: int32(s), Days: int32(-s), Nanoseconds: s * 1000})
	case *array.FixedSizeBinaryBuilder:
		u := make([]byte, 16)
		u[0], u[15] = byte(v), byte(255-v)
		b.Append(u)
	case *array.ListBuilder:
		b.Append(true)
		for j := 0; j < v%4; j++ {
			if j == 1 {
				b.ValueBuilder().AppendNull()
				continue
			}
			fillValue(t, b.ValueBuilder(), v+j)
		}
	default:
		if eb, ok := fb.(interface{ StorageBuilder() array.Builder }); ok {
			fillValue(t, eb.StorageBuilder(), v)
			return
		}
		t.Fatalf("kv vectors: no values for a %T", fb)
	}
}
