package tiering

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
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
