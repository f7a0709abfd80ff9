package kvcodec

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The test table, as in kv's model tests: id bigint, name text (the
// primary key is (id, name)), v text, n bigint; v and n nullable.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func testCodec(t testing.TB) *Codec {
	c, err := NewCodec(testSchema, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testRow is a row of testSchema; nil pointers are nulls.
type testRow struct {
	id   int64
	name string
	v    *string
	n    *int64
}

func ptr[T any](v T) *T { return &v }

// encodeRows returns the keys and encoded rows of rows.
func encodeRows(t testing.TB, c *Codec, rows ...testRow) (keys, encoded [][]byte) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.name)
		if r.v == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(*r.v)
		}
		if r.n == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Int64Builder).Append(*r.n)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for i := range rows {
		k, err := c.AppendKey(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.AppendRow(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		keys, encoded = append(keys, k), append(encoded, v)
	}
	return keys, encoded
}
