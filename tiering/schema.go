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

// ErrUnsupportedType: a table has a column whose type has no lake mapping.
// Every type a table column can have (sqltypes.Type.Storable) has one; a
// batch whose Arrow type does not match its column's fails with it.
var ErrUnsupportedType = fmt.Errorf("column type cannot be tiered")

// Names of the fields of an interval column's lake struct: Arrow's
// month_day_nano interval (how mink stores intervals) field by field.
const (
	intervalMonths      = "months"
	intervalDays        = "days"
	intervalNanoseconds = "nanoseconds"
)

// lakeColumn is one column of a table's lake schema: its SQL type, its
// Iceberg field and the Parquet node it is written as (a leaf, or the
// group of an interval's struct).
type lakeColumn struct {
	name     string
	sql      sqltypes.Type // invalid for __bucket and __offset
	field    iceberg.NestedField
	node     parquet.Node
	notNull  bool
	arrowIdx int // index in the bucket's Arrow records; -1 for __bucket/__offset
	// added: the column was added by ALTER TABLE (catalog Column.Added);
	// lake files written before have no such column.
	added bool
}

// leafPaths are the Parquet paths of the column's leaves, in the order of
// its values: the column itself, or an interval's months, days and
// nanoseconds (also the order of an interval primary-key column).
func (c lakeColumn) leafPaths() [][]string {
	return typeLeafPaths(c.sql, []string{c.name})
}

// typeLeafPaths are the Parquet paths of the leaves of a value of type t
// at path: an interval's three fields, an array's element's leaves under
// list.element (Parquet's three-level LIST), or path itself.
func typeLeafPaths(t sqltypes.Type, path []string) [][]string {
	with := func(names ...string) []string { return append(append([]string(nil), path...), names...) }
	switch {
	case t.Kind() == sqltypes.Interval:
		return [][]string{with(intervalMonths), with(intervalDays), with(intervalNanoseconds)}
	case t.Kind() == sqltypes.Array:
		return typeLeafPaths(t.Elem(), with("list", "element"))
	}
	return [][]string{path}
}

// lakeSchema maps a table spec to its lake columns: the table's columns in
// order, then __bucket and __offset. Field ids are assigned depth first, as
// iceberg-go assigns them: the columns the table was created with take 1..n
// (an interval's three struct fields, an array's element take the ids right
// after their column's), then __bucket and __offset, then the columns
// ALTER TABLE … ADD COLUMN added, in the order added, which is how the lake's
// schema evolution (Lake.evolve) numbers them after the ids before. An added
// column is optional in the lake whatever its NOT NULL: Iceberg v2 cannot add
// a required field, and the files written before it have no value for it.
type lakeSchema struct {
	cols []lakeColumn
	// partitionCol is 1 + the index in cols of the LIST partition column,
	// 0 if none or if the column has no Iceberg identity partition
	// (interval: a struct).
	partitionCol int
	// table are the table's columns, with the missing values of the added
	// ones (what a stored batch or lake file without them is widened with).
	table []sqltypes.Column
}

