package sqltypes

import (
	"strconv"
	"strings"
)

// DuckDBType returns the DuckDB type name to CAST a value to so that DuckDB
// produces exactly this type's Arrow layout (after Conform). Note that
// DuckDB's bare DECIMAL means DECIMAL(18,3), so the unconstrained numeric
// is spelled out as DECIMAL(38,10).
func (t Type) DuckDBType() string {
	switch t.kind {
	case Bool:
		return "BOOLEAN"
	case Int2:
		return "SMALLINT"
	case Int4:
		return "INTEGER"
	case Int8:
		return "BIGINT"
	case Float4:
		return "FLOAT"
	case Float8:
		return "DOUBLE"
	case Numeric:
		if t.precision == 0 {
			return "DECIMAL(" + strconv.Itoa(MaxNumericPrecision) + "," + strconv.Itoa(UnconstrainedNumericScale) + ")"
		}
		return "DECIMAL(" + strconv.Itoa(int(t.precision)) + "," + strconv.Itoa(int(t.scale)) + ")"
	case Text, Varchar, Char, Unknown:
		return "VARCHAR"
	case Bytea:
		return "BLOB"
	case Date:
		return "DATE"
	case Time:
		return "TIME"
	case Timestamp:
		return "TIMESTAMP"
	case Timestamptz:
		return "TIMESTAMPTZ"
	case Interval:
		return "INTERVAL"
	case UUID:
		return "UUID"
	case JSON, JSONB:
		return "JSON"
	case Array:
		return t.Elem().DuckDBType() + "[]"
	}
	panic("sqltypes: DuckDBType of invalid type")
}

// FromDuckDB describes a DuckDB result type, given by its name as DuckDB
// prints it (database/sql's DatabaseTypeName, DESCRIBE output, or a
// logical type rendered by sqlfront/engine), as a SQL type. It never fails:
// unknown names become Unknown (described as text).
//
//	BOOLEAN → boolean; TINYINT, UTINYINT, SMALLINT → smallint; USMALLINT,
//	INTEGER → integer; UINTEGER, BIGINT → bigint; UBIGINT, HUGEINT,
//	UHUGEINT, BIGNUM/VARINT → numeric; FLOAT → real; DOUBLE → double
//	precision; DECIMAL(w,s) → numeric(w,s); VARCHAR → text; BLOB → bytea;
//	DATE; TIME → time; TIMESTAMP, TIMESTAMP_S/_MS/_NS → timestamp;
//	TIMESTAMP WITH TIME ZONE (TIMESTAMPTZ) → timestamptz; INTERVAL; UUID;
//	JSON → json; ENUM → text; T[] and T[n] → array of T when T is a scalar
//	with a PostgreSQL array type (JSON[] → json[]), json otherwise; STRUCT, MAP, UNION,
//	VARIANT → json; TIMETZ, BIT, GEOMETRY, "NULL" and others → text.
func FromDuckDB(name string) Type {
	n := strings.ToUpper(strings.TrimSpace(name))
	if strings.HasSuffix(n, "]") {
		open := strings.LastIndexByte(n, '[')
		if open < 0 {
			return Of(Unknown)
		}
		base := strings.TrimSpace(n[:open])
		elem := FromDuckDB(base)
		if elem.kind == Array || (elem.kind == JSON && base != "JSON") || elem.kind == Unknown || elem.kind == Invalid {
			return Of(JSON)
		}
		return ArrayOf(elem)
	}
	base, args := n, ""
	if open := strings.IndexByte(n, '('); open >= 0 && strings.HasSuffix(n, ")") {
		base, args = strings.TrimSpace(n[:open]), n[open+1:len(n)-1]
	}
	switch base {
	case "BOOLEAN", "BOOL", "LOGICAL":
		return Of(Bool)
	case "TINYINT", "INT1", "UTINYINT", "SMALLINT", "INT2", "SHORT":
		return Of(Int2)
	case "USMALLINT", "INTEGER", "INT4", "INT", "SIGNED":
		return Of(Int4)
	case "UINTEGER", "BIGINT", "INT8", "LONG":
		return Of(Int8)
	case "UBIGINT", "HUGEINT", "INT128", "UHUGEINT", "UINT128", "BIGNUM", "VARINT":
		return Of(Numeric)
	case "FLOAT", "FLOAT4", "REAL":
		return Of(Float4)
	case "DOUBLE", "FLOAT8":
		return Of(Float8)
	case "DECIMAL", "NUMERIC":
		if args == "" {
			// DuckDB's own default.
			return Type{kind: Numeric, precision: 18, scale: 3}
		}
		parts := strings.Split(args, ",")
		w, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
		s, err2 := 0, error(nil)
		if len(parts) > 1 {
			s, err2 = strconv.Atoi(strings.TrimSpace(parts[1]))
		}
		if err1 != nil || err2 != nil || len(parts) > 2 || w < 1 || w > MaxNumericPrecision || s < 0 || s > w {
			return Of(Numeric)
		}
		return Type{kind: Numeric, precision: int16(w), scale: int16(s)}
	case "VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "ENUM":
		return Of(Text)
	case "BLOB", "BYTEA", "BINARY", "VARBINARY":
		return Of(Bytea)
	case "DATE":
		return Of(Date)
	case "TIME", "TIME_NS":
		return Of(Time)
	case "TIMESTAMP", "DATETIME", "TIMESTAMP_US", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS":
		return Of(Timestamp)
	case "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIMESTAMP_TZ":
		return Of(Timestamptz)
	case "INTERVAL":
		return Of(Interval)
	case "UUID":
		return Of(UUID)
	case "JSON":
		return Of(JSON)
	case "STRUCT", "MAP", "UNION", "VARIANT":
		return Of(JSON)
	}
	return Of(Unknown)
}
