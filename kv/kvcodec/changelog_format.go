package kvcodec

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/ipcbatch"
)

// ChangeTypeColumn is the first column of a changelog entry: the record's
// ChangeType as "+I", "-U", "+U" or "-D". A primary-key table cannot have a
// column of this name.
const ChangeTypeColumn = "_change_type"

// ChangelogSchema is the schema of a changelog batch on the Arrow side
// (ChangesBatch): ChangeTypeColumn (utf8, not null), then the table's
// visible columns (Schema).
func (c *Codec) ChangelogSchema() *arrow.Schema { return c.clVisible }

// StoredChangelogSchema is the schema of a changelog entry's record batch
// as stored (EncodeChanges, WidenChanges): ChangeTypeColumn, then the
// table's stored columns, the dropped ones included (StoredSchema).
func (c *Codec) StoredChangelogSchema() *arrow.Schema { return c.clSchema }

// EncodeChanges encodes records as the payload of one stream entry: an Arrow
// IPC stream holding one record batch of StoredChangelogSchema, one row per
// record in order (NULL in the dropped columns). The entry's count is len(records); record i has offset
// entry offset + i (docs/format/kv.md).
func (c *Codec) EncodeChanges(records []ChangeRecord) ([]byte, error) {
	rec, err := c.changesBatch(nil, records, c.clSchema, nil)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	payload, err := changesCodec.enc.Encode(nil, rec, c.clSchema)
	if err != nil {
		return nil, fmt.Errorf("kv: encode changes: %w", err)
	}
	return payload, nil
}

// changesCodec encodes and decodes changelog entries' IPC streams,
// keeping the schema messages it has seen (a table's changelog schema is
// the same for every entry).
var changesCodec struct {
	enc ipcbatch.Encoder
	dec ipcbatch.Decoder
}

// ChangesBatch returns records as a record batch of ChangelogSchema.
func (c *Codec) ChangesBatch(mem memory.Allocator, records []ChangeRecord) (arrow.RecordBatch, error) {
	return c.changesBatch(mem, records, c.clVisible, c.visOf)
}

// changesBatch returns records as a batch of schema, the changelog schema
// of the columns laid out as layout says (at).
func (c *Codec) changesBatch(mem memory.Allocator, records []ChangeRecord, schema *arrow.Schema, layout []int) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Reserve(len(records))
	types := b.Field(0).(*array.StringBuilder)
	cols := b.Fields()[1:]
	for i, r := range records {
		if r.Type < Insert || r.Type > Delete {
			return nil, fmt.Errorf("kv: encode changes: record %d: %s", i, r.Type)
		}
		types.Append(r.Type.String())
		if err := c.decodeRow(cols, r.Row, layout); err != nil {
			return nil, fmt.Errorf("kv: encode changes: record %d (%s): %w", i, r, err)
		}
	}
	return b.NewRecordBatch(), nil
}

// DecodeChanges decodes a changelog entry payload made by EncodeChanges back
// into records (with Write -1), computing each record's key and row from its
// columns.
func (c *Codec) DecodeChanges(payload []byte) ([]ChangeRecord, error) {
	rec, err := DecodeChangesBatch(payload)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return c.ChangesFromBatch(rec)
}

// DecodeChangesBatch returns the record batch of a changelog entry payload,
// as stored: ChangelogSchema of the table as it was when the entry was
// written (a prefix of today's columns; WidenChanges fills in the rest),
// one row per record. `t$changelog` reads these and adds the offsets
// (entry offset + row index).
func DecodeChangesBatch(payload []byte) (arrow.RecordBatch, error) {
	rec, err := changesCodec.dec.Decode(payload)
	if err != nil {
		return nil, fmt.Errorf("kv: decode changes: %w: %w", ErrBadRow, err)
	}
	return rec, nil
}

// ChangesFromBatch turns a record batch of ChangelogSchema into records.
// The batch may hold a prefix of the table's columns (an entry written
// before columns were added): the records' rows then hold those columns
// only, and read with the missing values of the others.
func (c *Codec) ChangesFromBatch(rec arrow.RecordBatch) ([]ChangeRecord, error) {
	if err := c.checkChanges(rec.Schema()); err != nil {
		return nil, err
	}
	types := rec.Column(0).(*array.String)
	cols := rec.Columns()
	n := int(rec.NumRows())
	out := make([]ChangeRecord, n)
	// One buffer for all keys and rows of the entry.
	var buf []byte
	spans := make([][3]int, n)
	for i := range n {
		t, ok := parseChangeType(types.Value(i))
		if types.IsNull(i) || !ok {
			return nil, fmt.Errorf("kv: decode changes: %w: record %d has change type %q", ErrBadRow, i, types.Value(i))
		}
		out[i].Type, out[i].Write = t, -1
		k0 := len(buf)
		var err error
		if buf, err = c.appendKey(buf, cols, 1, i, nil); err != nil {
			return nil, fmt.Errorf("kv: decode changes: record %d: %w", i, err)
		}
		k1 := len(buf)
		buf = c.appendRow(buf, cols, 1, i, nil)
		spans[i] = [3]int{k0, k1, len(buf)}
	}
	for i, sp := range spans {
		out[i].Key = buf[sp[0]:sp[1]:sp[1]]
		out[i].Row = buf[sp[1]:sp[2]:sp[2]]
	}
	return out, nil
}

// checkChanges checks that s is the schema of a changelog batch of the
// codec's table: ChangeTypeColumn, then a prefix of the table's columns.
func (c *Codec) checkChanges(s *arrow.Schema) error {
	if s.NumFields() == 0 || s.Field(0).Name != ChangeTypeColumn || !arrow.TypeEqual(s.Field(0).Type, arrow.BinaryTypes.String) {
		return fmt.Errorf("kv: decode changes: %w: schema %s, want %s", ErrBadRow, s, c.clSchema)
	}
	if err := c.checkPrefix(s, 1, nil); err != nil {
		if errors.Is(err, ErrNewerColumns) {
			return fmt.Errorf("kv: decode changes: %w", err)
		}
		return fmt.Errorf("kv: decode changes: %w: %w", ErrBadRow, err)
	}
	return nil
}

// WidenChanges returns rec, a changelog batch as stored (DecodeChangesBatch:
// the table's stored columns as of the write), as a batch of exactly
// StoredChangelogSchema: the columns added since are filled with their
// missing values; the dropped ones stay, under their stored names. A batch of more columns than the codec's table is an
// ErrNewerColumns error. The result is a new reference; release it and rec
// independently.
func (c *Codec) WidenChanges(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := c.checkChanges(rec.Schema()); err != nil {
		return nil, err
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if rec.Schema().Equal(c.clSchema) {
		rec.Retain()
		return rec, nil
	}
	k, n := int(rec.NumCols()), int(rec.NumRows())
	cols := make([]arrow.Array, c.clSchema.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i := range cols {
		if i < k {
			cols[i] = rec.Column(i)
			cols[i].Retain()
			continue
		}
		col := i - 1
		if c.missing[col] == nil {
			cols[i] = array.MakeArrayOfNull(mem, c.schema.Field(col).Type, n)
			continue
		}
		b := array.NewBuilder(mem, c.schema.Field(col).Type)
		b.Reserve(n)
		for range n {
			c.appendMissing(b, col)
		}
		cols[i] = b.NewArray()
		b.Release()
	}
	return array.NewRecordBatch(c.clSchema, cols, int64(n)), nil
}
