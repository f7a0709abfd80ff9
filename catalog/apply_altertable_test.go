package catalog_test

import (
	"errors"
	"testing"

	"github.com/minkdb/mink/catalog"
)

// TestAddColumn: an added column follows the table's columns, marked Added
// with its Missing value; a name the table has, a sequence or an unknown
// table is rejected and changes nothing; a view taken before the record
// keeps its columns.
func TestAddColumn(t *testing.T) {
	v := catalog.NewView()
	o := applyChecked(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	table := o.Table
	before := v.Clone()
	one := "1"
	if o := applyChecked(t, v, catalog.AddColumn{Table: table, Column: catalog.Column{Name: "n", Type: "integer", NotNull: true, Default: "1", Missing: &one}}); o.Err != nil {
		t.Fatal(o.Err)
	}
	if o := applyChecked(t, v, catalog.AddColumn{Table: table, Column: catalog.Column{Name: "note", Type: "text"}}); o.Err != nil {
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
		rec  catalog.AddColumn
		want error
	}{
		{catalog.AddColumn{Table: table, Column: catalog.Column{Name: "n", Type: "text"}}, catalog.ErrInvalid},
		{catalog.AddColumn{Table: table, Column: catalog.Column{Name: "s", Type: "bigint", Sequence: catalog.SequenceSerial}}, catalog.ErrInvalid},
		{catalog.AddColumn{Table: table, Column: catalog.Column{Name: "", Type: "bigint"}}, catalog.ErrInvalid},
		{catalog.AddColumn{Table: table + 100, Column: catalog.Column{Name: "x", Type: "bigint"}}, catalog.ErrNotFound},
	} {
		if o := applyChecked(t, v, r.rec); !errors.Is(o.Err, r.want) {
			t.Errorf("%+v: %v, want %v", r.rec, o.Err, r.want)
		}
	}
	if got := v.Tables[table].Spec.Columns; len(got) != 3 {
		t.Fatalf("rejected AddColumn records changed the columns: %+v", got)
	}
}

// TestTruncateTable: an unpartitioned table gets new buckets and its old
// ones leave the view (their open streams retired); a partitioned table
// loses its partitions; columns, sequences and the lake snapshot stay,
// tiered offsets go.
func TestTruncateTable(t *testing.T) {
	v := catalog.NewView()
	o := applyChecked(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint", Sequence: catalog.SequenceSerial}}, Buckets: 2}})
	table, old := o.Table, o.Buckets
	v.Tables[table].Tiering = catalog.TieringState{Offsets: map[catalog.BucketID]uint64{old[0]: 5}, LakeSnapshotID: 9}
	v.Tables[table].Sequences = map[string]int64{"id": 40}
	o = applyChecked(t, v, catalog.TruncateTable{Table: table})
	if o.Err != nil || len(o.Buckets) != 2 || o.Buckets[0] == old[0] || o.Buckets[1] == old[1] {
		t.Fatalf("truncate: %+v (old buckets %v)", o, old)
	}
	tb := v.Tables[table]
	if len(tb.Buckets) != 2 || tb.Buckets[0] != o.Buckets[0] || tb.Tiering.Offsets != nil || tb.Tiering.LakeSnapshotID != 9 || tb.Sequences["id"] != 40 || len(tb.Spec.Columns) != 1 {
		t.Fatalf("table after truncate: %+v", tb)
	}
	for _, id := range old {
		if _, ok := v.Buckets[id]; ok {
			t.Fatalf("old bucket %d is still in the view", id)
		}
	}
	for _, id := range o.Buckets {
		if b := v.Buckets[id]; b == nil || b.Table != table || b.Leader != 0 {
			t.Fatalf("new bucket %d: %+v", id, b)
		}
	}

	o = applyChecked(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "p", Columns: []catalog.Column{{Name: "d", Type: "text"}}, PartitionBy: "d", Buckets: 1}})
	part := o.Table
	if o := applyChecked(t, v, catalog.CreatePartition{Table: part, Value: "x"}); o.Err != nil {
		t.Fatal(o.Err)
	}
	if o := applyChecked(t, v, catalog.TruncateTable{Table: part}); o.Err != nil || o.Buckets != nil {
		t.Fatalf("truncate partitioned: %+v", o)
	}
	if tb := v.Tables[part]; tb.Partitions != nil || len(v.BucketsOf(part)) != 0 {
		t.Fatalf("partitioned table after truncate: %+v", tb)
	}
	if o := applyChecked(t, v, catalog.TruncateTable{Table: 999}); !errors.Is(o.Err, catalog.ErrNotFound) {
		t.Fatalf("truncate of an unknown table: %v", o.Err)
	}
}

// TestSetColumnDefault: the default is set and dropped; an unknown column
// or table, or a column with a sequence, is rejected; a view cloned
// before keeps the old default.
func TestSetColumnDefault(t *testing.T) {
	v := catalog.NewView()
	o := applyChecked(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint", Sequence: catalog.SequenceSerial}, {Name: "n", Type: "integer", Default: "1"}}, Buckets: 1}})
	table := o.Table
	before := v.Clone()
	if o := applyChecked(t, v, catalog.SetColumnDefault{Table: table, Column: "n", Default: "42"}); o.Err != nil || v.Tables[table].Spec.Columns[1].Default != "42" {
		t.Fatalf("set default: %v, %+v", o.Err, v.Tables[table].Spec.Columns)
	}
	if before.Tables[table].Spec.Columns[1].Default != "1" {
		t.Fatal("a view cloned before SetColumnDefault changed")
	}
	if o := applyChecked(t, v, catalog.SetColumnDefault{Table: table, Column: "n"}); o.Err != nil || v.Tables[table].Spec.Columns[1].Default != "" {
		t.Fatalf("drop default: %v, %+v", o.Err, v.Tables[table].Spec.Columns)
	}
	for _, r := range []struct {
		rec  catalog.SetColumnDefault
		want error
	}{
		{catalog.SetColumnDefault{Table: table, Column: "nosuch", Default: "1"}, catalog.ErrNotFound},
		{catalog.SetColumnDefault{Table: table + 50, Column: "n", Default: "1"}, catalog.ErrNotFound},
		{catalog.SetColumnDefault{Table: table, Column: "id", Default: "1"}, catalog.ErrInvalid},
	} {
		if o := applyChecked(t, v, r.rec); !errors.Is(o.Err, r.want) {
			t.Errorf("%+v: %v, want %v", r.rec, o.Err, r.want)
		}
	}
}
