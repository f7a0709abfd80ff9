package catalog_test

import (
	"errors"
	"testing"

	"github.com/minkdb/mink/catalog"
)

func TestAllocateSequence(t *testing.T) {
	v := catalog.NewView()
	out := applyChecked(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true, Sequence: catalog.SequenceAlways},
		{Name: "s", Type: "smallint", Sequence: catalog.SequenceSerial},
		{Name: "v", Type: "text"},
	}}})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	table := out.Table
	alloc := func(col string, n uint64) catalog.Outcome {
		t.Helper()
		return applyChecked(t, v, catalog.AllocateSequence{Table: table, Column: col, Count: n})
	}
	// Ranges follow each other from 1, per column.
	for _, want := range []struct {
		col   string
		n     uint64
		start int64
	}{{"id", 10, 1}, {"id", 5, 11}, {"s", 100, 1}, {"id", 1, 16}, {"s", 32000, 101}} {
		o := alloc(want.col, want.n)
		if o.Err != nil || o.SequenceStart != want.start {
			t.Fatalf("allocate %d of %s: start %d, err %v; want start %d", want.n, want.col, o.SequenceStart, o.Err, want.start)
		}
	}
	// smallint: 32767 is the last value; one more than is left is refused
	// and changes nothing.
	if o := alloc("s", 668); !errors.Is(o.Err, catalog.ErrSequenceExhausted) {
		t.Fatalf("allocate past smallint's maximum: %v", o.Err)
	}
	if o := alloc("s", 667); o.Err != nil || o.SequenceStart != 32101 {
		t.Fatalf("allocate the last 667: start %d, err %v", o.SequenceStart, o.Err)
	}
	if o := alloc("s", 1); !errors.Is(o.Err, catalog.ErrSequenceExhausted) {
		t.Fatalf("allocate after the last value: %v", o.Err)
	}
	// bigint near its maximum: no overflow.
	v.Tables[table].Sequences["id"] = 1<<63 - 1 - 3
	if o := alloc("id", 3); o.Err != nil || o.SequenceStart != 1<<63-1-2 {
		t.Fatalf("allocate bigint's last 3: start %d, err %v", o.SequenceStart, o.Err)
	}
	if o := alloc("id", 1); !errors.Is(o.Err, catalog.ErrSequenceExhausted) {
		t.Fatalf("allocate past bigint's maximum: %v", o.Err)
	}
	// A column without a sequence, a bad count, an unknown table.
	for _, r := range []catalog.AllocateSequence{
		{Table: table, Column: "v", Count: 1},
		{Table: table, Column: "nope", Count: 1},
		{Table: table, Column: "id", Count: 0},
		{Table: table, Column: "id", Count: catalog.MaxSequenceAllocation + 1},
	} {
		if o := applyChecked(t, v, r); !errors.Is(o.Err, catalog.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, o.Err)
		}
	}
	if o := applyChecked(t, v, catalog.AllocateSequence{Table: table + 100, Column: "id", Count: 1}); !errors.Is(o.Err, catalog.ErrNotFound) {
		t.Errorf("unknown table: %v", o.Err)
	}
	// Only integer columns take a sequence.
	bad := applyChecked(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "u", Columns: []catalog.Column{{Name: "x", Type: "text", Sequence: catalog.SequenceSerial}}}})
	if !errors.Is(bad.Err, catalog.ErrInvalid) {
		t.Errorf("text column with a sequence: %v", bad.Err)
	}
}
