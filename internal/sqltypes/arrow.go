package sqltypes

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// Arrow types shared by every Type that needs them. Arrow types are
// immutable, so sharing is safe.
var (
	timestampType   = &arrow.TimestampType{Unit: arrow.Microsecond}
	timestamptzType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	uuidType        = extensions.NewUUIDType()
	jsonType        = mustJSONType()
	// unconstrainedNumericType stores numeric without precision.
	unconstrainedNumericType = &arrow.Decimal128Type{Precision: MaxNumericPrecision, Scale: UnconstrainedNumericScale}
)

func mustJSONType() arrow.DataType {
	t, err := extensions.NewJSONType(arrow.BinaryTypes.String)
	if err != nil {
		panic(err)
	}
	return t
}

// ArrowType returns the Arrow type that holds the type's values in a bucket
// and in batches fed to the engine. Unknown maps to String.
func (t Type) ArrowType() arrow.DataType {
	switch t.kind {
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case Int2:
		return arrow.PrimitiveTypes.Int16
	case Int4:
		return arrow.PrimitiveTypes.Int32
	case Int8:
		return arrow.PrimitiveTypes.Int64
	case Float4:
		return arrow.PrimitiveTypes.Float32
	case Float8:
		return arrow.PrimitiveTypes.Float64
	case Numeric:
		if t.precision == 0 {
			return unconstrainedNumericType
		}
		return &arrow.Decimal128Type{Precision: int32(t.precision), Scale: int32(t.scale)}
	case Text, Varchar, Char, Unknown:
		return arrow.BinaryTypes.String
	case Bytea:
		return arrow.BinaryTypes.Binary
	case Date:
		return arrow.FixedWidthTypes.Date32
	case Time:
		return arrow.FixedWidthTypes.Time64us
	case Timestamp:
		return timestampType
	case Timestamptz:
		return timestamptzType
	case Interval:
		return arrow.FixedWidthTypes.MonthDayNanoInterval
	case UUID:
		return uuidType
	case JSON, JSONB:
		return jsonType
	case Array:
		return arrow.ListOf(t.Elem().ArrowType())
	}
	panic("sqltypes: ArrowType of invalid type")
}

// MetadataKey is the Arrow field metadata key under which Schema records a
// column's SQL type (its Name). FromArrowField reads it back, which keeps
// what Arrow alone cannot say: varchar(n) versus text, json versus jsonb,
// numeric versus numeric(38,10).
const MetadataKey = "mink.sql_type"

// FromArrowField returns the SQL type of an Arrow field: the type recorded
// under MetadataKey when it parses and matches the field's Arrow type,
// otherwise FromArrow of the field's type.
func FromArrowField(f arrow.Field) Type {
	if s, ok := f.Metadata.GetValue(MetadataKey); ok {
		if t, err := Parse(s); err == nil && arrow.TypeEqual(t.ArrowType(), f.Type) {
			return t
		}
	}
	return FromArrow(f.Type)
}

