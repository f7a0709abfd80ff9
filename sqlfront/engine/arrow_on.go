//go:build duckdb_arrow

package engine

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// This file and arrow_off.go are the only code that depends on the
// duckdb_arrow build tag, which compiles DuckDB's Arrow C interface into
// duckdb-go-bindings. Without the tag the package still builds (so that
// `go build ./...` and `go vet ./...` work everywhere), but Open fails.

const arrowEnabled = true

type convertedSchema = duck.ArrowConvertedSchema

// errorData turns a DuckDB error_data into a Go error and destroys it.
func errorData(ed duck.ErrorData) error {
	if ed.Ptr == nil {
		return nil
	}
	defer duck.DestroyErrorData(&ed)
	if !duck.ErrorDataHasError(ed) {
		return nil
	}
	return errors.New(duck.ErrorDataMessage(ed))
}

// schemaFromArrow prepares the conversion of batches of schema s into
// DuckDB data chunks. The result must be destroyed with
// destroyConvertedSchema.
func schemaFromArrow(conn duck.Connection, s *arrow.Schema) (convertedSchema, error) {
	cs, ed := duck.SchemaFromArrow(conn, s)
	if err := errorData(ed); err != nil {
		duck.DestroyArrowConvertedSchema(&cs)
		return convertedSchema{}, err
	}
	return cs, nil
}

func destroyConvertedSchema(cs *convertedSchema) { duck.DestroyArrowConvertedSchema(cs) }

// chunkFromArrow converts a batch of at most duck.VectorSize() rows into a
// DuckDB data chunk, which must be destroyed with duck.DestroyDataChunk.
func chunkFromArrow(conn duck.Connection, rec arrow.RecordBatch, cs convertedSchema) (duck.DataChunk, error) {
	chunk, ed := duck.DataChunkFromArrow(conn, rec, cs)
	if err := errorData(ed); err != nil {
		duck.DestroyDataChunk(&chunk)
		return duck.DataChunk{}, err
	}
	return chunk, nil
}

// chunkToArrow converts a result chunk into a batch of schema.
func chunkToArrow(opts duck.ArrowOptions, schema *arrow.Schema, chunk duck.DataChunk) (arrow.RecordBatch, error) {
	rec, ed := duck.DataChunkToArrowArray(opts, schema, chunk)
	if err := errorData(ed); err != nil {
		if rec != nil {
			rec.Release()
		}
		return nil, err
	}
	return rec, nil
}

// arrowSchema returns the Arrow schema DuckDB produces for result columns.
func arrowSchema(opts duck.ArrowOptions, types []duck.LogicalType, names []string) (*arrow.Schema, error) {
	s, ed := duck.NewArrowSchema(opts, types, names)
	if err := errorData(ed); err != nil {
		return nil, err
	}
	return s, nil
}
