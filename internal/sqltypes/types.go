package sqltypes

import (
	"fmt"
	"strconv"
)

// Kind is a type without its modifiers.
type Kind uint8

// The kinds. Every kind up to JSONB, and Array of those, can be a table
// column's type; Unknown only describes query results.
const (
	Invalid Kind = iota
	Bool
	Int2
	Int4
	Int8
	Float4
	Float8
	Numeric
	Text
	Varchar
	Char // bpchar
	Bytea
	Date
	Time
	Timestamp
	Timestamptz
	Interval
	UUID
	JSON
	JSONB
	// Array is a one-dimensional array of a scalar kind (an Arrow list, a
	// DuckDB LIST).
	Array
	// Unknown is a result column whose type has no PostgreSQL counterpart
	// that mink maps; it is described as text.
	Unknown
)

// Limits of the modifiers mink accepts for stored columns.
const (
	// MaxNumericPrecision is the largest numeric precision: DuckDB's
	// DECIMAL and Arrow's Decimal128 hold at most 38 digits.
	MaxNumericPrecision = 38
	// UnconstrainedNumericScale is the scale of a numeric column declared
	// without precision, stored as DECIMAL(38, UnconstrainedNumericScale).
	UnconstrainedNumericScale = 10
	// MaxCharLength is PostgreSQL's limit for varchar(n) and char(n).
	MaxCharLength = 10485760
)

// Type is a SQL type with its modifiers. The zero Type is invalid. Types are
// comparable with ==; two Types are equal when they are the same SQL type.
type Type struct {
	kind Kind
	elem Kind // element kind of an Array
	// precision and scale of a numeric; precision 0 means unconstrained.
	// Arrays of numeric keep the element's.
	precision, scale int16
	// length of a varchar(n) or char(n); 0 means unconstrained.
	length int32
}

// Of returns the type of a kind that takes no modifiers (or, for Numeric,
// Varchar and Char, the unconstrained type). It panics on Array, which
// needs ArrayOf.
func Of(k Kind) Type {
	if k == Array || k == Invalid || k > Unknown {
		panic(fmt.Sprintf("sqltypes.Of(%d): kind needs more than a kind", k))
	}
	return Type{kind: k}
}

// NumericOf returns numeric(precision, scale) after checking the modifiers
// against PostgreSQL's rules and mink's 38-digit limit.
func NumericOf(precision, scale int) (Type, error) {
	if precision < 1 || precision > 1000 {
		return Type{}, errorf(codeInvalidParameterValue, "NUMERIC precision %d must be between 1 and 1000", precision)
	}
	if scale < 0 || scale > precision {
		return Type{}, errorf(codeInvalidParameterValue, "NUMERIC scale %d must be between 0 and precision %d", scale, precision)
	}
	if precision > MaxNumericPrecision {
		return Type{}, errorf(codeFeatureNotSupported, "NUMERIC precision %d is larger than mink's limit of %d", precision, MaxNumericPrecision)
	}
	return Type{kind: Numeric, precision: int16(precision), scale: int16(scale)}, nil
}

// VarcharOf returns character varying(n).
func VarcharOf(n int) (Type, error) {
	if err := checkLength("varchar", n); err != nil {
		return Type{}, err
	}
	return Type{kind: Varchar, length: int32(n)}, nil
}

// CharOf returns character(n).
func CharOf(n int) (Type, error) {
	if err := checkLength("char", n); err != nil {
		return Type{}, err
	}
	return Type{kind: Char, length: int32(n)}, nil
}

func checkLength(name string, n int) error {
	if n < 1 {
		return errorf(codeInvalidParameterValue, "length for type %s must be at least 1", name)
	}
	if n > MaxCharLength {
		return errorf(codeInvalidParameterValue, "length for type %s cannot exceed %d", name, MaxCharLength)
	}
	return nil
}

