package catalog

import (
	"fmt"

	"github.com/minkdb/mink/internal/sqltypes"
)

// SQLColumns returns the table's stored columns (StoredColumns) with their
// SQL types parsed: what a reader widens a stored batch or row with
// (sqltypes.Widen, which leaves the Dropped ones out) and a writer pads
// one with (sqltypes.Pad). sqltypes.Visible of the result are the columns
// users see, Spec.Columns.
func (s TableSpec) SQLColumns() ([]sqltypes.Column, error) {
	stored := s.StoredColumns()
	cols := make([]sqltypes.Column, len(stored))
	for i, c := range stored {
		typ, err := sqltypes.Parse(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		cols[i] = sqltypes.Column{Name: c.Name, Type: typ, NotNull: c.NotNull, Missing: c.Missing, Dropped: c.Dropped}
	}
	return cols, nil
}
