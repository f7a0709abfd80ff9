package tiering

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/parquet-go/parquet-go"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// Column names mink adds to every lake row: the bucket (catalog.BucketID) and
// the row's offset in that bucket's stream. Together they identify a row
// exactly once, which is what makes a union read and a repair checkable.
const (
	BucketColumn = "__bucket"
	OffsetColumn = "__offset"
)

// ErrUnsupportedType: a table has a column whose type has no lake mapping
// (interval, arrays). Rounds of such a table fail with this error.
var ErrUnsupportedType = fmt.Errorf("column type cannot be tiered")

// lakeColumn is one column of a table's lake schema: its SQL type, its
// Iceberg field and the Parquet leaf it is written as.
type lakeColumn struct {
	name     string
	sql      sqltypes.Type // invalid for __bucket and __offset
	field    iceberg.NestedField
	leaf     parquet.Node
	notNull  bool
	arrowIdx int // index in the bucket's Arrow records; -1 for __bucket/__offset
}

// lakeSchema maps a table spec to its lake columns. Field ids are 1..n in
// column order, then __bucket and __offset; they never change for a table
// (mink has no ALTER TABLE), so the Iceberg schema is a pure function of the
// spec.
type lakeSchema struct {
	cols []lakeColumn
	// partitionField is the field id of the LIST partition column, 0 if none.
	partitionField int
}

func newLakeSchema(spec catalog.TableSpec) (*lakeSchema, error) {
	s := &lakeSchema{}
	for i, c := range spec.Columns {
		t, err := sqltypes.Parse(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		ice, leaf, err := lakeType(t)
		if err != nil {
			return nil, fmt.Errorf("column %q of type %s: %w", c.Name, t.Name(), err)
		}
		id := i + 1
		if c.Name == spec.PartitionBy {
			s.partitionField = id
		}
		s.cols = append(s.cols, lakeColumn{
			name: c.Name, sql: t, notNull: c.NotNull, arrowIdx: i,
			field: iceberg.NestedField{ID: id, Name: c.Name, Type: ice, Required: c.NotNull},
			leaf:  leaf,
		})
	}
	for _, name := range []string{BucketColumn, OffsetColumn} {
		id := len(s.cols) + 1
		s.cols = append(s.cols, lakeColumn{
			name: name, notNull: true, arrowIdx: -1,
			field: iceberg.NestedField{ID: id, Name: name, Type: iceberg.PrimitiveTypes.Int64, Required: true},
			leaf:  parquet.Int(64),
		})
	}
	return s, nil
}

// lakeType is the Iceberg type and Parquet leaf of a SQL type. The Parquet
// physical and logical types are the ones the Iceberg spec prescribes for the
// Iceberg type, so that any Iceberg reader maps them back.
func lakeType(t sqltypes.Type) (iceberg.Type, parquet.Node, error) {
	switch t.Kind() {
	case sqltypes.Bool:
		return iceberg.PrimitiveTypes.Bool, parquet.Leaf(parquet.BooleanType), nil
	case sqltypes.Int2, sqltypes.Int4:
		// Iceberg has no 16-bit integer: smallint widens to int.
		return iceberg.PrimitiveTypes.Int32, parquet.Int(32), nil
	case sqltypes.Int8:
		return iceberg.PrimitiveTypes.Int64, parquet.Int(64), nil
	case sqltypes.Float4:
		return iceberg.PrimitiveTypes.Float32, parquet.Leaf(parquet.FloatType), nil
	case sqltypes.Float8:
		return iceberg.PrimitiveTypes.Float64, parquet.Leaf(parquet.DoubleType), nil
	case sqltypes.Numeric:
		dt := t.ArrowType().(*arrow.Decimal128Type)
		return iceberg.DecimalTypeOf(int(dt.Precision), int(dt.Scale)),
			parquet.Decimal(int(dt.Scale), int(dt.Precision), parquet.FixedLenByteArrayType(16)), nil
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char, sqltypes.JSON, sqltypes.JSONB:
		return iceberg.PrimitiveTypes.String, parquet.String(), nil
	case sqltypes.Bytea:
		return iceberg.PrimitiveTypes.Binary, parquet.Leaf(parquet.ByteArrayType), nil
	case sqltypes.Date:
		return iceberg.PrimitiveTypes.Date, parquet.Date(), nil
	case sqltypes.Time:
		return iceberg.PrimitiveTypes.Time, parquet.Time(parquet.Microsecond), nil
	case sqltypes.Timestamp:
		return iceberg.PrimitiveTypes.Timestamp, parquet.TimestampAdjusted(parquet.Microsecond, false), nil
	case sqltypes.Timestamptz:
		return iceberg.PrimitiveTypes.TimestampTz, parquet.TimestampAdjusted(parquet.Microsecond, true), nil
	case sqltypes.UUID:
		return iceberg.PrimitiveTypes.UUID, parquet.UUID(), nil
	}
	return nil, nil, ErrUnsupportedType
}

// icebergSchema is the table's Iceberg schema.
func (s *lakeSchema) icebergSchema() *iceberg.Schema {
	fields := make([]iceberg.NestedField, len(s.cols))
	for i, c := range s.cols {
		fields[i] = c.field
	}
	return iceberg.NewSchema(0, fields...)
}

// partitionSpec is the identity partition on the LIST partition column, or
// the unpartitioned spec.
func (s *lakeSchema) partitionSpec() iceberg.PartitionSpec {
	if s.partitionField == 0 {
		return *iceberg.UnpartitionedSpec
	}
	c := s.cols[s.partitionField-1]
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{c.field.ID}, FieldID: 1000, Name: c.name, Transform: iceberg.IdentityTransform{},
	})
}

