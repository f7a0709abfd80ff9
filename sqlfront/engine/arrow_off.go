//go:build !duckdb_arrow

package engine

import (
	"github.com/apache/arrow-go/v18/arrow"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// See arrow_on.go.

const arrowEnabled = false

type convertedSchema struct{}

func schemaFromArrow(duck.Connection, *arrow.Schema) (convertedSchema, error) {
	return convertedSchema{}, errNoArrow
}

func destroyConvertedSchema(*convertedSchema) {}

func chunkFromArrow(duck.Connection, arrow.RecordBatch, convertedSchema) (duck.DataChunk, error) {
	return duck.DataChunk{}, errNoArrow
}

func chunkToArrow(duck.ArrowOptions, *arrow.Schema, duck.DataChunk) (arrow.RecordBatch, error) {
	return nil, errNoArrow
}

func arrowSchema(duck.ArrowOptions, []duck.LogicalType, []string) (*arrow.Schema, error) {
	return nil, errNoArrow
}