func newLakeSchema(spec catalog.TableSpec) (*lakeSchema, error) {
	s := &lakeSchema{}
	nextID := 1
	newID := func() int {
		nextID++
		return nextID - 1
	}
	// The stored columns: a dropped column keeps its lake field (its old
	// files hold it), optional, and later rows hold NULL there.
	stored := spec.StoredColumns()
	s.cols = make([]lakeColumn, len(stored), len(stored)+2)
	s.table = make([]sqltypes.Column, len(stored))
	addColumn := func(i int, c catalog.Column) error {
		t, err := sqltypes.Parse(c.Type)
		if err != nil {
			return fmt.Errorf("column %q: %w", c.Name, err)
		}
		s.table[i] = sqltypes.Column{Name: c.Name, Type: t, NotNull: c.NotNull, Missing: c.Missing}
		id := newID()
		ice, node, err := lakeType(t, newID)
		if err != nil {
			return fmt.Errorf("column %q of type %s: %w", c.Name, t.Name(), err)
		}
		if c.Name == spec.PartitionBy && t.Kind() != sqltypes.Interval && t.Kind() != sqltypes.Array {
			s.partitionCol = i + 1
		}
		// An added column, or one whose NOT NULL changed after the
		// table was created, is optional in the lake: files written
		// before hold no value or NULLs there.
		required := c.NotNull && !c.Added && !c.LakeOptional
		s.cols[i] = lakeColumn{
			name: c.Name, sql: t, notNull: required, arrowIdx: i, added: c.Added,
			field: iceberg.NestedField{ID: id, Name: c.Name, Type: ice, Required: required},
			node:  node,
		}
		return nil
	}
	for i, c := range stored {
		if !c.Added {
			if err := addColumn(i, c); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range []string{BucketColumn, OffsetColumn} {
		s.cols = append(s.cols, lakeColumn{
			name: name, notNull: true, arrowIdx: -1,
			field: iceberg.NestedField{ID: newID(), Name: name, Type: iceberg.PrimitiveTypes.Int64, Required: true},
			node:  parquet.Int(64),
		})
	}
	for i, c := range stored {
		if c.Added {
			if err := addColumn(i, c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// column returns the lake column of a table column.
func (s *lakeSchema) column(name string) (lakeColumn, bool) {
	for _, c := range s.cols {
		if c.name == name {
			return c, true
		}
	}
	return lakeColumn{}, false
}

// lakeType is the Iceberg type and Parquet node of a SQL type. The Parquet
// physical and logical types are the ones the Iceberg spec prescribes for the
// Iceberg type, so that any Iceberg reader maps them back. nestedID
// allocates the field ids of nested fields.
func lakeType(t sqltypes.Type, nestedID func() int) (iceberg.Type, parquet.Node, error) {
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
	case sqltypes.Array:
		// Iceberg's list with optional elements; in Parquet the
		// three-level LIST (list.element), as the Iceberg spec says.
		elemID := nestedID()
		elem, node, err := lakeType(t.Elem(), nestedID)
		if err != nil {
			return nil, nil, err
		}
		return &iceberg.ListType{ElementID: elemID, Element: elem, ElementRequired: false},
			parquet.List(parquet.Optional(node)), nil
	case sqltypes.Interval:
		// Iceberg has no interval type. The struct keeps the three
		// independent parts of a PostgreSQL interval (which does not
		// fold days into months or time into days) exactly as stored.
		st := &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: nestedID(), Name: intervalMonths, Type: iceberg.PrimitiveTypes.Int32, Required: true},
			{ID: nestedID(), Name: intervalDays, Type: iceberg.PrimitiveTypes.Int32, Required: true},
			{ID: nestedID(), Name: intervalNanoseconds, Type: iceberg.PrimitiveTypes.Int64, Required: true},
		}}
		return st, parquet.Group{
			intervalMonths:      parquet.Required(parquet.Int(32)),
			intervalDays:        parquet.Required(parquet.Int(32)),
			intervalNanoseconds: parquet.Required(parquet.Int(64)),
		}, nil
	}
	return nil, nil, ErrUnsupportedType
}

// createdSchema is the Iceberg schema a table's lake is created with: the
// columns the table was created with, __bucket and __offset. The added
// columns come by schema evolution (Lake.evolve), also when the lake is
// created after them, so that every lake numbers its fields the same way.
func (s *lakeSchema) createdSchema() *iceberg.Schema {
	var fields []iceberg.NestedField
	for _, c := range s.cols {
		if !c.added {
			fields = append(fields, c.field)
		}
	}
	return iceberg.NewSchema(0, fields...)
}

// partitionSpec is the identity partition on the LIST partition column, or
// the unpartitioned spec.
func (s *lakeSchema) partitionSpec() iceberg.PartitionSpec {
	if s.partitionCol == 0 {
		return *iceberg.UnpartitionedSpec
	}
	c := s.cols[s.partitionCol-1]
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
			g[c.name] = parquet.Required(c.node)
		} else {
			g[c.name] = parquet.Optional(c.node)
		}
	}
	return parquet.NewSchema("mink", g)
}

// columnWriter sets one column's values in Parquet rows.
type columnWriter struct {
	name string
	// leaves are the Parquet column indexes of the column's values (see
	// lakeColumn.leafPaths).
	leaves []int
	// maxDef is the definition level of a present value at every leaf
	// (an interval's struct fields are required: the struct's own level).
	maxDef  int
	arrowIx int
	kind    sqltypes.Kind
	elem    sqltypes.Kind // element kind of an array column
	extra   string        // "bucket" or "offset" for the mink columns
}

func (s *lakeSchema) columnWriters(ps *parquet.Schema) ([]columnWriter, error) {
	out := make([]columnWriter, len(s.cols))
	for i, c := range s.cols {
		w := columnWriter{name: c.name, arrowIx: c.arrowIdx}
		for _, path := range c.leafPaths() {
			leaf, ok := ps.Lookup(path...)
			if !ok {
				panic(fmt.Sprintf("tiering: column %q missing from its own Parquet schema", path))
			}
			w.leaves = append(w.leaves, leaf.ColumnIndex)
			w.maxDef = leaf.MaxDefinitionLevel
		}
		switch c.name {
		case BucketColumn:
			w.extra = "bucket"
		case OffsetColumn:
			w.extra = "offset"
		default:
			w.kind = c.sql.Kind()
			if w.kind == sqltypes.Array {
				w.elem = c.sql.Elem().Kind()
			}
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

// scalarValue is row i (not NULL) of a column of a one-leaf type as a
// Parquet value (without levels).
func scalarValue(a arrow.Array, i int) (parquet.Value, error) {
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