// parquetSchema is the Parquet schema of the table's lake files. parquet-go
// orders a group's columns by name; readers match columns by name (through
// the table's name mapping), so the order does not matter.
func (s *lakeSchema) parquetSchema() *parquet.Schema {
	g := parquet.Group{}
	for _, c := range s.cols {
		if c.notNull {
			g[c.name] = parquet.Required(c.leaf)
		} else {
			g[c.name] = parquet.Optional(c.leaf)
		}
	}
	return parquet.NewSchema("mink", g)
}

// columnWriter appends one Arrow column's values at a Parquet leaf.
type columnWriter struct {
	leaf    int // Parquet column index
	maxDef  int
	arrowIx int
	kind    sqltypes.Kind
	extra   string // "bucket" or "offset" for the mink columns
}

func (s *lakeSchema) columnWriters(ps *parquet.Schema) ([]columnWriter, error) {
	out := make([]columnWriter, len(s.cols))
	for i, c := range s.cols {
		leaf, ok := ps.Lookup(c.name)
		if !ok {
			panic(fmt.Sprintf("tiering: column %q missing from its own Parquet schema", c.name))
		}
		w := columnWriter{leaf: leaf.ColumnIndex, maxDef: leaf.MaxDefinitionLevel, arrowIx: c.arrowIdx}
		switch c.name {
		case BucketColumn:
			w.extra = "bucket"
		case OffsetColumn:
			w.extra = "offset"
		default:
			w.kind = c.sql.Kind()
		}
		out[i] = w
	}
	return out, nil
}

// storage returns the storage array of an extension array (uuid, json).
func storage(a arrow.Array) arrow.Array {
	if ext, ok := a.(array.ExtensionArray); ok {
		return ext.Storage()
	}
	return a
}

// value is row i of column a as a Parquet value (without levels).
func (w columnWriter) value(a arrow.Array, i int) (parquet.Value, error) {
	a = storage(a)
	if a.IsNull(i) {
		return parquet.NullValue(), nil
	}
	switch col := a.(type) {
	case *array.Boolean:
		return parquet.BooleanValue(col.Value(i)), nil
	case *array.Int16:
		return parquet.Int32Value(int32(col.Value(i))), nil
	case *array.Int32:
		return parquet.Int32Value(col.Value(i)), nil
	case *array.Int64:
		return parquet.Int64Value(col.Value(i)), nil
	case *array.Float32:
		return parquet.FloatValue(col.Value(i)), nil
	case *array.Float64:
		return parquet.DoubleValue(col.Value(i)), nil
	case *array.Decimal128:
		v := col.Value(i)
		b := make([]byte, 16)
		binary.BigEndian.PutUint64(b[:8], uint64(v.HighBits()))
		binary.BigEndian.PutUint64(b[8:], v.LowBits())
		return parquet.FixedLenByteArrayValue(b), nil
	case *array.String:
		return parquet.ByteArrayValue([]byte(col.Value(i))), nil
	case *array.Binary:
		return parquet.ByteArrayValue(col.Value(i)), nil
	case *array.Date32:
		return parquet.Int32Value(int32(col.Value(i))), nil
	case *array.Time64:
		return parquet.Int64Value(int64(col.Value(i))), nil
	case *array.Timestamp:
		return parquet.Int64Value(int64(col.Value(i))), nil
	case *array.FixedSizeBinary:
		return parquet.FixedLenByteArrayValue(col.Value(i)), nil
	}
	return parquet.Value{}, fmt.Errorf("%w: Arrow type %s", ErrUnsupportedType, a.DataType())
}
