package tiering

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/objstore"
)

// The table of these tests is created as (id bigint NOT NULL, s text); then
// ALTER TABLE adds n integer NOT NULL DEFAULT 7 (rows stored before read as
// 7) and note text (rows stored before read as NULL).
var (
	seven       = "7"
	alterTable  = catalog.TableSpec{Name: "grown", Buckets: 2, Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "s", Type: "text"}}}
	addedN      = catalog.Column{Name: "n", Type: "integer", NotNull: true, Default: "7", Missing: &seven}
	addedNote   = catalog.Column{Name: "note", Type: "text"}
	alterSchema = []sqltypes.Column{
		{Name: "id", Type: sqltypes.Of(sqltypes.Int8), NotNull: true},
		{Name: "s", Type: sqltypes.Of(sqltypes.Text)},
		{Name: "n", Type: sqltypes.Of(sqltypes.Int4), NotNull: true, Missing: &seven},
		{Name: "note", Type: sqltypes.Of(sqltypes.Text)},
	}
)

// grownRow is a row of the table; n and note are what a reader must
// return (the missing value for rows stored without them).
type grownRow struct {
	id   int64
	s    *string
	n    int32
	note *string
}

func (r grownRow) String() string {
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	return fmt.Sprintf("{%d %s %d %s}", r.id, str(r.s), r.n, str(r.note))
}

// appendGrown appends rows to bucket as one batch of the first width
// columns of the table (what a writer that knew only those columns wrote)
// and returns them as they read: n 7 and note NULL when not written.
func (e *env) appendGrown(id catalog.TableID, bucket catalog.BucketID, width int, firstID int64, count int) []grownRow {
	e.t.Helper()
	var end, le uint64
	e.cat.Read(func(v *catalog.View) {
		end = v.Streams[catalog.StreamID(bucket)].End
		le = v.Streams[catalog.StreamID(bucket)].Epoch
	})
	b := array.NewRecordBuilder(memory.DefaultAllocator, sqltypes.Schema(alterSchema[:width]))
	defer b.Release()
	var rows []grownRow
	for i := range count {
		r := grownRow{id: firstID + int64(i), n: 7}
		b.Field(0).(*array.Int64Builder).Append(r.id)
		if i%3 != 0 {
			s := fmt.Sprintf("s%d", r.id)
			r.s = &s
			b.Field(1).(*array.StringBuilder).Append(s)
		} else {
			b.Field(1).AppendNull()
		}
		if width > 2 {
			r.n = int32(100 + i%4) // never the missing value 7
			b.Field(2).(*array.Int32Builder).Append(r.n)
		}
		if width > 3 {
			if i%2 == 0 {
				note := fmt.Sprintf("note%d", r.id)
				r.note = &note
				b.Field(3).(*array.StringBuilder).Append(note)
			} else {
				b.Field(3).AppendNull()
			}
		}
		rows = append(rows, r)
	}
	e.src.add(bucket, Batch{Offset: end, Record: b.NewRecordBatch()})
	e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(bucket), Epoch: le,
		Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", bucket, end), Start: end, End: end + uint64(count), Size: 1}}})
	return rows
}

