package sqlfront

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
)

// Constants are evaluated in one place: the engine casts them to the
// column's type in a one-row query, and Conform checks the result the way
// it checks stored values. Pruning, lake filters and partition bounds take
// the Arrow form (evalConstants); COPY's defaults and primary-key lookups
// take the Go value rows carry (constantValue, which is evalConstants read
// with engine.GoValue).

// evalConstants evaluates expressions (constants, or $n of args) as typ in
// the engine, the way a comparison with a column of typ reads them, in one
// query, and returns them as one row of typ's Arrow form, a column per
// expression. It is how pruning and lake filters turn the values in a
// WHERE clause into the values stored rows are compared with; what names
// them in conversion errors.
func (s *session) evalConstants(ctx context.Context, what string, typ sqltypes.Type, exprs []string, args []any) (arrow.RecordBatch, error) {
	items := make([]string, len(exprs))
	cols := make([]sqltypes.Column, len(exprs))
	for i, e := range exprs {
		name := "v" + strconv.Itoa(i)
		items[i] = "CAST(" + e + " AS " + typ.DuckDBType() + ") AS " + name
		cols[i] = sqltypes.Column{Name: name, Type: typ}
	}
	query := "SELECT " + strings.Join(items, ", ")
	rdr, err := s.conn.QueryArrow(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if rec.NumRows() != 1 || int(rec.NumCols()) != len(exprs) {
			return nil, fmt.Errorf("constants query %s returned %d rows of %d columns", query, rec.NumRows(), rec.NumCols())
		}
		return sqltypes.Conform(what, cols, rec, nil)
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("constants query %s returned no row", query)
}

// constantValue evaluates a constant expression as typ, giving the Go value
// a row of the engine carries for a column of that type (engine.GoValue),
// which rowsToRecord stores and a key lookup encodes.
func (s *session) constantValue(ctx context.Context, what, expr string, typ sqltypes.Type) (any, error) {
	rec, err := s.evalConstants(ctx, what, typ, []string{expr}, nil)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return engine.GoValue(rec.Column(0), 0, typ), nil
}
