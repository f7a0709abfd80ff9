package tiering

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/catalog"
)

// appendGiven appends rows to bucket and commits them, as appendRows does
// with rows it makes.
func (e *env) appendGiven(id catalog.TableID, bucket catalog.BucketID, rows []row) {
	e.t.Helper()
	var (
		spec catalog.TableSpec
		end  uint64
		le   uint64
	)
	e.cat.Read(func(v *catalog.View) {
		spec = v.Tables[id].Spec
		end = v.Streams[catalog.StreamID(bucket)].End
		le = v.Streams[catalog.StreamID(bucket)].Epoch
	})
	rec := buildRecord(e.t, spec, rows)
	e.src.add(bucket, Batch{Offset: end, Record: rec})
	e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(bucket), Epoch: le,
		Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", bucket, end), Start: end, End: end + uint64(len(rows)), Size: 1}}})
}

// scanRows returns the rows (columns id, s, ts, small, ok) a scan returns.
func scanRows(t *testing.T, e *env, r *LakeReader, req ScanRequest) ([]row, error) {
	t.Helper()
	var out []row
	err := r.Scan(e.ctx, req, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(req.Schema) {
			t.Fatalf("batch schema %s, want %s", rec.Schema(), req.Schema)
		}
		for i := range int(rec.NumRows()) {
			var rw row
			rw.id = rec.Column(0).(*array.Int64).Value(i)
			if s := rec.Column(1).(*array.String); s.IsValid(i) {
				v := s.Value(i)
				rw.s = &v
			}
			rw.ts = int64(rec.Column(2).(*array.Timestamp).Value(i))
			rw.small = rec.Column(3).(*array.Int16).Value(i)
			rw.ok = rec.Column(4).(*array.Boolean).Value(i)
			out = append(out, rw)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b row) int { return int(a.id - b.id) })
	return out, err
}

// holds evaluates a predicate on a model row with SQL semantics.
func holds(p Predicate, r row) bool {
	var v any
	switch p.Column {
	case "id":
		v = r.id
	case "s":
		if r.s != nil {
			v = *r.s
		}
	case "ts":
		v = arrow.Timestamp(r.ts)
	case "small":
		v = int64(r.small)
	case "ok":
		v = r.ok
	}
	switch p.Op {
	case PredIsNull:
		return v == nil
	case PredNotNull:
		return v != nil
	}
	if v == nil {
		return false
	}
	cmp := func(w any) int {
		switch a := v.(type) {
		case int64:
			b := w.(int64)
			return compare(a, b)
		case string:
			return strings.Compare(a, w.(string))
		case arrow.Timestamp:
			return compare(a, w.(arrow.Timestamp))
		case bool:
			b := w.(bool)
			switch {
			case a == b:
				return 0
			case !a:
				return -1
			}
			return 1
		}
		panic("type")
	}
	switch p.Op {
	case PredEq:
		return cmp(p.Values[0]) == 0
	case PredLt:
		return cmp(p.Values[0]) < 0
	case PredLe:
		return cmp(p.Values[0]) <= 0
	case PredGt:
		return cmp(p.Values[0]) > 0
	case PredGe:
		return cmp(p.Values[0]) >= 0
	case PredIn:
		for _, w := range p.Values {
			if cmp(w) == 0 {
				return true
			}
		}
		return false
	}
	panic("op")
}