// scanGrown reads the four columns of the table with mink's lake reader;
// cols are the ScanRequest's Columns, and, when all four are given, the
// names asked for.
func scanGrown(t *testing.T, e *env, r *LakeReader, id catalog.TableID, snapshot int64, cols []sqltypes.Column, filter ...Predicate) []grownRow {
	t.Helper()
	schema := sqltypes.Schema(alterSchema)
	if len(cols) == len(alterSchema) {
		schema = sqltypes.Schema(cols)
	}
	var out []grownRow
	err := r.Scan(e.ctx, ScanRequest{Table: id, Snapshot: snapshot, Schema: schema, Columns: cols, Filter: filter}, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(schema) {
			t.Fatalf("batch schema %s, want %s", rec.Schema(), schema)
		}
		for i := range int(rec.NumRows()) {
			var g grownRow
			g.id = rec.Column(0).(*array.Int64).Value(i)
			if s := rec.Column(1).(*array.String); s.IsValid(i) {
				v := s.Value(i)
				g.s = &v
			}
			if n := rec.Column(2).(*array.Int32); n.IsValid(i) {
				g.n = n.Value(i)
			} else {
				g.n = -1 // NULL
			}
			if s := rec.Column(3).(*array.String); s.IsValid(i) {
				v := s.Value(i)
				g.note = &v
			}
			out = append(out, g)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan of snapshot %d (filter %v): %v", snapshot, filter, err)
	}
	slices.SortFunc(out, func(a, b grownRow) int { return int(a.id - b.id) })
	return out
}

func sameRows(t *testing.T, what string, got, want []grownRow) {
	t.Helper()
	slices.SortFunc(want, func(a, b grownRow) int { return int(a.id - b.id) })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func rowsWhere(rows []grownRow, keep func(grownRow) bool) []grownRow {
	var out []grownRow
	for _, r := range rows {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// TestAddColumnLogTable: rows tiered before ALTER TABLE … ADD COLUMN and
// rows written after it with the old columns (a writer whose node had not
// applied the record yet) read as the column's missing value, rows with
// the column as written; the lake's schema evolves (one schema per column
// set, fields keep their ids, new ones get new ids); a filter on an added
// column keeps the old files whose missing value meets it and prunes those
// whose does not; compaction rewrites the old files with the column, and
// expiry and GC leave a lake that reads the same.
func TestAddColumnLogTable(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(alterTable)
	bs := sortedKeys(e.ends(id))
	tr := e.tierer()
	round := func() int64 {
		t.Helper()
		res, err := tr.Round(e.ctx, id, e.epoch)
		if err != nil || !res.Committed {
			t.Fatalf("round: %+v, %v", res, err)
		}
		return res.SnapshotID
	}
	var model []grownRow
	for i, b := range bs {
		model = append(model, e.appendGrown(id, b, 2, int64(1000*i), 20)...)
	}
	before := round()
	beforeRows := slices.Clone(model)

	e.propose(catalog.AddColumn{Table: id, Column: addedN})
	for i, b := range bs {
		model = append(model, e.appendGrown(id, b, 2, int64(1000*i+100), 5)...) // a late writer
		model = append(model, e.appendGrown(id, b, 3, int64(1000*i+200), 12)...)
	}
	round()
	e.propose(catalog.AddColumn{Table: id, Column: addedNote})
	for i, b := range bs {
		model = append(model, e.appendGrown(id, b, 3, int64(1000*i+300), 4)...)
		model = append(model, e.appendGrown(id, b, 4, int64(1000*i+400), 10)...)
	}
	last := round()

	// The lake's schemas: one per column set, the current one last.
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	schemas := tbl.Metadata().Schemas()
	if len(schemas) != 3 {
		t.Fatalf("lake has %d schemas, want 3: %v", len(schemas), schemas)
	}
	ids := map[string]int{}
	for _, s := range schemas {
		for _, f := range s.Fields() {
			if prev, ok := ids[f.Name]; ok && prev != f.ID {
				t.Fatalf("field %q has id %d in schema %d, %d in another", f.Name, f.ID, s.ID, prev)
			}
			ids[f.Name] = f.ID
		}
	}
	seen := map[int]string{}
	for name, fid := range ids {
		if other, dup := seen[fid]; dup {
			t.Fatalf("fields %q and %q share id %d", name, other, fid)
		}
		seen[fid] = name
	}
	cur := tbl.Schema()
	if cur.ID != slices.MaxFunc(schemas, func(a, b *iceberg.Schema) int { return a.ID - b.ID }).ID {
		t.Fatalf("current schema %d is not the newest of %v", cur.ID, schemas)
	}
	var names []string
	for _, f := range cur.Fields() {
		names = append(names, f.Name)
		if (f.Name == "n" || f.Name == "note") && f.Required {
			t.Errorf("added field %s is required: Iceberg v2 cannot add a required field", f)
		}
	}
	if got := strings.Join(names, ","); got != "id,s,n,note,__bucket,__offset" {
		t.Fatalf("current lake schema has fields %s", got)
	}
	if ids["n"] <= ids[OffsetColumn] || ids["note"] <= ids["n"] || int(tbl.Metadata().LastColumnID()) != ids["note"] {
		t.Fatalf("added fields have ids %v, last column id %d", ids, tbl.Metadata().LastColumnID())
	}
	if _, ok := schemas[0].FindFieldByName("n"); ok {
		t.Fatalf("the first schema has the added column: %v", schemas[0])
	}

	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	sameRows(t, "all rows", scanGrown(t, e, r, id, last, alterSchema), slices.Clone(model))
	// A snapshot from before the columns existed reads them as their
	// missing values too.
	sameRows(t, "the snapshot before ALTER TABLE", scanGrown(t, e, r, id, before, alterSchema), slices.Clone(beforeRows))

	// Filters on the added columns.
	for _, tc := range []struct {
		p     Predicate
		holds func(grownRow) bool
		// prunesOld: the files of the first round (which lack n and
		// note) are skipped.
		prunesOld bool
	}{
		{Predicate{Column: "n", Op: PredEq, Values: []any{int64(7)}}, func(g grownRow) bool { return g.n == 7 }, false},
		{Predicate{Column: "n", Op: PredGe, Values: []any{int64(101)}}, func(g grownRow) bool { return g.n >= 101 }, true},
		{Predicate{Column: "n", Op: PredIn, Values: []any{int64(5), int64(7)}}, func(g grownRow) bool { return g.n == 7 }, false},
		{Predicate{Column: "note", Op: PredIsNull}, func(g grownRow) bool { return g.note == nil }, false},
		{Predicate{Column: "note", Op: PredNotNull}, func(g grownRow) bool { return g.note != nil }, true},
		{Predicate{Column: "note", Op: PredEq, Values: []any{"note400"}}, func(g grownRow) bool { return g.note != nil && *g.note == "note400" }, true},
	} {
		st := r.Stats()
		got := scanGrown(t, e, r, id, last, alterSchema, tc.p)
		sameRows(t, fmt.Sprintf("filter %s", tc.p), got, rowsWhere(model, tc.holds))
		pruned := r.Stats().FilesPruned - st.FilesPruned
		if tc.prunesOld && pruned < uint64(len(bs)) || !tc.prunesOld && pruned >= uint64(len(bs)*2) {
			t.Errorf("filter %s pruned %d files (%d buckets; old files pruned: %v)", tc.p, pruned, len(bs), tc.prunesOld)
		}
		// On the snapshot before ALTER TABLE, no file has the columns.
		sameRows(t, fmt.Sprintf("filter %s before ALTER TABLE", tc.p), scanGrown(t, e, r, id, before, alterSchema, tc.p), rowsWhere(beforeRows, tc.holds))
	}

	// A scan of only added columns reads the rows of files that lack them
	// all (SELECT sum(n) … WHERE n = 7).
	onlyN := sqltypes.Schema(alterSchema[2:3])
	var sevens, sum int64
	err = r.Scan(e.ctx, ScanRequest{Table: id, Snapshot: last, Schema: onlyN, Columns: alterSchema,
		Filter: []Predicate{{Column: "n", Op: PredEq, Values: []any{int64(7)}}}}, func(rec arrow.RecordBatch) error {
		ns := rec.Column(0).(*array.Int32)
		for i := range ns.Len() {
			if ns.IsValid(i) && ns.Value(i) == 7 {
				sevens++
				sum += int64(ns.Value(i))
			}
		}
		return nil
	})
	if want := int64(len(rowsWhere(model, func(g grownRow) bool { return g.n == 7 }))); err != nil || sevens != want || want == 0 {
		t.Fatalf("scan of n alone where n = 7: %d rows (sum %d), %v; want %d", sevens, sum, err, want)
	}

	// Without the missing values (Columns), a file without the column
	// reads as NULL: the old files are still there.
	nulls := scanGrown(t, e, r, id, last, nil)
	if n := len(rowsWhere(nulls, func(g grownRow) bool { return g.n == -1 })); n != len(beforeRows) {
		t.Fatalf("%d rows read n as NULL without its missing value, want the %d of the first round", n, len(beforeRows))
	}

	// Compaction rewrites them with the column's missing value.
	res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 1})
	if err != nil || !res.Committed || res.Rewritten != 3*len(bs) {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	compacted := e.tiered(id).LakeSnapshotID
	sameRows(t, "after compaction", scanGrown(t, e, r, id, compacted, alterSchema), slices.Clone(model))
	sameRows(t, "after compaction, without missing values", scanGrown(t, e, r, id, compacted, nil), slices.Clone(model))

	// Expiry and GC: the lake reads the same, the old snapshot is gone.
	if _, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	gc := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 0)
	if st, err := gc.Collect(e.ctx, []catalog.TableID{id}); err != nil || st.Deleted == 0 {
		t.Fatalf("gc: %+v, %v", st, err)
	}
	r2 := NewLakeReader(e.store.Inner(), storeURL, nil)
	sameRows(t, "after expiry and gc", scanGrown(t, e, r2, id, compacted, alterSchema), slices.Clone(model))
	more := e.appendGrown(id, bs[0], 4, 5000, 3)
	model = append(model, more...)
	sameRows(t, "after one more round", scanGrown(t, e, r2, id, round(), alterSchema), slices.Clone(model))
}

// TestAddColumnBeforeFirstRound: a lake created after the column was
// added starts with the created columns and evolves, as one created
// before, so that field ids do not depend on when tiering started.
func TestAddColumnBeforeFirstRound(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(alterTable)
	bs := sortedKeys(e.ends(id))
	var model []grownRow
	model = append(model, e.appendGrown(id, bs[0], 2, 0, 6)...)
	e.propose(catalog.AddColumn{Table: id, Column: addedN})
	e.propose(catalog.AddColumn{Table: id, Column: addedNote})
	model = append(model, e.appendGrown(id, bs[1], 4, 100, 6)...)
	res, err := e.tierer().Round(e.ctx, id, e.epoch)
	if err != nil || !res.Committed {
		t.Fatalf("round: %+v, %v", res, err)
	}
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, f := range tbl.Schema().Fields() {
		fields = append(fields, fmt.Sprintf("%s:%d", f.Name, f.ID))
	}
	if got := strings.Join(fields, " "); got != "id:1 s:2 n:5 note:6 __bucket:3 __offset:4" || len(tbl.Metadata().Schemas()) != 2 {
		t.Fatalf("lake schema %s, %d schemas", got, len(tbl.Metadata().Schemas()))
	}
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	sameRows(t, "rows", scanGrown(t, e, r, id, res.SnapshotID, alterSchema), model)
}

// TestAddColumnPKTable: a primary-key round after ALTER TABLE rewrites the
// changed bucket's old file (which lacks the column) with the column's
// missing value, applies changelog records of both widths, and leaves an
// unchanged bucket's file as it was (read with the missing value).
func TestAddColumnPKTable(t *testing.T) {
	e := newEnv(t)
	spec := catalog.TableSpec{Name: "kv", Buckets: 2, PrimaryKey: []string{"id"}, Columns: alterTable.Columns}
	id := e.createTable(spec)
	bs := sortedKeys(e.ends(id))
	// changes appends a changelog batch of width table columns.
	changes := func(b catalog.BucketID, width int, cs ...any) {
		t.Helper()
		var end, le uint64
		e.cat.Read(func(v *catalog.View) {
			end = v.Streams[catalog.StreamID(b)].End
			le = v.Streams[catalog.StreamID(b)].Epoch
		})
		fields := append([]arrow.Field{{Name: "_change_type", Type: arrow.BinaryTypes.String}}, sqltypes.Schema(alterSchema[:width]).Fields()...)
		rb := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
		defer rb.Release()
		for i := 0; i < len(cs); i += 2 {
			g := cs[i+1].(grownRow)
			rb.Field(0).(*array.StringBuilder).Append(cs[i].(string))
			rb.Field(1).(*array.Int64Builder).Append(g.id)
			if g.s == nil {
				rb.Field(2).AppendNull()
			} else {
				rb.Field(2).(*array.StringBuilder).Append(*g.s)
			}
			if width > 2 {
				rb.Field(3).(*array.Int32Builder).Append(g.n)
			}
			if width > 3 {
				if g.note == nil {
					rb.Field(4).AppendNull()
				} else {
					rb.Field(4).(*array.StringBuilder).Append(*g.note)
				}
			}
		}
		n := len(cs) / 2
		e.src.add(b, Batch{Offset: end, Record: rb.NewRecordBatch()})
		e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: le,
			Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", b, end), Start: end, End: end + uint64(n), Size: 1}}})
	}
	str := func(s string) *string { return &s }
	model := map[int64]grownRow{}
	put := func(b catalog.BucketID, width int, ct string, g grownRow) {
		changes(b, width, ct, g)
		if ct == "-D" {
			delete(model, g.id)
		} else {
			model[g.id] = g
		}
	}
	for i := range int64(4) {
		put(bs[0], 2, "+I", grownRow{id: i, s: str(fmt.Sprint("a", i)), n: 7})
		put(bs[1], 2, "+I", grownRow{id: 100 + i, s: str(fmt.Sprint("b", i)), n: 7})
	}
	tr := e.tierer()
	if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || !res.Committed {
		t.Fatalf("round: %+v, %v", res, err)
	}
	e.propose(catalog.AddColumn{Table: id, Column: addedN})
	e.propose(catalog.AddColumn{Table: id, Column: addedNote})
	put(bs[0], 2, "+U", grownRow{id: 1, s: str("late"), n: 7})
	put(bs[0], 2, "+I", grownRow{id: 9, n: 7})
	put(bs[0], 4, "+U", grownRow{id: 2, s: str("new"), n: 42, note: str("x")})
	put(bs[0], 4, "+I", grownRow{id: 10, n: 43})
	put(bs[0], 4, "-D", grownRow{id: 3, n: 0})
	res, err := tr.Round(e.ctx, id, e.epoch)
	if err != nil || !res.Committed {
		t.Fatalf("round: %+v, %v", res, err)
	}
	var want []grownRow
	for _, g := range model {
		want = append(want, g)
	}
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	sameRows(t, "primary-key rows", scanGrown(t, e, r, id, res.SnapshotID, alterSchema), slices.Clone(want))
	// The rewritten bucket holds n; the unchanged one does not.
	var rewritten []grownRow
	for _, g := range scanGrown(t, e, r, id, res.SnapshotID, nil) {
		if g.id < 100 {
			rewritten = append(rewritten, g)
		}
	}
	sameRows(t, "rewritten bucket without missing values", rewritten, rowsWhere(want, func(g grownRow) bool { return g.id < 100 }))
	// PK restore reads one bucket, widened.
	var restored int
	err = r.Scan(e.ctx, ScanRequest{Table: id, Snapshot: res.SnapshotID, Schema: sqltypes.Schema(alterSchema), Columns: alterSchema, Buckets: []catalog.BucketID{bs[1]}},
		func(rec arrow.RecordBatch) error {
			for i := range int(rec.NumRows()) {
				if n := rec.Column(2).(*array.Int32); !n.IsValid(i) || n.Value(i) != 7 || rec.Column(3).IsValid(i) {
					return fmt.Errorf("row %d of the unchanged bucket: n %v, note valid %v", i, n, rec.Column(3).IsValid(i))
				}
				restored++
			}
			return nil
		})
	if err != nil || restored != 4 {
		t.Fatalf("read of the unchanged bucket: %d rows, %v", restored, err)
	}
}

// TestAddColumnRoundFailsAtEveryWrite fails the first round after ALTER
// TABLE at each of its object-store writes (the schema commit among them),
// before the write and after it took effect, then runs a round without
// faults: the lake has the two schemas and reads every row once, with the
// missing value where it was not written.
func TestAddColumnRoundFailsAtEveryWrite(t *testing.T) {
	setup := func(t *testing.T) (*env, catalog.TableID, []grownRow) {
		e := newEnv(t)
		id := e.createTable(alterTable)
		bs := sortedKeys(e.ends(id))
		model := e.appendGrown(id, bs[0], 2, 0, 10)
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
		e.propose(catalog.AddColumn{Table: id, Column: addedN})
		e.propose(catalog.AddColumn{Table: id, Column: addedNote})
		model = append(model, e.appendGrown(id, bs[0], 2, 100, 3)...)
		model = append(model, e.appendGrown(id, bs[1], 4, 200, 6)...)
		return e, id, model
	}
	var (
		mu   sync.Mutex
		puts []string
	)
	{
		e, id, _ := setup(t)
		e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
			if op == objstore.OpPut {
				mu.Lock()
				puts = append(puts, key)
				mu.Unlock()
			}
			return nil
		}})
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	if len(puts) < 6 || !strings.HasSuffix(puts[0], "/v3.metadata.json") {
		t.Fatalf("the round after ALTER TABLE wrote %v: want the schema commit (v3) first", puts)
	}
	for i, key := range puts {
		for _, lost := range []bool{false, true} {
			t.Run(fmt.Sprintf("write%d-%s-lost=%v", i, path.Base(key), lost), func(t *testing.T) {
				e, id, model := setup(t)
				e.failPut(i, lost)
				tr := e.tierer()
				if _, err := tr.Round(e.ctx, id, e.epoch); err == nil {
					t.Fatalf("round succeeded with write %d (%s) failing", i, key)
				}
				e.store.SetHooks(objstore.Hooks{})
				res, err := tr.Round(e.ctx, id, e.epoch)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Committed && !res.Repaired {
					t.Fatalf("retry round: %+v", res)
				}
				tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if len(tbl.Metadata().Schemas()) != 2 {
					t.Fatalf("lake has schemas %v, want 2", tbl.Metadata().Schemas())
				}
				r := NewLakeReader(e.store.Inner(), storeURL, nil)
				sameRows(t, "rows", scanGrown(t, e, r, id, e.tiered(id).LakeSnapshotID, alterSchema), model)
			})
		}
	}
}