// ArrayOf returns a one-dimensional array of elem, which must be a scalar
// type. An array of a storable type is storable.
func ArrayOf(elem Type) Type {
	if elem.kind == Array || elem.kind == Unknown || elem.kind == Invalid {
		panic(fmt.Sprintf("sqltypes.ArrayOf(%v): element must be a scalar type", elem))
	}
	return Type{kind: Array, elem: elem.kind, precision: elem.precision, scale: elem.scale, length: elem.length}
}

// Kind returns the type's kind.
func (t Type) Kind() Kind { return t.kind }

// Valid reports whether t is a type (not the zero Type).
func (t Type) Valid() bool { return t.kind != Invalid }

// Storable reports whether a table column may have this type.
func (t Type) Storable() bool {
	return (t.kind > Invalid && t.kind < Array) || (t.kind == Array && t.elem > Invalid && t.elem < Array)
}

// Elem returns the element type of an array; it panics on other kinds.
func (t Type) Elem() Type {
	if t.kind != Array {
		panic(fmt.Sprintf("sqltypes: Elem of non-array type %v", t))
	}
	return Type{kind: t.elem, precision: t.precision, scale: t.scale, length: t.length}
}

// Precision returns a numeric's precision, 0 when unconstrained.
func (t Type) Precision() int { return int(t.precision) }

// Scale returns a numeric's declared scale. An unconstrained numeric
// reports 0 here; its storage scale is UnconstrainedNumericScale.
func (t Type) Scale() int { return int(t.scale) }

// Length returns the n of varchar(n) and char(n), 0 when unconstrained.
func (t Type) Length() int { return int(t.length) }

// String returns Name.
func (t Type) String() string { return t.Name() }

// Name returns the canonical SQL spelling, as PostgreSQL's format_type (and
// so psql's \d) prints it: "integer", "character varying(20)",
// "numeric(12,2)", "timestamp with time zone", "integer[]".
func (t Type) Name() string {
	switch t.kind {
	case Bool:
		return "boolean"
	case Int2:
		return "smallint"
	case Int4:
		return "integer"
	case Int8:
		return "bigint"
	case Float4:
		return "real"
	case Float8:
		return "double precision"
	case Numeric:
		if t.precision == 0 {
			return "numeric"
		}
		return "numeric(" + strconv.Itoa(int(t.precision)) + "," + strconv.Itoa(int(t.scale)) + ")"
	case Text:
		return "text"
	case Varchar:
		if t.length == 0 {
			return "character varying"
		}
		return "character varying(" + strconv.Itoa(int(t.length)) + ")"
	case Char:
		if t.length == 0 {
			return "bpchar"
		}
		return "character(" + strconv.Itoa(int(t.length)) + ")"
	case Bytea:
		return "bytea"
	case Date:
		return "date"
	case Time:
		return "time without time zone"
	case Timestamp:
		return "timestamp without time zone"
	case Timestamptz:
		return "timestamp with time zone"
	case Interval:
		return "interval"
	case UUID:
		return "uuid"
	case JSON:
		return "json"
	case JSONB:
		return "jsonb"
	case Array:
		return t.Elem().Name() + "[]"
	case Unknown:
		return "text"
	}
	return "invalid"
}

// PostgreSQL type OIDs (pg_type.oid), from PostgreSQL's pg_type.dat.
const (
	OIDBool        uint32 = 16
	OIDBytea       uint32 = 17
	OIDInt8        uint32 = 20
	OIDInt2        uint32 = 21
	OIDInt4        uint32 = 23
	OIDText        uint32 = 25
	OIDJSON        uint32 = 114
	OIDFloat4      uint32 = 700
	OIDFloat8      uint32 = 701
	OIDBPChar      uint32 = 1042
	OIDVarchar     uint32 = 1043
	OIDDate        uint32 = 1082
	OIDTime        uint32 = 1083
	OIDTimestamp   uint32 = 1114
	OIDTimestamptz uint32 = 1184
	OIDInterval    uint32 = 1186
	OIDNumeric     uint32 = 1700
	OIDUUID        uint32 = 2950
	OIDJSONB       uint32 = 3802
)

