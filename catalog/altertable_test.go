package catalog

import (
	"errors"
	"testing"
)

// TestAddColumn: an added column follows the table's columns, marked Added
// with its Missing value; a name the table has, a sequence or an unknown
// table is rejected and changes nothing; a view taken before the record
// keeps its columns.
func TestAddColumn(t *testing.T) {
	v := NewView()
	o := applyChecked(t, v, CreateTable{Spec: TableSpec{Name: "t", Columns: []Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	table := o.Table
	before := v.Clone()
	one := "1"
	if o := applyChecked(t, v, AddColumn{Table: table, Column: Column{Name: "n", Type: "integer", NotNull: true, Default: "1", Missing: &one}}); o.Err != nil {
		t.Fatal(o.Err)
	}
	if o := applyChecked(t, v, AddColumn{Table: table, Column: Column{Name: "note", Type: "text"}}); o.Err != nil {
		t.Fatal(o.Err)
	}
	cols := v.Tables[table].Spec.Columns
	if len(cols) != 3 || cols[0].Added || !cols[1].Added || cols[1].Name != "n" || cols[1].Missing == nil || *cols[1].Missing != "1" ||
		!cols[2].Added || cols[2].Name != "note" || cols[2].Missing != nil {
		t.Fatalf("columns after two AddColumn: %+v", cols)
	}
	if got := before.Tables[table].Spec.Columns; len(got) != 1 {
		t.Fatalf("a view cloned before AddColumn has columns %+v", got)
	}
	for _, r := range []struct {
		rec  AddColumn
		want error
	}{
		{AddColumn{Table: table, Column: Column{Name: "n", Type: "text"}}, ErrInvalid},
		{AddColumn{Table: table, Column: Column{Name: "s", Type: "bigint", Sequence: SequenceSerial}}, ErrInvalid},
		{AddColumn{Table: table, Column: Column{Name: "", Type: "bigint"}}, ErrInvalid},
		{AddColumn{Table: table + 100, Column: Column{Name: "x", Type: "bigint"}}, ErrNotFound},
	} {
		if o := applyChecked(t, v, r.rec); !errors.Is(o.Err, r.want) {
			t.Errorf("%+v: %v, want %v", r.rec, o.Err, r.want)
		}
	}
	if got := v.Tables[table].Spec.Columns; len(got) != 3 {
		t.Fatalf("rejected AddColumn records changed the columns: %+v", got)
	}
}