// TestMissingMeets: a predicate on a column a file lacks is evaluated on
// the column's missing value with SQL semantics (NULL meets only IS NULL);
// a value Predicate does not use, or of another type, is unknown.
func TestMissingMeets(t *testing.T) {
	str := func(s string) *string { return &s }
	col := func(kind sqltypes.Kind, missing *string) sqltypes.Column {
		return sqltypes.Column{Name: "c", Type: sqltypes.Of(kind), Missing: missing}
	}
	p := func(op PredOp, vals ...any) Predicate { return Predicate{Column: "c", Op: op, Values: vals} }
	for _, tc := range []struct {
		c            sqltypes.Column
		p            Predicate
		meets, known bool
	}{
		{col(sqltypes.Int4, str("7")), p(PredEq, int64(7)), true, true},
		{col(sqltypes.Int4, str("7")), p(PredEq, int64(8)), false, true},
		{col(sqltypes.Int4, str("7")), p(PredLt, int64(8)), true, true},
		{col(sqltypes.Int4, str("7")), p(PredLt, int64(7)), false, true},
		{col(sqltypes.Int4, str("7")), p(PredLe, int64(7)), true, true},
		{col(sqltypes.Int4, str("7")), p(PredGt, int64(7)), false, true},
		{col(sqltypes.Int4, str("7")), p(PredGe, int64(7)), true, true},
		{col(sqltypes.Int4, str("7")), p(PredIn, int64(1), int64(7)), true, true},
		{col(sqltypes.Int4, str("7")), p(PredIn, int64(1), int64(2)), false, true},
		{col(sqltypes.Int4, str("7")), p(PredIn), false, true},
		{col(sqltypes.Int4, str("7")), p(PredIsNull), false, true},
		{col(sqltypes.Int4, str("7")), p(PredNotNull), true, true},
		{col(sqltypes.Int4, str("7")), p(PredEq, "7"), false, false},
		{col(sqltypes.Int2, str("-3")), p(PredLt, int64(0)), true, true},
		{col(sqltypes.Int4, nil), p(PredIsNull), true, true},
		{col(sqltypes.Int4, nil), p(PredNotNull), false, true},
		{col(sqltypes.Int4, nil), p(PredEq, int64(7)), false, true},
		{col(sqltypes.Text, str("m")), p(PredGe, "a"), true, true},
		{col(sqltypes.Text, str("m")), p(PredEq, "z"), false, true},
		{col(sqltypes.Bool, str("true")), p(PredEq, true), true, true},
		{col(sqltypes.Bool, str("true")), p(PredIn, false), false, true},
		{col(sqltypes.Bool, str("true")), p(PredLt, true), false, false},
		{col(sqltypes.Date, str("2025-01-02")), p(PredGt, arrow.Date32(20000)), true, true},
		{col(sqltypes.Date, str("2025-01-02")), p(PredEq, arrow.Date32(20090)), true, true},
		{col(sqltypes.Float8, str("1.5")), p(PredEq, float64(1.5)), false, false},
	} {
		meets, known := missingMeets(tc.c, tc.p)
		missing := "NULL"
		if tc.c.Missing != nil {
			missing = *tc.c.Missing
		}
		if meets != tc.meets || known != tc.known {
			t.Errorf("%s missing %s, %s: meets %v known %v, want %v %v", tc.c.Type.Name(), missing, tc.p, meets, known, tc.meets, tc.known)
		}
	}
}