// FromArrow describes an Arrow type as a SQL type, for result columns of a
// query whose Arrow output is all that is known. It never fails: types
// without a PostgreSQL counterpart become Unknown (described as text), and
// nested types other than lists of scalars become json.
//
//	Bool → boolean; Int8, Uint8, Int16 → smallint; Uint16, Int32 → integer;
//	Uint32, Int64 → bigint; Uint64 → numeric; Float16, Float32 → real;
//	Float64 → double precision; Decimal(p,s) → numeric(p,s) (numeric when
//	p > 38); String, LargeString, StringView → text; Binary, LargeBinary,
//	BinaryView, FixedSizeBinary → bytea; Date32, Date64 → date; Time32,
//	Time64 → time; Timestamp without zone → timestamp; with zone →
//	timestamptz; intervals and Duration → interval; arrow.uuid → uuid;
//	arrow.json → json; Dictionary → its value type; lists of scalars →
//	arrays (of arrow.json: json[]); Struct, Map, Union, nested lists →
//	json; Null → text.
func FromArrow(dt arrow.DataType) Type {
	switch dt := dt.(type) {
	case *extensions.UUIDType:
		return Of(UUID)
	case *extensions.JSONType:
		return Of(JSON)
	case arrow.ExtensionType:
		switch dt.ExtensionName() {
		case "arrow.uuid":
			return Of(UUID)
		case "arrow.json":
			return Of(JSON)
		}
		return FromArrow(dt.StorageType())
	case *arrow.DictionaryType:
		return FromArrow(dt.ValueType)
	case arrow.DecimalType:
		if p, s := int(dt.GetPrecision()), int(dt.GetScale()); p <= MaxNumericPrecision && s >= 0 && s <= p {
			return Type{kind: Numeric, precision: int16(p), scale: int16(s)}
		}
		return Of(Numeric)
	case *arrow.TimestampType:
		if dt.TimeZone == "" {
			return Of(Timestamp)
		}
		return Of(Timestamptz)
	case arrow.ListLikeType:
		if _, isMap := dt.(*arrow.MapType); isMap {
			return Of(JSON)
		}
		elem := FromArrow(dt.Elem())
		_, isJSON := dt.Elem().(*extensions.JSONType)
		if elem.kind == Array || (elem.kind == JSON && !isJSON) || elem.kind == Unknown {
			return Of(JSON)
		}
		return ArrayOf(elem)
	}
	switch dt.ID() {
	case arrow.BOOL:
		return Of(Bool)
	case arrow.INT8, arrow.UINT8, arrow.INT16:
		return Of(Int2)
	case arrow.UINT16, arrow.INT32:
		return Of(Int4)
	case arrow.UINT32, arrow.INT64:
		return Of(Int8)
	case arrow.UINT64:
		return Of(Numeric)
	case arrow.FLOAT16, arrow.FLOAT32:
		return Of(Float4)
	case arrow.FLOAT64:
		return Of(Float8)
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return Of(Text)
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return Of(Bytea)
	case arrow.DATE32, arrow.DATE64:
		return Of(Date)
	case arrow.TIME32, arrow.TIME64:
		return Of(Time)
	case arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME, arrow.INTERVAL_MONTH_DAY_NANO, arrow.DURATION:
		return Of(Interval)
	case arrow.STRUCT, arrow.SPARSE_UNION, arrow.DENSE_UNION, arrow.MAP:
		return Of(JSON)
	}
	return Of(Unknown)
}

// Column is a table column as far as types are concerned.
type Column struct {
	Name    string
	Type    Type
	NotNull bool
	// Missing is the value, in its MissingText form, of rows stored
	// without the column (see Widen); nil: NULL.
	Missing *string
	// Dropped marks the place of a column ALTER TABLE … DROP COLUMN
	// dropped, in a table's stored columns (catalog
	// TableSpec.StoredColumns): stored batches hold it there, Widen leaves
	// it out and Pad fills it with NULL.
	Dropped bool
}

// Visible returns the columns of cols that are not Dropped: cols itself
// when none is.
func Visible(cols []Column) []Column {
	n := 0
	for _, c := range cols {
		if !c.Dropped {
			n++
		}
	}
	if n == len(cols) {
		return cols
	}
	out := make([]Column, 0, n)
	for _, c := range cols {
		if !c.Dropped {
			out = append(out, c)
		}
	}
	return out
}

// Schema returns the Arrow schema of a table's batches: one field per
// column, in order, with the column's ArrowType, nullable unless NOT NULL,
// and the SQL type's Name under MetadataKey.
func Schema(cols []Column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = Field(c)
	}
	return arrow.NewSchema(fields, nil)
}

// Field returns the Arrow field of one column, as in Schema.
func Field(c Column) arrow.Field {
	return arrow.Field{
		Name:     c.Name,
		Type:     c.Type.ArrowType(),
		Nullable: !c.NotNull,
		Metadata: arrow.NewMetadata([]string{MetadataKey}, []string{c.Type.Name()}),
	}
}
