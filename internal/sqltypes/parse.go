package sqltypes

import (
	"strconv"
	"strings"
)

// Parse parses a type as written in SQL, e.g. "int4", "character
// varying(20)", "NUMERIC(12, 2)", "timestamp with time zone",
// "pg_catalog.varchar(5)". Aliases are resolved to the canonical type (see
// Lookup). Errors are *Error:
//
//	42601 malformed text, or modifiers on a type that takes none
//	42704 unknown type
//	22023 modifiers out of range (varchar(0), numeric(3,5))
//	0A000 a PostgreSQL type mink does not store (timetz, serial, …),
//	      numeric precision over 38, precision on time/timestamp/interval
//
// An array type is written as its element type followed by [] ("text[]",
// "numeric(12,2)[]"), by "[n]" or several bracket pairs (PostgreSQL
// ignores the sizes and the number of dimensions, and so does mink), by
// " ARRAY" or " ARRAY[n]" ("integer ARRAY"), or by PostgreSQL's internal
// name, an underscore before the element's ("_int4").
func Parse(text string) (Type, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return Type{}, errorf(codeSyntaxError, "syntax error: empty type name")
	}
	if elem, ok, err := cutArraySuffix(s); ok || err != nil {
		if err != nil {
			return Type{}, err
		}
		et, err := Parse(elem)
		if err != nil {
			return Type{}, err
		}
		return arrayOfParsed(et)
	}
	if strings.ContainsAny(s, "[]") {
		return Type{}, errorf(codeSyntaxError, "syntax error in type %q", text)
	}
	name, mods := s, []int32(nil)
	if open := strings.IndexByte(s, '('); open >= 0 {
		closing := strings.IndexByte(s[open:], ')')
		if closing < 0 {
			return Type{}, errorf(codeSyntaxError, "syntax error in type %q: missing \")\"", text)
		}
		closing += open
		for _, part := range strings.Split(s[open+1:closing], ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
			if err != nil {
				return Type{}, errorf(codeSyntaxError, "syntax error in type %q: type modifiers must be integer constants", text)
			}
			mods = append(mods, int32(n))
		}
		name = s[:open] + " " + s[closing+1:]
	}
	if strings.ContainsAny(name, "()") {
		return Type{}, errorf(codeSyntaxError, "syntax error in type %q", text)
	}
	return Lookup(name, mods)
}

// Lookup resolves a type name and its integer modifiers, the form in which
// the PostgreSQL parser (pg_query) hands over a TypeName: name is
// case-insensitive, may be schema-qualified with pg_catalog and may
// contain several words ("double precision", "timestamp with time zone").
// Accepted names:
//
//	boolean      bool
//	smallint     int2
//	integer      int, int4
//	bigint       int8
//	real         float4, float(1..24)
//	double precision  float8, float, float(25..53)
//	numeric      decimal; numeric(p), numeric(p,s) with 1 <= p <= 38, 0 <= s <= p
//	text
//	character varying  varchar, char varying; with (n)
//	character(n) char, character (= char(1)), bpchar (unconstrained)
//	bytea, date, uuid, json, jsonb, interval
//	time         time without time zone
//	timestamp    timestamp without time zone
//	timestamptz  timestamp with time zone
//
// Errors are as for Parse.
func Lookup(name string, mods []int32) (Type, error) {
	n := normalizeName(name)
	noMods := func(t Type) (Type, error) {
		if len(mods) > 0 {
			return Type{}, errorf(codeSyntaxError, "type modifier is not allowed for type %q", n)
		}
		return t, nil
	}
	switch n {
	case "bool", "boolean":
		return noMods(Of(Bool))
	case "int2", "smallint":
		return noMods(Of(Int2))
	case "int", "integer", "int4":
		return noMods(Of(Int4))
	case "int8", "bigint":
		return noMods(Of(Int8))
	case "float4", "real":
		return noMods(Of(Float4))
	case "float8", "double precision":
		return noMods(Of(Float8))
	case "float":
		switch {
		case len(mods) == 0:
			return Of(Float8), nil
		case len(mods) > 1:
			return Type{}, errorf(codeSyntaxError, "syntax error: float takes one precision")
		case mods[0] < 1:
			return Type{}, errorf(codeInvalidParameterValue, "precision for type float must be at least 1 bit")
		case mods[0] <= 24:
			return Of(Float4), nil
		case mods[0] <= 53:
			return Of(Float8), nil
		default:
			return Type{}, errorf(codeInvalidParameterValue, "precision for type float must be less than 54 bits")
		}
	case "numeric", "decimal", "dec":
		switch len(mods) {
		case 0:
			return Of(Numeric), nil
		case 1:
			return NumericOf(int(mods[0]), 0)
		case 2:
			return NumericOf(int(mods[0]), int(mods[1]))
		}
		return Type{}, errorf(codeInvalidParameterValue, "invalid NUMERIC type modifier")
	case "text":
		return noMods(Of(Text))
	case "varchar", "character varying", "char varying":
		switch len(mods) {
		case 0:
			return Of(Varchar), nil
		case 1:
			return VarcharOf(int(mods[0]))
		}
		return Type{}, errorf(codeSyntaxError, "invalid type modifier for type varchar")
	case "char", "character", "bpchar":
		switch len(mods) {
		case 0:
			if n == "bpchar" {
				return Of(Char), nil
			}
			return CharOf(1)
		case 1:
			return CharOf(int(mods[0]))
		}
		return Type{}, errorf(codeSyntaxError, "invalid type modifier for type char")
	case "bytea":
		return noMods(Of(Bytea))
	case "date":
		return noMods(Of(Date))
	case "time", "time without time zone":
		return noPrecision(n, mods, Of(Time))
	case "timestamp", "timestamp without time zone":
		return noPrecision(n, mods, Of(Timestamp))
	case "timestamptz", "timestamp with time zone":
		return noPrecision(n, mods, Of(Timestamptz))
	case "interval":
		return noPrecision(n, mods, Of(Interval))
	case "uuid":
		return noMods(Of(UUID))
	case "json":
		return noMods(Of(JSON))
	case "jsonb":
		return noMods(Of(JSONB))
	}
	if strings.HasPrefix(n, "interval ") {
		return Type{}, errorf(codeFeatureNotSupported, "interval fields are not supported: %s", n)
	}
	if elem, ok := strings.CutPrefix(n, "_"); ok && elem != "" {
		et, err := Lookup(elem, mods)
		if err != nil {
			return Type{}, err
		}
		return arrayOfParsed(et)
	}
	if unsupportedPostgresTypes[n] {
		return Type{}, errorf(codeFeatureNotSupported, "type %s is not supported", n)
	}
	return Type{}, errorf(codeUndefinedObject, "type %q does not exist", n)
}

