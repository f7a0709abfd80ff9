package kvcodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/sqltypes"
)

// The first byte of an encoded row (docs/format/kv.md).
const (
	// rowFormatV1 rows hold exactly the table's created columns and do not
	// say how many that is: the codec knows (Codec.created).
	rowFormatV1 = 1
	// rowFormatV2 rows start with their column count (a uvarint): any
	// prefix of the table's columns that includes the created ones.
	rowFormatV2 = 2
)

var (
	// ErrNullKey: a primary-key column of a row is null.
	ErrNullKey = errors.New("null value in a primary-key column")
	// ErrBadRow: an encoded row or changelog payload does not decode.
	ErrBadRow = errors.New("malformed encoded row")
	// ErrNewerColumns: a row, batch or changelog entry holds more columns
	// than the codec's table: it was written by a node that has learned of
	// an added column (ALTER TABLE … ADD COLUMN) this codec predates. A
	// codec built from a newer catalog view reads it.
	ErrNewerColumns = errors.New("more columns than this codec's table has")
)

// Codec encodes the rows of one table schema: primary keys into
// order-preserving byte strings (the tablet's keys) and whole rows into a
// compact per-row form (the tablet's values), and decodes rows back into
// Arrow builders. docs/format/kv.md specifies both encodings.
//
// A table's columns only grow, at the end (ALTER TABLE … ADD COLUMN), so
// every row, batch and changelog entry stored for it holds a prefix of its
// current columns, at least the created ones. A codec encodes such a
// prefix as it is and decodes one by filling the columns it lacks with
// their missing values (NewTableCodec).
//
// A dropped column (ALTER TABLE … DROP COLUMN) keeps its place in the
// stored rows and changelog entries: the codec encodes and decodes them
// with every stored column, and its Arrow side, Schema, has the others
// only (the visible columns). Rows a codec encodes hold NULL in the
// dropped columns; the values older rows hold there are skipped.
//
// A Codec is immutable and safe for concurrent use.
type Codec struct {
	// schema and clSchema are the stored columns' (dropped ones
	// included), as rows and changelog entries hold them; visible and
	// clVisible the Arrow side's. They are the same without dropped
	// columns.
	schema    *arrow.Schema
	visible   *arrow.Schema
	clVisible *arrow.Schema
	// visOf maps a stored column to its index in visible, -1 for a
	// dropped one; nil without dropped columns. visCreated is the number
	// of created columns that are visible.
	visOf      []int
	visCreated int
	keyCols    []int // stored indexes
	cols       []*valueCodec
	gos        []*goCodec // the Go-value side of cols (codec_values.go)
	// created is the number of columns the table was created with: the
	// columns of a format-1 row.
	created int
	// missing[i], for an added column i (i >= created), is the row
	// encoding of the value rows stored without the column read as; nil
	// means NULL.
	missing  [][]byte
	clSchema *arrow.Schema
}

// NewCodec returns the codec of schema whose primary key is the columns
// keyCols, in key order, for a table that has all of schema's columns
// since it was created (none added). Every column type must be encodable
// (the types of docs/sql-types.md, lists of them, and the other
// fixed-width Arrow primitives), and every key column a non-list type.
func NewCodec(schema *arrow.Schema, keyCols []int) (*Codec, error) {
	return newCodec(schema, keyCols, schema.NumFields())
}

// NewTableCodec returns the codec of a table whose columns are cols
// (schema sqltypes.Schema(cols)), whose first created columns are those it
// was created with and the rest added later, and whose primary key is the
// columns keyCols, in key order. Rows stored without an added column read
// as its Missing value (nil: NULL). A key column is a created column.
func NewTableCodec(cols []sqltypes.Column, created int, keyCols []int) (*Codec, error) {
	if created < 1 || created > len(cols) {
		return nil, fmt.Errorf("kv: codec: %d created columns of %d", created, len(cols))
	}
	stored := slices.Clone(cols)
	for i := range stored {
		stored[i].Dropped = false
	}
	c, err := newCodec(sqltypes.Schema(stored), keyCols, created)
	if err != nil {
		return nil, err
	}
	for _, k := range keyCols {
		if k >= created {
			return nil, fmt.Errorf("kv: codec: key column %q was added to the table, not created with it", cols[k].Name)
		}
		if cols[k].Dropped {
			return nil, fmt.Errorf("kv: codec: key column %q was dropped", cols[k].Name)
		}
	}
	if visible := sqltypes.Visible(cols); len(visible) < len(cols) {
		c.visible = sqltypes.Schema(visible)
		c.clVisible = changelogSchema(c.visible)
		c.visOf = make([]int, len(cols))
		v := 0
		for i, col := range cols {
			c.visOf[i] = -1
			if !col.Dropped {
				c.visOf[i] = v
				v++
			}
		}
		c.visCreated = 0
		for i := range created {
			if !cols[i].Dropped {
				c.visCreated++
			}
		}
	}
	for i := created; i < len(cols); i++ {
		if cols[i].Missing == nil {
			continue
		}
		arr, err := sqltypes.FillArray(cols[i].Type, cols[i].Missing, 1, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("kv: codec: column %q: %w", cols[i].Name, err)
		}
		if !arr.IsNull(0) {
			c.missing[i] = c.cols[i].encode([]byte{}, arr, 0)
		}
		arr.Release()
	}
	return c, nil
}

