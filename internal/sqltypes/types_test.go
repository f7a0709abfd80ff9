package sqltypes

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in     string
		name   string
		oid    uint32
		typmod int32
		len    int16
		duck   string
	}{
		{"boolean", "boolean", 16, -1, 1, "BOOLEAN"},
		{"BOOL", "boolean", 16, -1, 1, "BOOLEAN"},
		{"smallint", "smallint", 21, -1, 2, "SMALLINT"},
		{"int2", "smallint", 21, -1, 2, "SMALLINT"},
		{"integer", "integer", 23, -1, 4, "INTEGER"},
		{"int", "integer", 23, -1, 4, "INTEGER"},
		{"pg_catalog.int4", "integer", 23, -1, 4, "INTEGER"},
		{"bigint", "bigint", 20, -1, 8, "BIGINT"},
		{"int8", "bigint", 20, -1, 8, "BIGINT"},
		{"real", "real", 700, -1, 4, "FLOAT"},
		{"float4", "real", 700, -1, 4, "FLOAT"},
		{"float(24)", "real", 700, -1, 4, "FLOAT"},
		{"float(25)", "double precision", 701, -1, 8, "DOUBLE"},
		{"float", "double precision", 701, -1, 8, "DOUBLE"},
		{"double  precision", "double precision", 701, -1, 8, "DOUBLE"},
		{"float8", "double precision", 701, -1, 8, "DOUBLE"},
		{"numeric", "numeric", 1700, -1, -1, "DECIMAL(38,10)"},
		{"numeric(12,2)", "numeric(12,2)", 1700, 12<<16 | 2 + 4, -1, "DECIMAL(12,2)"},
		{"NUMERIC( 12 , 2 )", "numeric(12,2)", 1700, 12<<16 | 2 + 4, -1, "DECIMAL(12,2)"},
		{"decimal(5)", "numeric(5,0)", 1700, 5<<16 + 4, -1, "DECIMAL(5,0)"},
		{"numeric(38,38)", "numeric(38,38)", 1700, 38<<16 | 38 + 4, -1, "DECIMAL(38,38)"},
		{"text", "text", 25, -1, -1, "VARCHAR"},
		{"varchar", "character varying", 1043, -1, -1, "VARCHAR"},
		{"varchar(20)", "character varying(20)", 1043, 24, -1, "VARCHAR"},
		{"character varying(20)", "character varying(20)", 1043, 24, -1, "VARCHAR"},
		{"char varying(3)", "character varying(3)", 1043, 7, -1, "VARCHAR"},
		{"char", "character(1)", 1042, 5, -1, "VARCHAR"},
		{"character", "character(1)", 1042, 5, -1, "VARCHAR"},
		{"char(5)", "character(5)", 1042, 9, -1, "VARCHAR"},
		{"bpchar", "bpchar", 1042, -1, -1, "VARCHAR"},
		{"bytea", "bytea", 17, -1, -1, "BLOB"},
		{"date", "date", 1082, -1, 4, "DATE"},
		{"time", "time without time zone", 1083, -1, 8, "TIME"},
		{"time without time zone", "time without time zone", 1083, -1, 8, "TIME"},
		{"timestamp", "timestamp without time zone", 1114, -1, 8, "TIMESTAMP"},
		{"timestamp without time zone", "timestamp without time zone", 1114, -1, 8, "TIMESTAMP"},
		{"timestamptz", "timestamp with time zone", 1184, -1, 8, "TIMESTAMPTZ"},
		{"TIMESTAMP WITH TIME ZONE", "timestamp with time zone", 1184, -1, 8, "TIMESTAMPTZ"},
		{"interval", "interval", 1186, -1, 16, "INTERVAL"},
		{"uuid", "uuid", 2950, -1, 16, "UUID"},
		{"json", "json", 114, -1, -1, "JSON"},
		{"jsonb", "jsonb", 3802, -1, -1, "JSON"},
		{"text[]", "text[]", 1009, -1, -1, "VARCHAR[]"},
		{"int[]", "integer[]", 1007, -1, -1, "INTEGER[]"},
		{"_int4", "integer[]", 1007, -1, -1, "INTEGER[]"},
		{"integer ARRAY", "integer[]", 1007, -1, -1, "INTEGER[]"},
		{"int ARRAY[4]", "integer[]", 1007, -1, -1, "INTEGER[]"},
		{"int[3][]", "integer[]", 1007, -1, -1, "INTEGER[]"},
		{"smallint[]", "smallint[]", 1005, -1, -1, "SMALLINT[]"},
		{"bigint[]", "bigint[]", 1016, -1, -1, "BIGINT[]"},
		{"real[]", "real[]", 1021, -1, -1, "FLOAT[]"},
		{"float8[]", "double precision[]", 1022, -1, -1, "DOUBLE[]"},
		{"numeric(12,2)[]", "numeric(12,2)[]", 1231, 12<<16 | 2 + 4, -1, "DECIMAL(12,2)[]"},
		{"numeric[]", "numeric[]", 1231, -1, -1, "DECIMAL(38,10)[]"},
		{"varchar(5)[]", "character varying(5)[]", 1015, 9, -1, "VARCHAR[]"},
		{"_varchar", "character varying[]", 1015, -1, -1, "VARCHAR[]"},
		{"char(2)[]", "character(2)[]", 1014, 6, -1, "VARCHAR[]"},
		{"bool[]", "boolean[]", 1000, -1, -1, "BOOLEAN[]"},
		{"bytea[]", "bytea[]", 1001, -1, -1, "BLOB[]"},
		{"date[]", "date[]", 1182, -1, -1, "DATE[]"},
		{"time[]", "time without time zone[]", 1183, -1, -1, "TIME[]"},
		{"timestamp[]", "timestamp without time zone[]", 1115, -1, -1, "TIMESTAMP[]"},
		{"timestamptz[]", "timestamp with time zone[]", 1185, -1, -1, "TIMESTAMPTZ[]"},
		{"interval[]", "interval[]", 1187, -1, -1, "INTERVAL[]"},
		{"uuid[]", "uuid[]", 2951, -1, -1, "UUID[]"},
		{"json[]", "json[]", 199, -1, -1, "JSON[]"},
		{"_jsonb", "jsonb[]", 3807, -1, -1, "JSON[]"},
	} {
		typ, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := typ.Name(); got != tc.name {
			t.Errorf("Parse(%q).Name() = %q, want %q", tc.in, got, tc.name)
		}
		if got := typ.OID(); got != tc.oid {
			t.Errorf("Parse(%q).OID() = %d, want %d", tc.in, got, tc.oid)
		}
		if got := typ.TypMod(); got != tc.typmod {
			t.Errorf("Parse(%q).TypMod() = %d, want %d", tc.in, got, tc.typmod)
		}
		if got := typ.Len(); got != tc.len {
			t.Errorf("Parse(%q).Len() = %d, want %d", tc.in, got, tc.len)
		}
		if got := typ.DuckDBType(); got != tc.duck {
			t.Errorf("Parse(%q).DuckDBType() = %q, want %q", tc.in, got, tc.duck)
		}
		if !typ.Storable() {
			t.Errorf("Parse(%q) is not storable", tc.in)
		}
		// The canonical name parses back to the same type.
		again, err := Parse(typ.Name())
		if err != nil || again != typ {
			t.Errorf("Parse(Parse(%q).Name() = %q) = %v, %v; want %v", tc.in, typ.Name(), again, err, typ)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in, code string
	}{
		{"", "42601"},
		{"numeric(12,2", "42601"},
		{"numeric(a)", "42601"},
		{"integer(5)", "42601"},
		{"text(3)", "42601"},
		{"nosuchtype", "42704"},
		{"pg_catalog.nosuch", "42704"},
		{"varchar(0)", "22023"},
		{"char(0)", "22023"},
		{"varchar(10485761)", "22023"},
		{"numeric(0)", "22023"},
		{"numeric(3,5)", "22023"},
		{"numeric(3,-1)", "22023"},
		{"numeric(1,2,3)", "22023"},
		{"float(0)", "22023"},
		{"float(54)", "22023"},
		{"numeric(39)", "0A000"},
		{"numeric(1000,2)", "0A000"},
		{"timestamp(3)", "0A000"},
		{"timestamp(3) with time zone", "0A000"},
		{"time(0)", "0A000"},
		{"interval(6)", "0A000"},
		{"interval day to second", "0A000"},
		{"int[", "42601"},
		{"int[x]", "42601"},
		{"[]", "42601"},
		{"_nosuch", "42704"},
		{"varchar(0)[]", "22023"},
		{"timetz[]", "0A000"},
		{"serial", "0A000"},
		{"timetz", "0A000"},
		{"time with time zone", "0A000"},
		{"money", "0A000"},
	} {
		typ, err := Parse(tc.in)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, %v; want *Error %s", tc.in, typ, err, tc.code)
			continue
		}
		if e.Code != tc.code {
			t.Errorf("Parse(%q): code %s (%s), want %s", tc.in, e.Code, e.Message, tc.code)
		}
	}
}

