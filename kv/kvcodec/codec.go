package kvcodec

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowFormatV1 is the first byte of every encoded row (docs/format/kv.md).
const rowFormatV1 = 1

var (
	// ErrNullKey: a primary-key column of a row is null.
	ErrNullKey = errors.New("null value in a primary-key column")
	// ErrBadRow: an encoded row or changelog payload does not decode.
	ErrBadRow = errors.New("malformed encoded row")
)

// Codec encodes the rows of one table schema: primary keys into
// order-preserving byte strings (the tablet's keys) and whole rows into a
// compact per-row form (the tablet's values), and decodes rows back into
// Arrow builders. docs/format/kv.md specifies both encodings.
//
// A Codec is immutable and safe for concurrent use.
type Codec struct {
	schema   *arrow.Schema
	keyCols  []int
	cols     []*valueCodec
	gos      []*goCodec // the Go-value side of cols (codec_values.go)
	clSchema *arrow.Schema
}

// NewCodec returns the codec of schema whose primary key is the columns
// keyCols, in key order. Every column type must be encodable (the types of
// docs/sql-types.md, lists of them, and the other fixed-width Arrow
// primitives), and every key column a non-list type.
func NewCodec(schema *arrow.Schema, keyCols []int) (*Codec, error) {
	if len(keyCols) == 0 {
		return nil, fmt.Errorf("kv: codec: no primary-key columns")
	}
	c := &Codec{schema: schema, keyCols: slices.Clone(keyCols)}
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
	fields := append([]arrow.Field{{Name: ChangeTypeColumn, Type: arrow.BinaryTypes.String}}, schema.Fields()...)
	md := schema.Metadata()
	c.clSchema = arrow.NewSchema(fields, &md)
	return c, nil
}

// Schema is the table schema.
func (c *Codec) Schema() *arrow.Schema { return c.schema }

// KeyColumns are the primary-key column indexes, in key order.
func (c *Codec) KeyColumns() []int { return slices.Clone(c.keyCols) }

// AppendKey appends the encoded primary key of row i of rec (which has the
// codec's schema) to dst. Keys compare bytewise in the order of their column
// values (docs/format/kv.md lists the few exceptions).
func (c *Codec) AppendKey(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	return c.appendKey(dst, rec.Columns(), 0, i)
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
// the table schema.
func (c *Codec) appendKey(dst []byte, cols []arrow.Array, off, i int) ([]byte, error) {
	for _, k := range c.keyCols {
		arr := cols[off+k]
		if arr.IsNull(i) {
			return nil, fmt.Errorf("kv: key column %q: %w", c.schema.Field(k).Name, ErrNullKey)
		}
		dst = c.cols[k].key(dst, arr, i)
	}
	return dst, nil
}

// AppendRow appends the encoded row i of rec (which has the codec's schema)
// to dst.
func (c *Codec) AppendRow(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	if !sameTypes(c.schema, rec.Schema()) {
		return nil, fmt.Errorf("kv: row schema %s does not match the table schema %s", rec.Schema(), c.schema)
	}
	return c.appendRow(dst, rec.Columns(), 0, i), nil
}

// Writes returns one write of op per row of rec (which has the codec's
// schema), in row order: the batch a statement hands to Changes. The keys
// and rows share one allocation. For OpDelete only the keys are encoded.
func (c *Codec) Writes(op WriteOp, rec arrow.RecordBatch) ([]Write, error) {
	if !sameTypes(c.schema, rec.Schema()) {
		return nil, fmt.Errorf("kv: batch schema %s does not match the table schema %s", rec.Schema(), c.schema)
	}
	n := int(rec.NumRows())
	cols := rec.Columns()
	writes := make([]Write, n)
	spans := make([][3]int, n)
	var buf []byte
	for i := range n {
		k0 := len(buf)
		var err error
		if buf, err = c.appendKey(buf, cols, 0, i); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		k1 := len(buf)
		if op != OpDelete {
			buf = c.appendRow(buf, cols, 0, i)
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

func (c *Codec) appendRow(dst []byte, cols []arrow.Array, off, i int) []byte {
	dst = append(dst, rowFormatV1)
	bitmap := len(dst)
	dst = append(dst, make([]byte, (len(c.cols)+7)/8)...)
	for n, vc := range c.cols {
		arr := cols[off+n]
		if arr.IsNull(i) {
			dst[bitmap+n/8] |= 1 << (n % 8)
			continue
		}
		dst = vc.encode(dst, arr, i)
	}
	return dst
}

// decodeRow appends the encoded row to builders, which are laid out as the
// table schema. On error the builders may hold a partial row; the caller
// discards them.
func (c *Codec) decodeRow(builders []array.Builder, row []byte) error {
	if len(row) == 0 || row[0] != rowFormatV1 {
		return fmt.Errorf("kv: %w: row format %v", ErrBadRow, row[:min(len(row), 1)])
	}
	nb := (len(c.cols) + 7) / 8
	if len(row) < 1+nb {
		return fmt.Errorf("kv: %w: %d bytes, too short for the null bitmap", ErrBadRow, len(row))
	}
	bitmap, src := row[1:1+nb], row[1+nb:]
	var err error
	for n, vc := range c.cols {
		if bitmap[n/8]&(1<<(n%8)) != 0 {
			builders[n].AppendNull()
			continue
		}
		if src, err = vc.decode(builders[n], src); err != nil {
			return fmt.Errorf("kv: column %q: %w", c.schema.Field(n).Name, err)
		}
	}
	if len(src) != 0 {
		return fmt.Errorf("kv: %w: %d trailing bytes", ErrBadRow, len(src))
	}
	return nil
}

// sameTypes reports whether a and b have the same column types (names and
// metadata aside), which is all the encodings depend on.
func sameTypes(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		if !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
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
	return &RowBuilder{c: c, b: array.NewRecordBuilder(mem, c.schema)}
}

// Append appends one encoded row. After an error the builder is unusable.
func (rb *RowBuilder) Append(row []byte) error { return rb.c.decodeRow(rb.b.Fields(), row) }

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