func newCodec(schema *arrow.Schema, keyCols []int, created int) (*Codec, error) {
	if len(keyCols) == 0 {
		return nil, fmt.Errorf("kv: codec: no primary-key columns")
	}
	c := &Codec{schema: schema, keyCols: slices.Clone(keyCols), created: created, missing: make([][]byte, schema.NumFields())}
	for _, f := range schema.Fields() {
		vc, err := newValueCodec(f.Type)
		if err != nil {
			return nil, fmt.Errorf("kv: codec: column %q: %w", f.Name, err)
		}
		gc, err := newGoCodec(f.Type)
		if err != nil {
			return nil, fmt.Errorf("kv: codec: column %q: %w", f.Name, err)
		}
		c.cols = append(c.cols, vc)
		c.gos = append(c.gos, gc)
	}
	seen := map[int]bool{}
	for _, k := range keyCols {
		if k < 0 || k >= len(c.cols) {
			return nil, fmt.Errorf("kv: codec: key column %d out of range (schema has %d columns)", k, len(c.cols))
		}
		if seen[k] {
			return nil, fmt.Errorf("kv: codec: key column %q listed twice", schema.Field(k).Name)
		}
		seen[k] = true
		if c.cols[k].key == nil {
			return nil, fmt.Errorf("kv: codec: a %s column (%q) cannot be part of a primary key", schema.Field(k).Type, schema.Field(k).Name)
		}
	}
	for _, f := range schema.Fields() {
		if f.Name == ChangeTypeColumn {
			return nil, fmt.Errorf("kv: codec: column name %q is reserved for the changelog", ChangeTypeColumn)
		}
	}
	c.clSchema = changelogSchema(schema)
	c.visible, c.clVisible, c.visCreated = schema, c.clSchema, created
	return c, nil
}

