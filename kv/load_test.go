package kv

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/kv/kvcodec"
)

// A tablet loaded with a base state at offset 10 holds those rows, replays
// the changelog from 10 on, and refuses a second load.
func TestLoadBase(t *testing.T) {
	c := testCodec(t)
	tab, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for _, id := range []int64{1, 2} {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("base")
		b.Field(2).AppendNull()
		b.Field(3).AppendNull()
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := tab.LoadRows(c, rec); err != nil {
		t.Fatal(err)
	}
	if err := tab.FinishLoad(10); err != nil {
		t.Fatal(err)
	}
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "base"}, testRow{id: 2, name: "base"}, testRow{id: 3, name: "new"})
	if got, ok, err := tab.Get(keys[1]); err != nil || !ok || !bytes.Equal(got, rows[1]) || tab.AppliedOffset() != 10 {
		t.Fatalf("loaded row 2: %v %v, applied %d", ok, err, tab.AppliedOffset())
	}
	// The changelog before 10 is skipped, from 10 on applied.
	if err := tab.Apply([]kvcodec.ChangeRecord{{Type: kvcodec.Delete, Key: keys[0], Row: rows[0]}}, 10); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tab.Get(keys[0]); !ok {
		t.Fatal("a record below the loaded offset was applied")
	}
	if err := tab.Apply([]kvcodec.ChangeRecord{{Type: kvcodec.Delete, Key: keys[0], Row: rows[0]}, {Type: kvcodec.Insert, Key: keys[2], Row: rows[2]}}, 12); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tab.Get(keys[0]); ok {
		t.Fatal("the delete at offset 10 was not applied")
	}
	if _, ok, _ := tab.Get(keys[2]); !ok || tab.AppliedOffset() != 12 {
		t.Fatalf("insert at offset 11: %v, applied %d", ok, tab.AppliedOffset())
	}
	if err := tab.LoadRows(c, rec); err == nil {
		t.Fatal("a load into a tablet at offset 12 was accepted")
	}
	if err := tab.FinishLoad(20); err == nil {
		t.Fatal("FinishLoad on a tablet at offset 12 was accepted")
	}
}
