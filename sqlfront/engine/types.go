package engine

import (
	"fmt"

	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/minkdb/mink/internal/sqltypes"
)

// describeColumn describes a result column of DuckDB type lt.
func describeColumn(name string, lt duck.LogicalType) Column {
	n := typeName(lt)
	return Column{Name: name, Type: sqltypes.FromDuckDB(n), DuckDBType: n}
}

// typeNames are DuckDB's names of the types without parameters.
var typeNames = map[duck.Type]string{
	duck.TypeBoolean:        "BOOLEAN",
	duck.TypeTinyInt:        "TINYINT",
	duck.TypeSmallInt:       "SMALLINT",
	duck.TypeInteger:        "INTEGER",
	duck.TypeBigInt:         "BIGINT",
	duck.TypeUTinyInt:       "UTINYINT",
	duck.TypeUSmallInt:      "USMALLINT",
	duck.TypeUInteger:       "UINTEGER",
	duck.TypeUBigInt:        "UBIGINT",
	duck.TypeFloat:          "FLOAT",
	duck.TypeDouble:         "DOUBLE",
	duck.TypeTimestamp:      "TIMESTAMP",
	duck.TypeDate:           "DATE",
	duck.TypeTime:           "TIME",
	duck.TypeInterval:       "INTERVAL",
	duck.TypeHugeInt:        "HUGEINT",
	duck.TypeUHugeInt:       "UHUGEINT",
	duck.TypeVarchar:        "VARCHAR",
	duck.TypeBlob:           "BLOB",
	duck.TypeTimestampS:     "TIMESTAMP_S",
	duck.TypeTimestampMS:    "TIMESTAMP_MS",
	duck.TypeTimestampNS:    "TIMESTAMP_NS",
	duck.TypeUUID:           "UUID",
	duck.TypeBit:            "BIT",
	duck.TypeTimeTZ:         "TIME WITH TIME ZONE",
	duck.TypeTimestampTZ:    "TIMESTAMP WITH TIME ZONE",
	duck.TypeBigNum:         "BIGNUM",
	duck.TypeSQLNull:        `"NULL"`,
	duck.TypeStringLiteral:  "VARCHAR",
	duck.TypeIntegerLiteral: "INTEGER",
	duck.TypeTimeNS:         "TIME_NS",
	duck.TypeGeometry:       "GEOMETRY",
	duck.TypeVariant:        "VARIANT",
	duck.TypeAny:            "ANY",
	duck.TypeStruct:         "STRUCT",
	duck.TypeMap:            "MAP",
	duck.TypeUnion:          "UNION",
	duck.TypeEnum:           "ENUM",
}

// typeName renders a DuckDB logical type the way DuckDB names it, enough
// for sqltypes.FromDuckDB: parameters of DECIMAL, element types of lists
// and arrays, and the JSON alias; STRUCT, MAP, UNION and ENUM without
// their members.
func typeName(lt duck.LogicalType) string {
	if alias := duck.LogicalTypeGetAlias(lt); alias != "" {
		return alias
	}
	switch id := duck.GetTypeId(lt); id {
	case duck.TypeDecimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", duck.DecimalWidth(lt), duck.DecimalScale(lt))
	case duck.TypeList:
		child := duck.ListTypeChildType(lt)
		defer duck.DestroyLogicalType(&child)
		return typeName(child) + "[]"
	case duck.TypeArray:
		child := duck.ArrayTypeChildType(lt)
		defer duck.DestroyLogicalType(&child)
		return fmt.Sprintf("%s[%d]", typeName(child), duck.ArrayTypeArraySize(lt))
	default:
		if n, ok := typeNames[id]; ok {
			return n
		}
		return fmt.Sprintf("TYPE%d", id)
	}
}