// changelogSchema is ChangeTypeColumn, then the fields of schema.
func changelogSchema(schema *arrow.Schema) *arrow.Schema {
	fields := append([]arrow.Field{{Name: ChangeTypeColumn, Type: arrow.BinaryTypes.String}}, schema.Fields()...)
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// Schema is the table schema: its visible columns (the dropped ones left
// out), which the Arrow side of the codec (AppendKey, AppendRow, Writes,
// DecodeRows, DecodeValues' indexes) uses.
func (c *Codec) Schema() *arrow.Schema { return c.visible }

// StoredSchema is the schema of the columns rows and changelog entries
// hold: Schema with the dropped columns at their places.
func (c *Codec) StoredSchema() *arrow.Schema { return c.schema }

// NumColumns is the number of the table's stored columns (the dropped
// ones included): the most a row or changelog entry can hold.
func (c *Codec) NumColumns() int { return len(c.cols) }

// Created is the number of columns the table was created with: the first
// Created columns; the others were added later.
func (c *Codec) Created() int { return c.created }

// KeyColumns are the primary-key column indexes in Schema, in key order.
func (c *Codec) KeyColumns() []int {
	out := slices.Clone(c.keyCols)
	if c.visOf != nil {
		for i, k := range out {
			out[i] = c.visOf[k]
		}
	}
	return out
}

// at is the index in a batch laid out as layout (nil: the stored columns,
// or Codec.visOf: the visible ones) of stored column n, -1 if the batch
// lacks it (a dropped column).
func at(layout []int, n int) int {
	if layout == nil {
		return n
	}
	return layout[n]
}

// AppendKey appends the encoded primary key of row i of rec (which has the
// codec's schema) to dst. Keys compare bytewise in the order of their column
// values (docs/format/kv.md lists the few exceptions).
func (c *Codec) AppendKey(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	return c.appendKey(dst, rec.Columns(), 0, i, c.visOf)
}

// AppendKeyOf appends the encoded primary key of row i of keys, which holds
// one array per primary-key column, in key order. A point lookup that knows
// only the key values (bound parameters) builds one-row arrays and calls
// this.
func (c *Codec) AppendKeyOf(dst []byte, keys []arrow.Array, i int) ([]byte, error) {
	if len(keys) != len(c.keyCols) {
		return nil, fmt.Errorf("kv: key has %d columns, the primary key %d", len(keys), len(c.keyCols))
	}
	for n, k := range c.keyCols {
		if !arrow.TypeEqual(keys[n].DataType(), c.schema.Field(k).Type) {
			return nil, fmt.Errorf("kv: key column %q: got %s, want %s", c.schema.Field(k).Name, keys[n].DataType(), c.schema.Field(k).Type)
		}
		if keys[n].IsNull(i) {
			return nil, fmt.Errorf("kv: key column %q: %w", c.schema.Field(k).Name, ErrNullKey)
		}
		dst = c.cols[k].key(dst, keys[n], i)
	}
	return dst, nil
}

// appendKey encodes the key of row i of cols[off:], which are laid out as
// layout says (at).
func (c *Codec) appendKey(dst []byte, cols []arrow.Array, off, i int, layout []int) ([]byte, error) {
	for _, k := range c.keyCols {
		arr := cols[off+at(layout, k)]
		if arr.IsNull(i) {
			return nil, fmt.Errorf("kv: key column %q: %w", c.schema.Field(k).Name, ErrNullKey)
		}
		dst = c.cols[k].key(dst, arr, i)
	}
	return dst, nil
}

// AppendRow appends the encoded row i of rec to dst. rec has the codec's
// schema, or a prefix of it that includes the created columns (a batch
// made before columns were added): the row then holds rec's columns only,
// and reads with the missing values of the others.
func (c *Codec) AppendRow(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	if err := c.checkPrefix(rec.Schema(), 0, c.visOf); err != nil {
		return nil, err
	}
	return c.appendRow(dst, rec.Columns(), 0, i, c.visOf), nil
}

// Writes returns one write of op per row of rec (which has the codec's
// schema or a prefix of it, as in AppendRow), in row order: the batch a
// statement hands to Changes. The keys and rows share one allocation. For
// OpDelete only the keys are encoded.
func (c *Codec) Writes(op WriteOp, rec arrow.RecordBatch) ([]Write, error) {
	if err := c.checkPrefix(rec.Schema(), 0, c.visOf); err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	cols := rec.Columns()
	writes := make([]Write, n)
	spans := make([][3]int, n)
	var buf []byte
	for i := range n {
		k0 := len(buf)
		var err error
		if buf, err = c.appendKey(buf, cols, 0, i, c.visOf); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		k1 := len(buf)
		if op != OpDelete {
			buf = c.appendRow(buf, cols, 0, i, c.visOf)
		}
		spans[i] = [3]int{k0, k1, len(buf)}
	}
	for i, sp := range spans {
		writes[i] = Write{Op: op, Key: buf[sp[0]:sp[1]:sp[1]]}
		if op != OpDelete {
			writes[i].Row = buf[sp[1]:sp[2]:sp[2]]
		}
	}
	return writes, nil
}

// appendRow encodes row i of cols[off:], a prefix of the table's columns
// laid out as layout says (at; checkPrefix): in format 1 when it holds
// exactly the created columns, so that a table never altered keeps the
// encoding it always had, and in format 2, with its column count,
// otherwise. A dropped column is NULL.
func (c *Codec) appendRow(dst []byte, cols []arrow.Array, off, i int, layout []int) []byte {
	ncols := c.storedColumns(len(cols)-off, layout)
	if ncols == c.created {
		dst = append(dst, rowFormatV1)
	} else {
		dst = append(dst, rowFormatV2)
		dst = binary.AppendUvarint(dst, uint64(ncols))
	}
	bitmap := len(dst)
	dst = append(dst, make([]byte, (ncols+7)/8)...)
	for n, vc := range c.cols[:ncols] {
		j := at(layout, n)
		if j < 0 || cols[off+j].IsNull(i) {
			dst[bitmap+n/8] |= 1 << (n % 8)
			continue
		}
		dst = vc.encode(dst, cols[off+j], i)
	}
	return dst
}

// storedColumns is the number of stored columns a row of the first k
// columns of a batch laid out as layout holds: k itself for the stored
// layout; for the visible one, every stored column when k is all of
// them, else the stored columns before the next visible one (dropped
// columns in between are NULL), at least the created ones.
func (c *Codec) storedColumns(k int, layout []int) int {
	if layout == nil {
		return k
	}
	if k == c.visible.NumFields() {
		return len(c.cols)
	}
	for n, v := range layout {
		if v == k {
			return max(n, c.created)
		}
	}
	return len(c.cols)
}

// checkPrefix checks that the fields of s from off on have the types of a
// prefix of the table's columns that includes the created ones: its
// stored columns (layout nil) or its visible ones (Codec.visOf).
func (c *Codec) checkPrefix(s *arrow.Schema, off int, layout []int) error {
	if layout != nil {
		return checkSchemaPrefix(s, off, c.visible, c.visCreated)
	}
	return checkSchemaPrefix(s, off, c.schema, c.created)
}

// checkSchemaPrefix checks that the fields of s from off on have the types
// of a prefix of table's fields of at least created fields.
func checkSchemaPrefix(s *arrow.Schema, off int, table *arrow.Schema, created int) error {
	n := s.NumFields() - off
	if n > table.NumFields() {
		return fmt.Errorf("kv: %w: a batch of %d columns for a table of %d", ErrNewerColumns, n, table.NumFields())
	}
	if n < created {
		return fmt.Errorf("kv: batch schema %s does not match the table schema %s: %d columns, the table was created with %d", s, table, n, created)
	}
	for i := range n {
		if !arrow.TypeEqual(s.Field(off+i).Type, table.Field(i).Type) {
			return fmt.Errorf("kv: batch schema %s does not match the table schema %s: column %d is %s, want %s", s, table, i, s.Field(off+i).Type, table.Field(i).Type)
		}
	}
	return nil
}

// rowParts splits an encoded row into its column count, null bitmap
// (ceil(ncols/8) bytes) and values.
func (c *Codec) rowParts(row []byte) (ncols int, bitmap, values []byte, err error) {
	if len(row) == 0 {
		return 0, nil, nil, fmt.Errorf("kv: %w: empty row", ErrBadRow)
	}
	rest := row[1:]
	switch row[0] {
	case rowFormatV1:
		ncols = c.created
	case rowFormatV2:
		n, w := binary.Uvarint(rest)
		switch {
		case w <= 0:
			return 0, nil, nil, fmt.Errorf("kv: %w: row column count", ErrBadRow)
		case n > uint64(len(c.cols)):
			return 0, nil, nil, fmt.Errorf("kv: %w: a row of %d columns for a table of %d", ErrNewerColumns, n, len(c.cols))
		case n < uint64(c.created):
			return 0, nil, nil, fmt.Errorf("kv: %w: a row of %d columns, the table was created with %d", ErrBadRow, n, c.created)
		}
		ncols, rest = int(n), rest[w:]
	default:
		return 0, nil, nil, fmt.Errorf("kv: %w: row format %d", ErrBadRow, row[0])
	}
	nb := (ncols + 7) / 8
	if len(rest) < nb {
		return 0, nil, nil, fmt.Errorf("kv: %w: %d bytes, too short for the null bitmap", ErrBadRow, len(row))
	}
	return ncols, rest[:nb], rest[nb:], nil
}

// RowColumns returns the number of columns an encoded row holds: the
// created columns for a format-1 row, its count for a format-2 row. The
// count may exceed NumColumns: the row was then written with columns this
// codec predates, and the codec cannot read it (ErrNewerColumns).
func (c *Codec) RowColumns(row []byte) (int, error) {
	if len(row) == 0 {
		return 0, fmt.Errorf("kv: %w: empty row", ErrBadRow)
	}
	switch row[0] {
	case rowFormatV1:
		return c.created, nil
	case rowFormatV2:
		n, w := binary.Uvarint(row[1:])
		if w <= 0 || n > 1<<31 {
			return 0, fmt.Errorf("kv: %w: row column count", ErrBadRow)
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("kv: %w: row format %d", ErrBadRow, row[0])
}

// decodeRow appends the encoded row to builders, which are laid out as
// layout says (at: the stored columns, or the visible ones, when the
// dropped columns' values are skipped); the columns the row lacks get
// their missing values. On error the builders may hold a partial row;
// the caller discards them.
func (c *Codec) decodeRow(builders []array.Builder, row []byte, layout []int) error {
	ncols, bitmap, src, err := c.rowParts(row)
	if err != nil {
		return err
	}
	for n, vc := range c.cols[:ncols] {
		j := at(layout, n)
		null := bitmap[n/8]&(1<<(n%8)) != 0
		switch {
		case j < 0 && null:
		case j < 0:
			if src, err = c.gos[n].skip(src); err != nil {
				return fmt.Errorf("kv: column %q: %w", c.schema.Field(n).Name, err)
			}
		case null:
			builders[j].AppendNull()
		default:
			if src, err = vc.decode(builders[j], src); err != nil {
				return fmt.Errorf("kv: column %q: %w", c.schema.Field(n).Name, err)
			}
		}
	}
	if len(src) != 0 {
		return fmt.Errorf("kv: %w: %d trailing bytes", ErrBadRow, len(src))
	}
	for n := ncols; n < len(c.cols); n++ {
		if j := at(layout, n); j >= 0 {
			c.appendMissing(builders[j], n)
		}
	}
	return nil
}

// appendMissing appends column n's missing value to b.
func (c *Codec) appendMissing(b array.Builder, n int) {
	if c.missing[n] == nil {
		b.AppendNull()
		return
	}
	if _, err := c.cols[n].decode(b, c.missing[n]); err != nil {
		// NewTableCodec encoded it.
		panic(fmt.Sprintf("kv: the missing value %x of column %q does not decode: %v", c.missing[n], c.schema.Field(n).Name, err))
	}
}

// EqualRows reports whether two encoded rows hold the same values when the
// codec reads them: a row stored before columns were added (narrower, or
// in format 1) equals its re-encoding with the columns' missing values,
// and the values of dropped columns do not count. A conditional write
// (Write.CheckRow) compares rows with it.
func (c *Codec) EqualRows(a, b []byte) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	ca, err := c.canonical(nil, a)
	if err != nil {
		return false, err
	}
	cb, err := c.canonical(nil, b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

// canonical appends the null bitmap and values that row has when read with
// all of the codec's columns (the missing values filled in): equal values
// give equal bytes.
func (c *Codec) canonical(dst, row []byte) ([]byte, error) {
	ncols, bitmap, values, err := c.rowParts(row)
	if err != nil {
		return nil, err
	}
	start := len(dst)
	dst = append(dst, make([]byte, (len(c.cols)+7)/8)...)
	for n := range len(c.cols) {
		if (n < ncols && bitmap[n/8]&(1<<(n%8)) != 0) || (n >= ncols && c.missing[n] == nil) || at(c.visOf, n) < 0 {
			dst[start+n/8] |= 1 << (n % 8)
		}
	}
	if c.visOf == nil {
		dst = append(dst, values...)
	} else {
		// The values of the visible columns only.
		for n := range ncols {
			if bitmap[n/8]&(1<<(n%8)) != 0 {
				continue
			}
			rest, err := c.gos[n].skip(values)
			if err != nil {
				return nil, fmt.Errorf("kv: column %q: %w", c.schema.Field(n).Name, err)
			}
			if c.visOf[n] >= 0 {
				dst = append(dst, values[:len(values)-len(rest)]...)
			}
			values = rest
		}
	}
	for n := ncols; n < len(c.cols); n++ {
		if at(c.visOf, n) >= 0 {
			dst = append(dst, c.missing[n]...)
		}
	}
	return dst, nil
}

// RowBuilder turns encoded rows back into an Arrow record batch of the
// table schema. Not safe for concurrent use.
type RowBuilder struct {
	c *Codec
	b *array.RecordBuilder
}

// NewRowBuilder returns an empty builder. Release it when done.
func (c *Codec) NewRowBuilder(mem memory.Allocator) *RowBuilder {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &RowBuilder{c: c, b: array.NewRecordBuilder(mem, c.visible)}
}

// Append appends one encoded row. After an error the builder is unusable.
func (rb *RowBuilder) Append(row []byte) error { return rb.c.decodeRow(rb.b.Fields(), row, rb.c.visOf) }

// Len is the number of rows appended since the last NewRecordBatch.
func (rb *RowBuilder) Len() int {
	if len(rb.b.Fields()) == 0 {
		return 0
	}
	return rb.b.Field(0).Len()
}

// NewRecordBatch returns the rows appended so far and resets the builder.
func (rb *RowBuilder) NewRecordBatch() arrow.RecordBatch { return rb.b.NewRecordBatch() }

// Release releases the builder.
func (rb *RowBuilder) Release() { rb.b.Release() }

// DecodeRows returns the encoded rows as one record batch.
func (c *Codec) DecodeRows(mem memory.Allocator, rows [][]byte) (arrow.RecordBatch, error) {
	rb := c.NewRowBuilder(mem)
	defer rb.Release()
	for i, row := range rows {
		if err := rb.Append(row); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	return rb.NewRecordBatch(), nil
}