func TestLookupModifiers(t *testing.T) {
	// The form pg_query hands over: name words and integer typmods.
	typ, err := Lookup("pg_catalog.varchar", []int32{20})
	if err != nil || typ.Name() != "character varying(20)" || typ.Length() != 20 {
		t.Fatalf("Lookup varchar(20) = %v, %v", typ, err)
	}
	typ, err = Lookup("pg_catalog.bpchar", []int32{1})
	if err != nil || typ.Name() != "character(1)" {
		t.Fatalf("Lookup bpchar(1) = %v, %v", typ, err)
	}
	typ, err = Lookup("numeric", []int32{12, 2})
	if err != nil || typ.Precision() != 12 || typ.Scale() != 2 {
		t.Fatalf("Lookup numeric(12,2) = %v, %v", typ, err)
	}
}

func TestArrowType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want arrow.DataType
	}{
		{"boolean", arrow.FixedWidthTypes.Boolean},
		{"smallint", arrow.PrimitiveTypes.Int16},
		{"integer", arrow.PrimitiveTypes.Int32},
		{"bigint", arrow.PrimitiveTypes.Int64},
		{"real", arrow.PrimitiveTypes.Float32},
		{"double precision", arrow.PrimitiveTypes.Float64},
		{"numeric(12,2)", &arrow.Decimal128Type{Precision: 12, Scale: 2}},
		{"numeric", &arrow.Decimal128Type{Precision: 38, Scale: 10}},
		{"text", arrow.BinaryTypes.String},
		{"varchar(3)", arrow.BinaryTypes.String},
		{"char(3)", arrow.BinaryTypes.String},
		{"bytea", arrow.BinaryTypes.Binary},
		{"date", arrow.FixedWidthTypes.Date32},
		{"time", arrow.FixedWidthTypes.Time64us},
		{"timestamp", &arrow.TimestampType{Unit: arrow.Microsecond}},
		{"timestamptz", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{"interval", arrow.FixedWidthTypes.MonthDayNanoInterval},
		{"uuid", extensions.NewUUIDType()},
		{"json", mustJSONType()},
		{"jsonb", mustJSONType()},
	} {
		typ, err := Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := typ.ArrowType(); !arrow.TypeEqual(got, tc.want) {
			t.Errorf("%s: ArrowType() = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFromArrowField(t *testing.T) {
	// Every storable type survives Schema → FromArrowField exactly, and
	// FromArrow of its Arrow type gives the same OID (the type family).
	for _, in := range []string{"boolean", "smallint", "integer", "bigint", "real", "double precision",
		"numeric", "numeric(12,2)", "text", "varchar", "varchar(9)", "char(4)", "bpchar", "bytea", "date", "time",
		"timestamp", "timestamptz", "interval", "uuid", "json", "jsonb"} {
		typ, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		s := Schema([]Column{{Name: "c", Type: typ, NotNull: true}})
		if s.Field(0).Nullable {
			t.Errorf("%s: NOT NULL column is nullable in the schema", in)
		}
		if got := FromArrowField(s.Field(0)); got != typ {
			t.Errorf("FromArrowField(%s) = %v", in, got)
		}
		got := FromArrow(typ.ArrowType())
		wantOID := typ.OID()
		switch typ.Kind() {
		case Varchar, Char:
			wantOID = OIDText
		case JSONB:
			wantOID = OIDJSON
		}
		if got.OID() != wantOID {
			t.Errorf("FromArrow(%s) = %v (OID %d), want OID %d", typ.ArrowType(), got, got.OID(), wantOID)
		}
	}
	// A field whose metadata disagrees with its type falls back to the type.
	f := arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{MetadataKey}, []string{"text"})}
	if got := FromArrowField(f); got != Of(Int8) {
		t.Errorf("FromArrowField(mismatched metadata) = %v, want bigint", got)
	}
}

func TestFromArrowResultTypes(t *testing.T) {
	for _, tc := range []struct {
		dt   arrow.DataType
		want string
		oid  uint32
	}{
		{arrow.PrimitiveTypes.Int8, "smallint", 21},
		{arrow.PrimitiveTypes.Uint8, "smallint", 21},
		{arrow.PrimitiveTypes.Uint16, "integer", 23},
		{arrow.PrimitiveTypes.Uint32, "bigint", 20},
		{arrow.PrimitiveTypes.Uint64, "numeric", 1700},
		{&arrow.Decimal128Type{Precision: 38, Scale: 0}, "numeric(38,0)", 1700},
		{&arrow.Decimal256Type{Precision: 60, Scale: 2}, "numeric", 1700},
		{arrow.BinaryTypes.LargeString, "text", 25},
		{&arrow.FixedSizeBinaryType{ByteWidth: 16}, "bytea", 17},
		{&arrow.TimestampType{Unit: arrow.Nanosecond}, "timestamp without time zone", 1114},
		{&arrow.TimestampType{Unit: arrow.Second, TimeZone: "Europe/Berlin"}, "timestamp with time zone", 1184},
		{arrow.ListOf(arrow.PrimitiveTypes.Int32), "integer[]", 1007},
		{arrow.ListOf(&arrow.Decimal128Type{Precision: 12, Scale: 2}), "numeric(12,2)[]", 1231},
		{arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32)), "json", 114},
		{arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}), "json", 114},
		{arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), "json", 114},
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String}, "text", 25},
		{arrow.Null, "text", 25},
	} {
		got := FromArrow(tc.dt)
		if got.Name() != tc.want || got.OID() != tc.oid {
			t.Errorf("FromArrow(%s) = %s (OID %d), want %s (OID %d)", tc.dt, got.Name(), got.OID(), tc.want, tc.oid)
		}
	}
	if got := FromArrow(arrow.ListOf(&arrow.Decimal128Type{Precision: 12, Scale: 2})).TypMod(); got != 12<<16|2+4 {
		t.Errorf("numeric(12,2)[] typmod = %d", got)
	}
}

