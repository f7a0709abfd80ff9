package engine

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/internal/sqltypes"
)

// GoValue returns row i of a as the Go value Rows.Values gives for a column
// of type t (see Rows). The point-lookup path of primary-key tables uses it
// to answer without running a statement, with the same values.
func GoValue(a arrow.Array, i int, t sqltypes.Type) any { return goValue(a, i, t) }
