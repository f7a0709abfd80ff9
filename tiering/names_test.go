package tiering

import (
	"slices"
	"testing"

	"github.com/minkdb/mink/catalog"
)

// TestRenameColumnLake: a column renamed after the lake got it keeps its
// lake name; rounds after the rename write files the earlier ones match,
// a column added under the renamed one's old name gets a name of its own
// in the lake, compaction rewrites files of both kinds, and every read
// under the table's names returns every row.
func TestRenameColumnLake(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(alterTable)
	bs := sortedKeys(e.ends(id))
	tr := e.tierer()
	model := e.appendGrown(id, bs[0], 2, 0, 6)
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	// s becomes label; n takes the lake's name of nothing, note the old
	// name of s.
	e.propose(catalog.RenameColumn{Table: id, From: "s", To: "label"})
	e.propose(catalog.AddColumn{Table: id, Column: addedN})
	e.propose(catalog.AddColumn{Table: id, Column: catalog.Column{Name: "s", Type: "text"}})
	model = append(model, e.appendGrown(id, bs[0], 4, 100, 6)...)
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	cols := slices.Clone(alterSchema)
	cols[1].Name, cols[3].Name = "label", "s"
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	sameRows(t, "after the rename", scanGrown(t, e, r, id, e.tiered(id).LakeSnapshotID, cols), slices.Clone(model))
	onlyOld := func(g grownRow) bool { return g.s != nil && *g.s == "s1" }
	sameRows(t, "filtered by the renamed column", scanGrown(t, e, r, id, e.tiered(id).LakeSnapshotID, cols, Predicate{Column: "label", Op: PredEq, Values: []any{"s1"}}), rowsWhere(model, onlyOld))

	lake := NewLake(e.store.Inner(), storeURL)
	tbl, err := lake.Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range tbl.Schema().Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"id", "s", "n", "s_2", BucketColumn, OffsetColumn}; !slices.Equal(names, want) {
		t.Fatalf("lake schema fields %v, want %v", names, want)
	}

	res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 1})
	if err != nil || !res.Committed || res.Rewritten < 2 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	sameRows(t, "after compaction", scanGrown(t, e, r, id, e.tiered(id).LakeSnapshotID, cols), slices.Clone(model))
}