// scalarOIDs and arrayOIDs are indexed by Kind.
var (
	scalarOIDs = [...]uint32{
		Bool: OIDBool, Int2: OIDInt2, Int4: OIDInt4, Int8: OIDInt8, Float4: OIDFloat4, Float8: OIDFloat8,
		Numeric: OIDNumeric, Text: OIDText, Varchar: OIDVarchar, Char: OIDBPChar, Bytea: OIDBytea,
		Date: OIDDate, Time: OIDTime, Timestamp: OIDTimestamp, Timestamptz: OIDTimestamptz,
		Interval: OIDInterval, UUID: OIDUUID, JSON: OIDJSON, JSONB: OIDJSONB, Unknown: OIDText,
	}
	arrayOIDs = [...]uint32{
		Bool: 1000, Int2: 1005, Int4: 1007, Int8: 1016, Float4: 1021, Float8: 1022,
		Numeric: 1231, Text: 1009, Varchar: 1015, Char: 1014, Bytea: 1001,
		Date: 1182, Time: 1183, Timestamp: 1115, Timestamptz: 1185,
		Interval: 1187, UUID: 2951, JSON: 199, JSONB: 3807,
	}
)

// OID returns the PostgreSQL type OID (pg_type.oid), which clients use to
// decode values. Unknown is described as text.
func (t Type) OID() uint32 {
	if t.kind == Array {
		return arrayOIDs[t.elem]
	}
	if int(t.kind) < len(scalarOIDs) {
		return scalarOIDs[t.kind]
	}
	return 0
}

// varHdrSz is PostgreSQL's VARHDRSZ, which it adds to length and numeric
// typmods.
const varHdrSz = 4

// TypMod returns PostgreSQL's atttypmod: n+4 for varchar(n) and char(n),
// ((p<<16)|s)+4 for numeric(p,s), -1 otherwise. An array has its
// element's typmod.
func (t Type) TypMod() int32 {
	k := t.kind
	if k == Array {
		k = t.elem
	}
	switch k {
	case Varchar, Char:
		if t.length > 0 {
			return t.length + varHdrSz
		}
	case Numeric:
		if t.precision > 0 {
			return (int32(t.precision)<<16 | int32(t.scale)) + varHdrSz
		}
	}
	return -1
}

// Len returns PostgreSQL's typlen: the size of a fixed-width type in bytes,
// -1 for variable-length types.
func (t Type) Len() int16 {
	switch t.kind {
	case Bool:
		return 1
	case Int2:
		return 2
	case Int4, Float4, Date:
		return 4
	case Int8, Float8, Time, Timestamp, Timestamptz:
		return 8
	case Interval, UUID:
		return 16
	}
	return -1
}

// FromOID returns the column type a result column described by a type OID
// and modifier (pgwire's RowDescription fields) stores as: the type of that
// OID with its modifier applied (varchar(n), char(n), numeric(p,s), for
// arrays the element's). It is false for an OID no mink column has.
func FromOID(oid uint32, typmod int32) (Type, bool) {
	for k, o := range scalarOIDs {
		if o == oid && Kind(k) != Unknown && o != 0 {
			return withTypmod(Type{kind: Kind(k)}, typmod), true
		}
	}
	for k, o := range arrayOIDs {
		if o == oid && o != 0 {
			return ArrayOf(withTypmod(Type{kind: Kind(k)}, typmod)), true
		}
	}
	return Type{}, false
}

// withTypmod applies a typmod (TypMod's encoding) to a scalar type.
func withTypmod(t Type, typmod int32) Type {
	if typmod < varHdrSz {
		return t
	}
	m := typmod - varHdrSz
	switch t.kind {
	case Varchar, Char:
		if m > 0 {
			t.length = m
		}
	case Numeric:
		p, s := int(m>>16), int(m&0xffff)
		if n, err := NumericOf(p, s); err == nil {
			t = n
		}
	}
	return t
}
