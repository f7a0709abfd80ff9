package tiering

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"

	"github.com/minkdb/mink/internal/sqltypes"
)

// PredOp is the comparison of a Predicate.
type PredOp int

const (
	PredEq      PredOp = iota // column = value
	PredLt                    // column < value
	PredLe                    // column <= value
	PredGt                    // column > value
	PredGe                    // column >= value
	PredIn                    // column = one of the values
	PredIsNull                // column IS NULL (no values)
	PredNotNull               // column IS NOT NULL (no values)
)

var predOpNames = [...]string{"=", "<", "<=", ">", ">=", "in", "is null", "is not null"}

func (op PredOp) String() string {
	if op >= 0 && int(op) < len(predOpNames) {
		return predOpNames[op]
	}
	return fmt.Sprintf("PredOp(%d)", int(op))
}

// Predicate is a condition on one lake column, with SQL semantics: a NULL
// value of the column meets none but PredIsNull. Values are the Go values of
// the column's type: int64 for smallint, integer and bigint columns, bool,
// string (text, varchar), arrow.Date32 (date) and arrow.Timestamp
// (microseconds; timestamp and timestamptz). A predicate on a column of any
// other type, or with a value of another Go type, is not used (the scan is
// then wider, never narrower).
type Predicate struct {
	Column string
	Op     PredOp
	Values []any
}

func (p Predicate) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %s", p.Column, p.Op)
	for i, v := range p.Values {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %T(%v)", v, v)
	}
	return b.String()
}

// filterKey identifies a filter in the plan cache.
func filterKey(preds []Predicate) string {
	parts := make([]string, len(preds))
	for i, p := range preds {
		parts[i] = p.String()
	}
	return strings.Join(parts, " and ")
}

// icebergFilter is the conjunction of the predicates that can be expressed
// on schema's fields, nil if none can. A predicate left out makes the filter
// wider, so the result keeps every row all predicates hold for.
func icebergFilter(schema *iceberg.Schema, preds []Predicate) iceberg.BooleanExpression {
	var out iceberg.BooleanExpression
	for _, p := range preds {
		e, ok := icebergPredicate(schema, p)
		if !ok {
			continue
		}
		if out == nil {
			out = e
		} else {
			out = iceberg.NewAnd(out, e)
		}
	}
	return out
}

func icebergPredicate(schema *iceberg.Schema, p Predicate) (iceberg.BooleanExpression, bool) {
	if p.Column == BucketColumn || p.Column == OffsetColumn {
		return nil, false
	}
	field, ok := schema.FindFieldByName(p.Column)
	if !ok {
		return nil, false
	}
	if _, primitive := field.Type.(iceberg.PrimitiveType); !primitive {
		// An interval's struct: iceberg-go binds no predicate to it.
		return nil, false
	}
	ref := iceberg.Reference(p.Column)
	switch p.Op {
	case PredIsNull:
		return iceberg.IsNull(ref), true
	case PredNotNull:
		return iceberg.NotNull(ref), true
	}
	if _, ok := field.Type.(iceberg.BooleanType); ok {
		return boolPredicate(ref, p)
	}
	lits := make([]iceberg.Literal, 0, len(p.Values))
	for _, v := range p.Values {
		lit, ok := literalFor(field.Type, v)
		if !ok {
			return nil, false
		}
		lits = append(lits, lit)
	}
	if p.Op == PredIn {
		if len(lits) == 0 {
			return iceberg.AlwaysFalse{}, true
		}
		return iceberg.SetPredicate(iceberg.OpIn, ref, lits), true
	}
	if len(lits) != 1 {
		return nil, false
	}
	var op iceberg.Operation
	switch p.Op {
	case PredEq:
		op = iceberg.OpEQ
	case PredLt:
		op = iceberg.OpLT
	case PredLe:
		op = iceberg.OpLTEQ
	case PredGt:
		op = iceberg.OpGT
	case PredGe:
		op = iceberg.OpGTEQ
	default:
		return nil, false
	}
	return iceberg.LiteralPredicate(op, ref, lits[0]), true
}

// boolPredicate is a predicate on a boolean column: = and IN only (Arrow
// has no ordering of booleans to filter rows by, and iceberg-go v0.7 loses
// rows of a boolean IN of both values), IN as = or IS NOT NULL.
func boolPredicate(ref iceberg.UnboundTerm, p Predicate) (iceberg.BooleanExpression, bool) {
	if p.Op != PredEq && p.Op != PredIn {
		return nil, false
	}
	var seen [2]bool
	for _, v := range p.Values {
		b, ok := v.(bool)
		if !ok {
			return nil, false
		}
		if b {
			seen[1] = true
		} else {
			seen[0] = true
		}
	}
	switch {
	case seen[0] && seen[1]:
		return iceberg.NotNull(ref), true
	case seen[0]:
		return iceberg.EqualTo(ref, false), true
	case seen[1]:
		return iceberg.EqualTo(ref, true), true
	}
	return iceberg.AlwaysFalse{}, true
}