func TestFromDuckDB(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		oid      uint32
		typmod   int32
	}{
		{"BOOLEAN", "boolean", 16, -1},
		{"TINYINT", "smallint", 21, -1},
		{"UTINYINT", "smallint", 21, -1},
		{"SMALLINT", "smallint", 21, -1},
		{"USMALLINT", "integer", 23, -1},
		{"INTEGER", "integer", 23, -1},
		{"UINTEGER", "bigint", 20, -1},
		{"BIGINT", "bigint", 20, -1},
		{"UBIGINT", "numeric", 1700, -1},
		{"HUGEINT", "numeric", 1700, -1},
		{"UHUGEINT", "numeric", 1700, -1},
		{"BIGNUM", "numeric", 1700, -1},
		{"FLOAT", "real", 700, -1},
		{"DOUBLE", "double precision", 701, -1},
		{"DECIMAL(12,2)", "numeric(12,2)", 1700, 12<<16 | 2 + 4},
		{"DECIMAL(38,10)", "numeric(38,10)", 1700, 38<<16 | 10 + 4},
		{"VARCHAR", "text", 25, -1},
		{"BLOB", "bytea", 17, -1},
		{"DATE", "date", 1082, -1},
		{"TIME", "time without time zone", 1083, -1},
		{"TIMESTAMP", "timestamp without time zone", 1114, -1},
		{"TIMESTAMP_NS", "timestamp without time zone", 1114, -1},
		{"TIMESTAMP WITH TIME ZONE", "timestamp with time zone", 1184, -1},
		{"TIMESTAMPTZ", "timestamp with time zone", 1184, -1},
		{"INTERVAL", "interval", 1186, -1},
		{"UUID", "uuid", 2950, -1},
		{"JSON", "json", 114, -1},
		{"INTEGER[]", "integer[]", 1007, -1},
		{"VARCHAR[3]", "text[]", 1009, -1},
		{"DECIMAL(12,2)[]", "numeric(12,2)[]", 1231, 12<<16 | 2 + 4},
		{"INTEGER[][]", "json", 114, -1},
		{`STRUCT("a" INTEGER)`, "json", 114, -1},
		{`STRUCT(a INTEGER)[]`, "json", 114, -1},
		{"MAP(VARCHAR, INTEGER)", "json", 114, -1},
		{"UNION(a INTEGER, b VARCHAR)", "json", 114, -1},
		{"ENUM('a', 'b')", "text", 25, -1},
		{"TIME WITH TIME ZONE", "text", 25, -1},
		{"BIT", "text", 25, -1},
		{`"NULL"`, "text", 25, -1},
		{"SOMETHINGNEW", "text", 25, -1},
	} {
		got := FromDuckDB(tc.in)
		if got.Name() != tc.want || got.OID() != tc.oid || got.TypMod() != tc.typmod {
			t.Errorf("FromDuckDB(%q) = %s (OID %d, typmod %d), want %s (OID %d, typmod %d)",
				tc.in, got.Name(), got.OID(), got.TypMod(), tc.want, tc.oid, tc.typmod)
		}
	}
	// Every storable type's DuckDB spelling maps back to its family.
	for _, in := range []string{"boolean", "smallint", "integer", "bigint", "real", "double precision",
		"numeric(12,2)", "text", "bytea", "date", "time", "timestamp", "timestamptz", "interval", "uuid", "json"} {
		typ, _ := Parse(in)
		if got := FromDuckDB(typ.DuckDBType()); got != typ {
			t.Errorf("FromDuckDB(%s.DuckDBType() = %q) = %v", in, typ.DuckDBType(), got)
		}
	}
}