// TestAddNestedColumns: added interval and array columns (a Parquet group
// and a LIST) with missing values read back the same from a file written
// before them, from a stream batch without them, and after compaction
// rewrote the old files.
func TestAddNestedColumns(t *testing.T) {
	e := newEnv(t)
	spec := catalog.TableSpec{Name: "nested", Buckets: 1, Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}}}
	id := e.createTable(spec)
	b := sortedKeys(e.ends(id))[0]
	mem := memory.DefaultAllocator
	ivType, tagsType := sqltypes.Of(sqltypes.Interval), sqltypes.ArrayOf(sqltypes.Of(sqltypes.Int4))
	ivb := array.NewMonthDayNanoIntervalBuilder(mem)
	ivb.Append(arrow.MonthDayNanoInterval{Months: 1, Days: -2, Nanoseconds: 3_000_000_000})
	iv := ivb.NewArray()
	defer iv.Release()
	lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	lb.Append(true)
	lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{4, 5}, nil)
	tags := lb.NewArray()
	defer tags.Release()
	ivMissing, tagsMissing := sqltypes.MissingText(iv, 0), sqltypes.MissingText(tags, 0)
	cols := []sqltypes.Column{
		{Name: "id", Type: sqltypes.Of(sqltypes.Int8), NotNull: true},
		{Name: "iv", Type: ivType, Missing: &ivMissing},
		{Name: "tags", Type: tagsType, Missing: &tagsMissing},
	}
	appendIDs := func(width int, from, n int64) {
		t.Helper()
		var end, le uint64
		e.cat.Read(func(v *catalog.View) {
			end = v.Streams[catalog.StreamID(b)].End
			le = v.Streams[catalog.StreamID(b)].Epoch
		})
		rb := array.NewRecordBuilder(mem, sqltypes.Schema(cols[:width]))
		defer rb.Release()
		for i := range n {
			rb.Field(0).(*array.Int64Builder).Append(from + i)
			if width > 1 {
				rb.Field(1).(*array.MonthDayNanoIntervalBuilder).Append(arrow.MonthDayNanoInterval{Days: int32(i)})
			}
			if width > 2 {
				l := rb.Field(2).(*array.ListBuilder)
				l.Append(true)
				l.ValueBuilder().(*array.Int32Builder).Append(int32(i))
			}
		}
		e.src.add(b, Batch{Offset: end, Record: rb.NewRecordBatch()})
		e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: le,
			Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", b, end), Start: end, End: end + uint64(n), Size: 1}}})
	}
	want := map[int64]string{}
	for i := range int64(3) {
		want[i] = fmt.Sprintf("%d %s %s", i, ivMissing, tagsMissing)
	}
	appendIDs(1, 0, 3)
	tr := e.tierer()
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.propose(catalog.AddColumn{Table: id, Column: catalog.Column{Name: "iv", Type: "interval", Missing: &ivMissing}})
	e.propose(catalog.AddColumn{Table: id, Column: catalog.Column{Name: "tags", Type: "integer[]", Missing: &tagsMissing}})
	appendIDs(1, 10, 2) // a late writer
	for i := range int64(2) {
		want[10+i] = fmt.Sprintf("%d %s %s", 10+i, ivMissing, tagsMissing)
	}
	appendIDs(3, 20, 2)
	want[20] = `20 {"months":0,"days":0,"nanoseconds":0} [0]`
	want[21] = `21 {"months":0,"days":1,"nanoseconds":0} [1]`
	read := func(what string) {
		t.Helper()
		got := map[int64]string{}
		r := NewLakeReader(e.store.Inner(), storeURL, nil)
		err := r.Scan(e.ctx, ScanRequest{Table: id, Snapshot: e.tiered(id).LakeSnapshotID, Schema: sqltypes.Schema(cols), Columns: cols}, func(rec arrow.RecordBatch) error {
			for i := range int(rec.NumRows()) {
				got[rec.Column(0).(*array.Int64).Value(i)] = fmt.Sprintf("%s %s %s", rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i), rec.Column(2).ValueStr(i))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
		}
	}
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	read("after the round")
	if res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 1}); err != nil || res.Rewritten != 2 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	read("after compaction")
}