// literalFor is v as a literal of a field of type t; false for the types
// whose lake bounds are not known to order as the SQL type does (floats:
// NaN; numeric, uuid, time, binary: not needed yet) and for a value that
// does not fit t.
func literalFor(t iceberg.Type, v any) (iceberg.Literal, bool) {
	switch t.(type) {
	case iceberg.Int32Type:
		n, ok := v.(int64)
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return nil, false
		}
		return iceberg.NewLiteral(int32(n)), true
	case iceberg.Int64Type:
		n, ok := v.(int64)
		if !ok {
			return nil, false
		}
		return iceberg.NewLiteral(n), true
	case iceberg.BooleanType:
		b, ok := v.(bool)
		if !ok {
			return nil, false
		}
		return iceberg.NewLiteral(b), true
	case iceberg.StringType:
		// Strings order byte-wise in the lake bounds (Iceberg) and in
		// mink (collation C).
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		return iceberg.NewLiteral(s), true
	case iceberg.DateType:
		d, ok := v.(arrow.Date32)
		if !ok {
			return nil, false
		}
		return iceberg.NewLiteral(iceberg.Date(d)), true
	case iceberg.TimestampType, iceberg.TimestampTzType:
		ts, ok := v.(arrow.Timestamp)
		if !ok {
			return nil, false
		}
		return iceberg.NewLiteral(iceberg.Timestamp(ts)), true
	}
	return nil, false
}

// missingMeets reports whether the missing value of column c (the value of
// every row of a lake file written before c was added; NULL when
// c.Missing is nil) meets p. known is false when it cannot tell (a type
// or value Predicate does not use): the file is then read without p.
func missingMeets(c sqltypes.Column, p Predicate) (meets, known bool) {
	if c.Missing == nil {
		return p.Op == PredIsNull, true
	}
	switch p.Op {
	case PredIsNull:
		return false, true
	case PredNotNull:
		return true, true
	}
	one, err := sqltypes.FillArray(c.Type, c.Missing, 1, nil)
	if err != nil {
		return false, false
	}
	defer one.Release()
	if one.IsNull(0) {
		return false, true
	}
	v, ok := PredicateValue(one)
	if !ok {
		return false, false
	}
	cmpTo := func(x any) (int, bool) {
		switch a := v.(type) {
		case int64:
			b, ok := x.(int64)
			return cmpOrdered(a, b), ok
		case string:
			b, ok := x.(string)
			return strings.Compare(a, b), ok
		case arrow.Date32:
			b, ok := x.(arrow.Date32)
			return cmpOrdered(a, b), ok
		case arrow.Timestamp:
			b, ok := x.(arrow.Timestamp)
			return cmpOrdered(a, b), ok
		case bool:
			b, ok := x.(bool)
			if !ok || p.Op != PredEq && p.Op != PredIn {
				return 0, false
			}
			if a == b {
				return 0, true
			}
			return 1, true
		}
		return 0, false
	}
	if p.Op == PredIn {
		for _, x := range p.Values {
			order, ok := cmpTo(x)
			if !ok {
				return false, false
			}
			if order == 0 {
				return true, true
			}
		}
		return false, true
	}
	if len(p.Values) != 1 {
		return false, false
	}
	order, ok := cmpTo(p.Values[0])
	if !ok {
		return false, false
	}
	switch p.Op {
	case PredEq:
		return order == 0, true
	case PredLt:
		return order < 0, true
	case PredLe:
		return order <= 0, true
	case PredGt:
		return order > 0, true
	case PredGe:
		return order >= 0, true
	}
	return false, false
}

func cmpOrdered[T ~int64 | ~int32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PredicateValue is the value of a, an array of one non-null value, as a
// Predicate on its column holds it (see Predicate); false for a null, an
// array of another length, or a type Predicate does not use.
func PredicateValue(a arrow.Array) (any, bool) {
	if a.Len() != 1 || a.IsNull(0) {
		return nil, false
	}
	switch col := a.(type) {
	case *array.Int16:
		return int64(col.Value(0)), true
	case *array.Int32:
		return int64(col.Value(0)), true
	case *array.Int64:
		return col.Value(0), true
	case *array.Boolean:
		return col.Value(0), true
	case *array.String:
		return strings.Clone(col.Value(0)), true
	case *array.Date32:
		return col.Value(0), true
	case *array.Timestamp:
		if col.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
			return nil, false
		}
		return col.Value(0), true
	}
	return nil, false
}
