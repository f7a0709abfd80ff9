package kvcodec

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// droppedCodec is the codec of the added-columns table after ALTER TABLE
// … DROP COLUMN of the given stored columns (their places stay).
func droppedCodec(t testing.TB, dropped ...int) *Codec {
	cols := addedColumns(t)
	for _, i := range dropped {
		cols[i].Dropped = true
	}
	c, err := NewTableCodec(cols, 2, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDroppedColumns: rows stored before a DROP COLUMN (holding the
// column's values) and after (NULL there) decode without the column, on
// the Arrow and the Go-value side; rows compare equal whatever the dropped
// column held; the changelog is stored with every column and read without
// the dropped ones.
func TestDroppedColumns(t *testing.T) {
	full := addedCodec(t, 5)
	before := encodeOne(t, full, addedBatch(t, 5, 1), 0) // id 1, n1, 101, w1, false
	narrow := encodeOne(t, full, addedBatch(t, 2, 2), 0) // id 2, n2 (v, w, ok missing)
	c := droppedCodec(t, 1, 3)                           // name and w dropped
	if s := c.Schema(); s.NumFields() != 3 || s.Field(0).Name != "id" || s.Field(1).Name != "v" || s.Field(2).Name != "ok" {
		t.Fatalf("schema %s, want the visible id, v, ok", s)
	}
	if c.NumColumns() != 5 || c.StoredSchema().NumFields() != 5 || fmt.Sprint(c.KeyColumns()) != "[0]" {
		t.Fatalf("stored columns %d/%d, key %v", c.NumColumns(), c.StoredSchema().NumFields(), c.KeyColumns())
	}
	got := rowStrings(t, c, before, narrow)
	if want := "[[1 101 false] [2 7 true]]"; fmt.Sprint(got) != want {
		t.Fatalf("rows %v, want %s", got, want)
	}

	// A row written after the drop from a batch of the visible columns:
	// NULL where the dropped ones were, every stored column held.
	rec := addedBatch(t, 5, 3)
	defer rec.Release()
	visible := project(t, rec, 0, 2, 4)
	defer visible.Release()
	after := encodeOne(t, c, visible, 0)
	if n, err := c.RowColumns(after); err != nil || n != 5 {
		t.Fatalf("a row written after the drop holds %d columns (%v), want 5", n, err)
	}
	if got := rowStrings(t, full, after); fmt.Sprint(got) != "[[3 NULL 103 NULL false]]" {
		t.Fatalf("the row read with the dropped columns: %v", got)
	}
	// The same values with and without the dropped columns' bytes are equal.
	one := addedBatch(t, 5, 1)
	defer one.Release()
	oneVisible := project(t, one, 0, 2, 4)
	defer oneVisible.Release()
	again := encodeOne(t, c, oneVisible, 0)
	if eq, err := c.EqualRows(before, again); err != nil || !eq {
		t.Fatalf("a row and its re-encoding without the dropped values: equal %v, %v", eq, err)
	}
	if eq, err := full.EqualRows(before, again); err != nil || eq {
		t.Fatalf("before the drop the rows differ: equal %v, %v", eq, err)
	}

	// Go values: Schema's indexes.
	out := make([]any, 3)
	if err := c.DecodeValues(before, []int{2, 0, 1}, out); err != nil || fmt.Sprint(out) != "[false 1 101]" {
		t.Fatalf("DecodeValues: %v, %v", out, err)
	}
	if err := c.DecodeValues(before, []int{3}, out[:1]); err == nil {
		t.Fatal("DecodeValues of a column past the visible ones succeeded")
	}

	// The changelog: stored with every column, read back without the
	// dropped ones.
	recs := []ChangeRecord{{Type: Insert, Row: before}, {Type: UpdateAfter, Row: after}}
	payload, err := c.EncodeChanges(recs)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := DecodeChangesBatch(payload)
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Release()
	if stored.NumCols() != 6 || stored.Column(2).ValueStr(0) != "n1" || !stored.Column(2).IsNull(1) || !stored.Column(4).IsNull(1) {
		t.Fatalf("stored changelog: %v, want 6 columns, the dropped ones as the rows hold them", stored)
	}
	back, err := c.DecodeChanges(payload)
	if err != nil || len(back) != 2 {
		t.Fatalf("decode changes: %v, %v", back, err)
	}
	if got := rowStrings(t, c, back[0].Row, back[1].Row); fmt.Sprint(got) != "[[1 101 false] [3 103 false]]" {
		t.Fatalf("changelog rows %v", got)
	}
	vis, err := c.ChangesBatch(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	defer vis.Release()
	if !vis.Schema().Equal(c.ChangelogSchema()) || vis.NumCols() != 4 {
		t.Fatalf("ChangesBatch schema %s, want %s", vis.Schema(), c.ChangelogSchema())
	}
}

// project returns the columns cols of rec.
func project(t testing.TB, rec arrow.RecordBatch, cols ...int) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i], arrs[i] = rec.Schema().Field(c), rec.Column(c)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
}