// cutArraySuffix removes the array decoration of a type name: trailing
// "[]" or "[n]" pairs and a trailing ARRAY word (with or without a "[n]").
func cutArraySuffix(s string) (elem string, ok bool, err error) {
	for strings.HasSuffix(s, "]") {
		open := strings.LastIndexByte(s, '[')
		if open < 0 {
			return "", false, errorf(codeSyntaxError, "syntax error in type %q", s)
		}
		if size := strings.TrimSpace(s[open+1 : len(s)-1]); size != "" {
			if _, err := strconv.ParseUint(size, 10, 31); err != nil {
				return "", false, errorf(codeSyntaxError, "syntax error in type %q: array bounds must be integer constants", s)
			}
		}
		s, ok = strings.TrimSpace(s[:open]), true
	}
	if fields := strings.Fields(s); len(fields) > 1 && strings.EqualFold(fields[len(fields)-1], "array") {
		s, ok = strings.TrimSpace(s[:len(s)-len("array")]), true
	}
	if ok && s == "" {
		return "", false, errorf(codeSyntaxError, "syntax error: array of no type")
	}
	return s, ok, nil
}

// arrayOfParsed is ArrayOf for a type that came from Parse or Lookup.
func arrayOfParsed(elem Type) (Type, error) {
	if elem.kind == Array {
		return elem, nil // int[][] is int[] in PostgreSQL
	}
	if !elem.Storable() {
		return Type{}, errorf(codeFeatureNotSupported, "arrays of %s are not supported", elem.Name())
	}
	return ArrayOf(elem), nil
}

func noPrecision(name string, mods []int32, t Type) (Type, error) {
	if len(mods) > 0 {
		return Type{}, errorf(codeFeatureNotSupported,
			"precision modifiers on %s are not supported: values are stored with microsecond precision", name)
	}
	return t, nil
}

// unsupportedPostgresTypes are PostgreSQL types a user may reasonably try,
// which get "not supported" rather than "does not exist".
var unsupportedPostgresTypes = map[string]bool{
	"serial": true, "serial2": true, "serial4": true, "serial8": true, "smallserial": true, "bigserial": true,
	"timetz": true, "time with time zone": true, "money": true, "inet": true, "cidr": true, "macaddr": true,
	"macaddr8": true, "xml": true, "bit": true, "varbit": true, "bit varying": true, "point": true,
	"line": true, "lseg": true, "box": true, "path": true, "polygon": true, "circle": true, "tsvector": true,
	"tsquery": true, "oid": true, "name": true, "int4range": true, "int8range": true, "numrange": true,
	"tsrange": true, "tstzrange": true, "daterange": true, "hstore": true, "citext": true,
}

// normalizeName lower-cases, drops double quotes and a pg_catalog.
// qualifier, and collapses white space.
func normalizeName(name string) string {
	n := strings.ToLower(strings.ReplaceAll(name, `"`, ""))
	n = strings.Join(strings.Fields(n), " ")
	n = strings.TrimPrefix(n, "pg_catalog.")
	return n
}
