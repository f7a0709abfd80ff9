package kvcodec

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestListOfNullsLastColumn: a list with more NULL elements than the row
// has bytes left (its elements take only bitmap bits) decodes; it was
// refused as a malformed row.
func TestListOfNullsLastColumn(t *testing.T) {
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(1)
	lb := b.Field(1).(*array.ListBuilder)
	lb.Append(true)
	for range 40 {
		lb.ValueBuilder().AppendNull()
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	c, err := NewCodec(schema, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	row, err := c.AppendRow(nil, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.DecodeRows(mem, [][]byte{row})
	if err != nil {
		t.Fatalf("DecodeRows: %v", err)
	}
	defer got.Release()
	l := got.Column(1).(*array.List)
	if start, end := l.ValueOffsets(0); end-start != 40 || l.ListValues().NullN() != 40 {
		t.Fatalf("decoded list of %d elements, %d NULL", end-start, l.ListValues().NullN())
	}
	out := make([]any, 1)
	if err := c.DecodeValues(row, []int{1}, out); err != nil {
		t.Fatalf("DecodeValues: %v", err)
	}
	if vals, ok := out[0].([]any); !ok || len(vals) != 40 || vals[0] != nil {
		t.Fatalf("DecodeValues: %#v", out[0])
	}
	// A corrupt count is still refused, without allocating it.
	bad := append(append([]byte{}, row[:len(row)-6]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := c.DecodeRows(mem, [][]byte{bad}); err == nil {
		t.Fatal("a row with a list count beyond its bytes decoded")
	}
}