// TestAddColumnCompactFirst: a compaction that runs before any round after
// ALTER TABLE evolves the lake's schema itself and writes the old rows with
// the missing value; a writer whose catalog view lacks a column the lake
// has does not evolve the lake back (ErrLakeConflict).
func TestAddColumnCompactFirst(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(alterTable)
	bs := sortedKeys(e.ends(id))
	tr := e.tierer()
	var model []grownRow
	for round := range 2 {
		model = append(model, e.appendGrown(id, bs[0], 2, int64(100*round), 4)...)
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	var oldSpec catalog.TableSpec
	e.cat.Read(func(v *catalog.View) { oldSpec = v.Tables[id].Spec })
	e.propose(catalog.AddColumn{Table: id, Column: addedN})
	e.propose(catalog.AddColumn{Table: id, Column: addedNote})
	res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 1})
	if err != nil || !res.Committed || res.Rewritten != 2 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	// Without the missing values: the compacted file holds them.
	sameRows(t, "after compaction", scanGrown(t, e, r, id, e.tiered(id).LakeSnapshotID, nil), slices.Clone(model))

	lake := NewLake(e.store.Inner(), storeURL)
	tbl, err := lake.Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := newLakeSchema(oldSpec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lake.evolve(e.ctx, id, tbl, ls); !errors.Is(err, ErrLakeConflict) {
		t.Fatalf("evolve with a view behind the lake: %v, want ErrLakeConflict", err)
	}
}
