package kv

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
)

// The encodings (keys, rows, changelog entries) live in kv/kvcodec, which
// does not depend on pebble, so that clients can encode keys without the
// storage engine. These names keep kv's API.

type (
	// Codec is kvcodec.Codec.
	Codec = kvcodec.Codec
	// RowBuilder is kvcodec.RowBuilder.
	RowBuilder = kvcodec.RowBuilder
	// ChangeType is kvcodec.ChangeType.
	ChangeType = kvcodec.ChangeType
	// ChangeRecord is kvcodec.ChangeRecord.
	ChangeRecord = kvcodec.ChangeRecord
	// WriteOp is kvcodec.WriteOp.
	WriteOp = kvcodec.WriteOp
	// Write is kvcodec.Write.
	Write = kvcodec.Write
)

// Change types.
const (
	Insert       = kvcodec.Insert
	UpdateBefore = kvcodec.UpdateBefore
	UpdateAfter  = kvcodec.UpdateAfter
	Delete       = kvcodec.Delete
)

// Write ops.
const (
	OpInsert         = kvcodec.OpInsert
	OpInsertIfAbsent = kvcodec.OpInsertIfAbsent
	OpUpsert         = kvcodec.OpUpsert
	OpUpdate         = kvcodec.OpUpdate
	OpDelete         = kvcodec.OpDelete
)

// ChangeTypeColumn is kvcodec.ChangeTypeColumn.
const ChangeTypeColumn = kvcodec.ChangeTypeColumn

var (
	// ErrNullKey is kvcodec.ErrNullKey.
	ErrNullKey = kvcodec.ErrNullKey
	// ErrBadRow is kvcodec.ErrBadRow.
	ErrBadRow = kvcodec.ErrBadRow
	// ErrNewerColumns is kvcodec.ErrNewerColumns.
	ErrNewerColumns = kvcodec.ErrNewerColumns
)

// NewCodec is kvcodec.NewCodec.
func NewCodec(schema *arrow.Schema, keyCols []int) (*Codec, error) {
	return kvcodec.NewCodec(schema, keyCols)
}

// NewTableCodec is kvcodec.NewTableCodec.
func NewTableCodec(cols []sqltypes.Column, created int, keyCols []int) (*Codec, error) {
	return kvcodec.NewTableCodec(cols, created, keyCols)
}

// DecodeChangesBatch is kvcodec.DecodeChangesBatch.
func DecodeChangesBatch(payload []byte) (arrow.RecordBatch, error) {
	return kvcodec.DecodeChangesBatch(payload)
}