func compare[T int64 | arrow.Timestamp](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// filterTable tiers a 3-bucket table in 4 rounds (12 data files), ids and
// ts ascending with the rounds, s NULL for every 5th row. It returns the
// environment, the table, its snapshot and the rows.
func filterTable(t *testing.T) (*env, catalog.TableID, int64, []row) {
	e := newEnv(t)
	spec := testSpec("events", 3, "")
	id := e.createTable(spec)
	bs := sortedKeys(e.ends(id))
	var all []row
	next := int64(0)
	for round := 0; round < 4; round++ {
		for _, b := range bs {
			var rows []row
			for range 40 {
				r := row{id: next, ts: 1_700_000_000_000_000 + next*1_000_000, small: int16(next % 7), ok: next%3 == 0}
				if next%5 != 0 {
					s := fmt.Sprintf("r%04d", next)
					r.s = &s
				}
				next++
				rows = append(rows, r)
			}
			e.appendGiven(id, b, rows)
			all = append(all, rows...)
		}
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	return e, id, e.tiered(id).LakeSnapshotID, all
}

// TestLakeFilterPrunesFiles: a filter on a column whose values grow with
// the rounds reads only the files whose bounds can match (counted in
// Stats), and returns exactly the matching rows; a filter the lake cannot
// use reads every file and every row.
func TestLakeFilterPrunesFiles(t *testing.T) {
	e, id, snap, all := filterTable(t)
	spec := testSpec("events", 3, "")
	schema := minkSchema(t, spec, "id", "s", "ts", "small", "ok")
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	match := func(preds []Predicate) []row {
		var out []row
		for _, rw := range all {
			ok := true
			for _, p := range preds {
				ok = ok && holds(p, rw)
			}
			if ok {
				out = append(out, rw)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		preds  []Predicate
		files  uint64 // read
		pruned uint64
	}{
		{"id < 100 (first round)", []Predicate{{Column: "id", Op: PredLt, Values: []any{int64(100)}}}, 3, 9},
		{"id = 130 (bucket 1, round 2)", []Predicate{{Column: "id", Op: PredEq, Values: []any{int64(130)}}}, 1, 11},
		{"id = max", []Predicate{{Column: "id", Op: PredGe, Values: []any{int64(479)}}}, 1, 11},
		{"ts between rounds 2 and 3", []Predicate{
			{Column: "ts", Op: PredGe, Values: []any{arrow.Timestamp(1_700_000_000_000_000 + 200*1_000_000)}},
			{Column: "ts", Op: PredLe, Values: []any{arrow.Timestamp(1_700_000_000_000_000 + 300*1_000_000)}}}, 3, 9},
		{"ok = true", []Predicate{{Column: "ok", Op: PredEq, Values: []any{true}}}, 12, 0},
		{"ok < true: not used", []Predicate{{Column: "ok", Op: PredLt, Values: []any{true}}}, 12, 0},
		{"s in", []Predicate{{Column: "s", Op: PredIn, Values: []any{"r0001", "r0479"}}}, 2, 10},
		{"s is null", []Predicate{{Column: "s", Op: PredIsNull}}, 12, 0},
		{"no match", []Predicate{{Column: "id", Op: PredGt, Values: []any{int64(1000)}}}, 0, 12},
		{"float value: not used", []Predicate{{Column: "id", Op: PredLt, Values: []any{1.5}}}, 12, 0},
	} {
		before := r.Stats()
		got, err := scanRows(t, e, r, ScanRequest{Table: id, Snapshot: snap, Schema: schema, Filter: tc.preds})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		after := r.Stats()
		if read, pruned := after.FilesRead-before.FilesRead, after.FilesPruned-before.FilesPruned; read != tc.files || pruned != tc.pruned {
			t.Errorf("%s: %d files read, %d pruned; want %d and %d", tc.name, read, pruned, tc.files, tc.pruned)
		}
		want := all
		if !strings.HasSuffix(tc.name, "not used") {
			want = match(tc.preds)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", tc.name, len(got), len(want))
		}
		for i := range want {
			if !sameRow(got[i], want[i]) {
				t.Fatalf("%s: row %d is %s, want %s", tc.name, i, fmtRow(got[i]), fmtRow(want[i]))
			}
		}
	}
	// A filter combines with a bucket restriction.
	b := sortedKeys(e.ends(id))[1]
	got, err := scanRows(t, e, r, ScanRequest{Table: id, Snapshot: snap, Schema: schema, Buckets: []catalog.BucketID{b},
		Filter: []Predicate{{Column: "id", Op: PredLt, Values: []any{int64(60)}}}})
	if err != nil || len(got) != 20 || got[0].id != 40 || got[19].id != 59 {
		t.Fatalf("bucket %d, id < 60: %d rows (%v), want ids 40..59", b, len(got), err)
	}
	// Without columns (a count), a filter still applies.
	var n int64
	err = r.Scan(e.ctx, ScanRequest{Table: id, Snapshot: snap, Schema: arrow.NewSchema(nil, nil),
		Filter: []Predicate{{Column: "id", Op: PredLt, Values: []any{int64(50)}}}}, func(rec arrow.RecordBatch) error {
		n += rec.NumRows()
		return nil
	})
	if err != nil || n < 50 {
		t.Fatalf("count with id < 50: %d (%v), want at least 50", n, err)
	}
}

// TestLakeFilterRandom: random conjunctions of predicates over int, text
// (with NULLs), timestamptz, smallint and boolean columns, values at and
// around the data's bounds, never lose a matching row.
func TestLakeFilterRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	e, id, snap, all := filterTable(t)
	spec := testSpec("events", 3, "")
	schema := minkSchema(t, spec, "id", "s", "ts", "small", "ok")
	cache, err := NewFileCache(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	r := NewLakeReader(e.store.Inner(), storeURL, cache)
	value := func(col string) any {
		n := int64(rng.IntN(500)) - 10 // around the ids 0..479
		if rng.IntN(4) == 0 {
			n = []int64{0, 39, 40, 119, 120, 479, 480, -1}[rng.IntN(8)]
		}
		switch col {
		case "id":
			return n
		case "small":
			return int64(rng.IntN(9) - 1)
		case "s":
			if rng.IntN(5) == 0 {
				return []string{"", "r", "r0000", "r9999", "s", "r0479\x00"}[rng.IntN(6)]
			}
			return fmt.Sprintf("r%04d", n)
		case "ts":
			return arrow.Timestamp(1_700_000_000_000_000 + n*1_000_000 + int64(rng.IntN(3)-1))
		}
		return rng.IntN(2) == 0
	}
	cols := []string{"id", "s", "ts", "small", "ok"}
	for i := range 200 {
		var preds []Predicate
		for range 1 + rng.IntN(3) {
			col := cols[rng.IntN(len(cols))]
			p := Predicate{Column: col, Op: PredOp(rng.IntN(8))}
			switch p.Op {
			case PredIn:
				for range rng.IntN(4) {
					p.Values = append(p.Values, value(col))
				}
			case PredIsNull, PredNotNull:
			default:
				p.Values = []any{value(col)}
			}
			preds = append(preds, p)
		}
		got, err := scanRows(t, e, r, ScanRequest{Table: id, Snapshot: snap, Schema: schema, Filter: preds})
		if err != nil {
			t.Fatalf("case %d %v: %v", i, preds, err)
		}
		seen := map[int64]bool{}
		for _, rw := range got {
			if seen[rw.id] {
				t.Fatalf("case %d %v: row %d twice", i, preds, rw.id)
			}
			seen[rw.id] = true
		}
		for _, rw := range all {
			ok := true
			for _, p := range preds {
				ok = ok && holds(p, rw)
			}
			if ok && !seen[rw.id] {
				t.Fatalf("case %d %v: row %s matches and is missing", i, preds, fmtRow(rw))
			}
		}
	}
	st := r.Stats()
	t.Logf("files read %d, pruned %d", st.FilesRead, st.FilesPruned)
	if st.FilesPruned == 0 {
		t.Fatalf("no file pruned in 200 random filters")
	}
}

// TestLakeFilterRowGroups: files of several row groups (two rounds of
// 150,000 rows in one bucket: row groups of 131,072 and 18,928 rows) are
// read only in the row groups whose statistics may match, counted in
// Stats; random filters with values at and around the row groups' bounds
// never lose a matching row.
func TestLakeFilterRowGroups(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	e := newEnv(t)
	spec := testSpec("events", 1, "")
	id := e.createTable(spec)
	b := sortedKeys(e.ends(id))[0]
	const perRound = 150_000
	var all []row
	for round := range 2 {
		var rows []row
		for i := range perRound {
			n := int64(round*perRound + i)
			r := row{id: n, ts: 1_700_000_000_000_000 + n*1_000_000, small: int16(n % 11), ok: n%3 == 0}
			if n%5 != 0 {
				s := fmt.Sprintf("r%07d", n)
				r.s = &s
			}
			rows = append(rows, r)
		}
		e.appendGiven(id, b, rows)
		all = append(all, rows...)
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	snap := e.tiered(id).LakeSnapshotID
	schema := minkSchema(t, spec, "id", "s", "ts", "small", "ok")
	cache, err := NewFileCache(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	r := NewLakeReader(e.store.Inner(), storeURL, cache)
	// Row groups: ids [0, 131072) [131072, 150000) | [150000, 281072) [281072, 300000).
	for _, c := range []struct {
		preds         []Predicate
		rows          int
		groups, prune uint64 // of the files read
	}{
		{[]Predicate{{Column: "id", Op: PredEq, Values: []any{int64(140_000)}}}, 1, 2, 1},
		{[]Predicate{{Column: "id", Op: PredGe, Values: []any{int64(131_071)}}, {Column: "id", Op: PredLe, Values: []any{int64(131_072)}}}, 2, 2, 0},
		{[]Predicate{{Column: "ts", Op: PredGe, Values: []any{arrow.Timestamp(1_700_000_000_000_000 + 281_072*1_000_000)}}}, 18_928, 2, 1},
		{[]Predicate{{Column: "s", Op: PredIn, Values: []any{"r0000001", "r0299999"}}}, 2, 4, 2},
		{[]Predicate{{Column: "small", Op: PredEq, Values: []any{int64(3)}}}, 27_273, 4, 0},
	} {
		before := r.Stats()
		got, err := scanRows(t, e, r, ScanRequest{Table: id, Snapshot: snap, Schema: schema, Filter: c.preds})
		if err != nil {
			t.Fatal(err)
		}
		after := r.Stats()
		groups := after.RowGroupsRead - before.RowGroupsRead + after.RowGroupsPruned - before.RowGroupsPruned
		if len(got) != c.rows || groups != c.groups || after.RowGroupsPruned-before.RowGroupsPruned != c.prune {
			t.Errorf("%v: %d rows, %d row groups, %d pruned; want %d, %d, %d", c.preds, len(got), groups,
				after.RowGroupsPruned-before.RowGroupsPruned, c.rows, c.groups, c.prune)
		}
	}
	edges := []int64{0, 1, 131_071, 131_072, 131_073, 149_999, 150_000, 150_001, 281_071, 281_072, 299_999, 300_000, -1}
	value := func(col string) any {
		n := edges[rng.IntN(len(edges))] + int64(rng.IntN(3)-1)
		if rng.IntN(3) == 0 {
			n = int64(rng.IntN(300_010))
		}
		switch col {
		case "id":
			return n
		case "s":
			return fmt.Sprintf("r%07d", n)
		case "ts":
			return arrow.Timestamp(1_700_000_000_000_000 + n*1_000_000)
		case "small":
			return int64(rng.IntN(13) - 1)
		}
		return rng.IntN(2) == 0
	}
	cols := []string{"id", "s", "ts", "small", "ok"}
	for i := range 40 {
		var preds []Predicate
		for range 1 + rng.IntN(2) {
			col := cols[rng.IntN(len(cols))]
			p := Predicate{Column: col, Op: PredOp(rng.IntN(8))}
			switch p.Op {
			case PredIn:
				for range 1 + rng.IntN(3) {
					p.Values = append(p.Values, value(col))
				}
			case PredIsNull, PredNotNull:
			default:
				p.Values = []any{value(col)}
			}
			preds = append(preds, p)
		}
		got, err := scanRows(t, e, r, ScanRequest{Table: id, Snapshot: snap, Schema: schema, Filter: preds})
		if err != nil {
			t.Fatalf("case %d %v: %v", i, preds, err)
		}
		seen := make(map[int64]bool, len(got))
		for _, rw := range got {
			if seen[rw.id] {
				t.Fatalf("case %d %v: row %d twice", i, preds, rw.id)
			}
			seen[rw.id] = true
		}
		for _, rw := range all {
			ok := true
			for _, p := range preds {
				ok = ok && holds(p, rw)
			}
			if ok && !seen[rw.id] {
				t.Fatalf("case %d %v: row %s matches and is missing", i, preds, fmtRow(rw))
			}
		}
	}
	st := r.Stats()
	t.Logf("row groups read %d, pruned %d", st.RowGroupsRead, st.RowGroupsPruned)
}
