package tiering

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/objstore"
)

// pkRow is the model of one row of the primary-key test table
// (id bigint, s text, n int, [dt text]) and the offset of the changelog
// record that produced it.
type pkRow struct {
	id     int64
	s      *string
	n      int32
	dt     string
	offset uint64
}

func (r pkRow) String() string {
	s := "NULL"
	if r.s != nil {
		s = *r.s
	}
	return fmt.Sprintf("{id=%d s=%s n=%d dt=%q @%d}", r.id, s, r.n, r.dt, r.offset)
}

type pkKey struct {
	bucket catalog.BucketID
	id     int64
}

func pkSpec(name string, buckets int, partitioned bool) catalog.TableSpec {
	spec := catalog.TableSpec{Name: name, Buckets: buckets, PrimaryKey: []string{"id"}, Columns: []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true},
		{Name: "s", Type: "text"},
		{Name: "n", Type: "integer", NotNull: true},
	}}
	if partitioned {
		spec.Columns = append(spec.Columns, catalog.Column{Name: "dt", Type: "text", NotNull: true})
		spec.PartitionBy, spec.PrimaryKey, spec.BucketKey = "dt", []string{"id", "dt"}, []string{"id"}
	}
	return spec
}

// pkModel is a primary-key table as a map, fed with the changelog the test
// appends to its buckets.
type pkModel struct {
	e     *env
	id    catalog.TableID
	rows  map[pkKey]pkRow
	parts map[catalog.BucketID]string
	rng   *rand.Rand
	next  int64
}

func newPKModel(e *env, id catalog.TableID, seed uint64) *pkModel {
	m := &pkModel{e: e, id: id, rows: map[pkKey]pkRow{}, parts: map[catalog.BucketID]string{},
		rng: rand.New(rand.NewPCG(seed, seed))}
	e.cat.Read(func(v *catalog.View) {
		for _, p := range v.Tables[id].Partitions {
			for _, b := range p.Buckets {
				m.parts[b] = p.Value
			}
		}
	})
	return m
}

// change appends one changelog entry of n random changes (inserts of new
// keys, updates as -U/+U, upserts of existing keys as +U only, deletes) to
// bucket and applies them to the model.
func (m *pkModel) change(bucket catalog.BucketID, n int) {
	e := m.e
	e.t.Helper()
	var spec catalog.TableSpec
	var end, le uint64
	e.cat.Read(func(v *catalog.View) {
		spec = v.Tables[m.id].Spec
		end = v.Streams[catalog.StreamID(bucket)].End
		le = v.Streams[catalog.StreamID(bucket)].Epoch
	})
	var keys []int64
	for k := range m.rows {
		if k.bucket == bucket {
			keys = append(keys, k.id)
		}
	}
	slices.Sort(keys)
	type change struct {
		ct string
		r  pkRow
	}
	var cs []change
	for len(cs) < n {
		off := end + uint64(len(cs))
		r := pkRow{n: m.rng.Int32N(1000), dt: m.parts[bucket]}
		if m.rng.IntN(4) != 0 {
			s := fmt.Sprintf("v%d", m.rng.IntN(1e6))
			r.s = &s
		}
		op := m.rng.IntN(10)
		if len(keys) == 0 || op < 4 {
			m.next++
			r.id, r.offset = m.next*10+int64(bucket%10), off
			keys = append(keys, r.id)
			cs = append(cs, change{"+I", r})
			m.rows[pkKey{bucket, r.id}] = r
			continue
		}
		i := m.rng.IntN(len(keys))
		r.id = keys[i]
		k := pkKey{bucket, r.id}
		switch {
		case op < 7 && len(cs)+2 <= n: // update: -U old, +U new
			cs = append(cs, change{"-U", m.rows[k]})
			r.offset = off + 1
			cs = append(cs, change{"+U", r})
			m.rows[k] = r
		case op < 8: // upsert changelog of an existing key
			r.offset = off
			cs = append(cs, change{"+U", r})
			m.rows[k] = r
		default:
			cs = append(cs, change{"-D", m.rows[k]})
			delete(m.rows, k)
			keys = slices.Delete(keys, i, i+1)
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, changelogSchema(e.t, spec))
	defer b.Release()
	for _, c := range cs {
		b.Field(0).(*array.StringBuilder).Append(c.ct)
		b.Field(1).(*array.Int64Builder).Append(c.r.id)
		if c.r.s == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(*c.r.s)
		}
		b.Field(3).(*array.Int32Builder).Append(c.r.n)
		if spec.PartitionBy != "" {
			b.Field(4).(*array.StringBuilder).Append(c.r.dt)
		}
	}
	e.src.add(bucket, Batch{Offset: end, Record: b.NewRecordBatch()})
	e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(bucket), Epoch: le,
		Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", bucket, end), Start: end, End: end + uint64(n), Size: 1}}})
}

// deleteAll appends a -D of every row of bucket.
func (m *pkModel) deleteAll(bucket catalog.BucketID) {
	e := m.e
	e.t.Helper()
	var spec catalog.TableSpec
	var end, le uint64
	e.cat.Read(func(v *catalog.View) {
		spec = v.Tables[m.id].Spec
		end = v.Streams[catalog.StreamID(bucket)].End
		le = v.Streams[catalog.StreamID(bucket)].Epoch
	})
	b := array.NewRecordBuilder(memory.DefaultAllocator, changelogSchema(e.t, spec))
	defer b.Release()
	n := 0
	for k, r := range m.rows {
		if k.bucket != bucket {
			continue
		}
		n++
		b.Field(0).(*array.StringBuilder).Append("-D")
		b.Field(1).(*array.Int64Builder).Append(r.id)
		b.Field(2).AppendNull()
		b.Field(3).(*array.Int32Builder).Append(0)
		if spec.PartitionBy != "" {
			b.Field(4).(*array.StringBuilder).Append(r.dt)
		}
		delete(m.rows, k)
	}
	if n == 0 {
		return // the seeded changes left the bucket empty: nothing to delete
	}
	e.src.add(bucket, Batch{Offset: end, Record: b.NewRecordBatch()})
	e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(bucket), Epoch: le,
		Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", bucket, end), Start: end, End: end + uint64(n), Size: 1}}})
}

// changelogSchema is the schema of a changelog entry of spec (kvcodec.Codec's
// ChangelogSchema): _change_type, then the table's columns.
func changelogSchema(t *testing.T, spec catalog.TableSpec) *arrow.Schema {
	t.Helper()
	cols := make([]sqltypes.Column, len(spec.Columns))
	for i, c := range spec.Columns {
		typ, err := sqltypes.Parse(c.Type)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = sqltypes.Column{Name: c.Name, Type: typ, NotNull: c.NotNull}
	}
	fields := append([]arrow.Field{{Name: "_change_type", Type: arrow.BinaryTypes.String}}, sqltypes.Schema(cols).Fields()...)
	return arrow.NewSchema(fields, nil)
}

// readPKLake scans the current lake snapshot with iceberg-go.
func (e *env) readPKLake(id catalog.TableID) map[pkKey]pkRow {
	e.t.Helper()
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[pkKey]pkRow{}
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return out
	}
	_, recs, err := tbl.Scan().ToArrowRecords(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			e.t.Fatal(err)
		}
		col := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		for i := range int(rec.NumRows()) {
			r := pkRow{
				id:     rec.Column(col("id")).(*array.Int64).Value(i),
				n:      rec.Column(col("n")).(*array.Int32).Value(i),
				offset: uint64(rec.Column(col(OffsetColumn)).(*array.Int64).Value(i)),
			}
			if s := rec.Column(col("s")).(*array.String); s.IsValid(i) {
				v := s.Value(i)
				r.s = &v
			}
			if idx := rec.Schema().FieldIndices("dt"); len(idx) == 1 {
				r.dt = rec.Column(idx[0]).(*array.String).Value(i)
			}
			k := pkKey{catalog.BucketID(rec.Column(col(BucketColumn)).(*array.Int64).Value(i)), r.id}
			if prev, dup := out[k]; dup {
				e.t.Fatalf("key %+v is in the lake twice: %s and %s", k, prev, r)
			}
			out[k] = r
		}
		rec.Release()
	}
	return out
}

// check asserts that the lake equals the model and that the log records
// every bucket's end as tiered.
func (m *pkModel) check() {
	e := m.e
	e.t.Helper()
	got := e.readPKLake(m.id)
	for k, want := range m.rows {
		r, ok := got[k]
		if !ok {
			e.t.Errorf("key %+v (%s) is missing from the lake", k, want)
		} else if r.String() != want.String() {
			e.t.Errorf("key %+v: lake has %s, want %s", k, r, want)
		}
	}
	for k, r := range got {
		if _, ok := m.rows[k]; !ok {
			e.t.Errorf("lake has %+v (%s), which the table does not", k, r)
		}
	}
	ts := e.tiered(m.id)
	for b, end := range e.ends(m.id) {
		if ts.Offsets[b] != end {
			e.t.Errorf("bucket %d: tiered offset %d, stream end %d", b, ts.Offsets[b], end)
		}
	}
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	return s
}

func TestRoundPKTable(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitioned=%v", partitioned), func(t *testing.T) {
			e := newEnv(t)
			id := e.createTable(pkSpec("kv", 3, partitioned))
			if partitioned {
				e.createPartition(id, "2026-01-01")
				e.createPartition(id, "2026-01-02")
			}
			m := newPKModel(e, id, seed(t))
			bs := sortedKeys(e.ends(id))
			tr := e.tierer()
			for round := range 6 {
				for i, b := range bs {
					if (round+i)%3 != 2 { // some buckets stay unchanged in a round
						m.change(b, 5+m.rng.IntN(60))
					}
				}
				before := e.readLakeFiles(id)
				res, err := tr.Round(e.ctx, id, e.epoch)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !res.Committed {
					t.Fatalf("round %d committed nothing: %+v", round, res)
				}
				m.check()
				// Files of unchanged buckets are kept as they are.
				after := e.readLakeFiles(id)
				for b, files := range before {
					if _, changed := res.To[b]; !changed && !slices.Equal(files, after[b]) {
						t.Errorf("round %d rewrote unchanged bucket %d: %v -> %v", round, b, files, after[b])
					}
				}
			}
			if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Committed {
				t.Fatalf("round without changes: %+v, %v", res, err)
			}
			m.check()
			if partitioned {
				// Every data file carries its bucket's identity partition.
				tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				tasks, err := tbl.Scan().PlanFiles(e.ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range tasks {
					b, _ := bucketOfFile(task.File.FilePath())
					if got := task.File.Partition()[1000]; got != m.parts[b] {
						t.Errorf("file %s of bucket %d has partition %v, want %q", task.File.FilePath(), b, got, m.parts[b])
					}
				}
			}
		})
	}
}

// readLakeFiles lists the current lake data files per bucket.
func (e *env) readLakeFiles(id catalog.TableID) map[catalog.BucketID][]string {
	e.t.Helper()
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if tbl == nil {
		return nil
	}
	files, err := bucketFiles(e.ctx, tbl)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, fs := range files {
		slices.Sort(fs)
	}
	return files
}

// TestRoundPKAllDeleted: a bucket whose rows are all deleted loses its files;
// a first round whose rows are all deleted commits an empty snapshot.
func TestRoundPKAllDeleted(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(pkSpec("kv", 1, false))
	m := newPKModel(e, id, seed(t))
	b := sortedKeys(e.ends(id))[0]
	m.change(b, 20)
	tr := e.tierer()
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	m.check()
	m.deleteAll(b)
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	m.check()
	if files := e.readLakeFiles(id)[b]; len(files) != 0 {
		t.Fatalf("empty bucket still has lake files %v", files)
	}
	m.change(b, 7)
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	m.check()

	// A table whose first round finds every row deleted again.
	id2 := e.createTable(pkSpec("kv2", 1, false))
	m2 := newPKModel(e, id2, seed(t))
	b2 := sortedKeys(e.ends(id2))[0]
	m2.change(b2, 10)
	m2.deleteAll(b2)
	res, err := tr.Round(e.ctx, id2, e.epoch)
	if err != nil || !res.Committed {
		t.Fatalf("round of an all-deleted first changelog: %+v, %v", res, err)
	}
	m2.check()
}

// TestRoundPKFailsAtEveryWrite fails a primary-key round at each of its
// object writes (before the write and after it took effect), retries, and
// checks the lake equals the model exactly; then the same at the propose.
func TestRoundPKFailsAtEveryWrite(t *testing.T) {
	s := seed(t)
	setup := func(t *testing.T) (*env, *pkModel, *Tierer) {
		e := newEnv(t)
		id := e.createTable(pkSpec("kv", 2, false))
		m := newPKModel(e, id, s)
		tr := e.tierer()
		bs := sortedKeys(e.ends(id))
		for _, b := range bs {
			m.change(b, 40)
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			m.change(b, 30)
		}
		return e, m, tr
	}
	// The writes of the second round (a rewrite of both buckets).
	var puts []string
	{
		e, m, tr := setup(t)
		var mu sync.Mutex
		e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
			if op == objstore.OpPut {
				mu.Lock()
				puts = append(puts, key)
				mu.Unlock()
			}
			return nil
		}})
		if _, err := tr.Round(e.ctx, m.id, e.epoch); err != nil {
			t.Fatal(err)
		}
		m.check()
	}
	if len(puts) < 4 {
		t.Fatalf("a rewrite round made only %d writes: %v", len(puts), puts)
	}
	injected := errors.New("injected store failure")
	for i := range puts {
		for _, lost := range []bool{false, true} {
			t.Run(fmt.Sprintf("write%d/lost=%v", i, lost), func(t *testing.T) {
				e, m, tr := setup(t)
				n := 0
				var mu sync.Mutex
				hook := func(_ context.Context, op objstore.Op, key string) error {
					if op != objstore.OpPut {
						return nil
					}
					mu.Lock()
					defer mu.Unlock()
					n++
					if n == i+1 {
						return injected
					}
					return nil
				}
				if lost {
					e.store.SetHooks(objstore.Hooks{After: func(ctx context.Context, op objstore.Op, key string, err error) error {
						if err != nil {
							return err
						}
						return hook(ctx, op, key)
					}})
				} else {
					e.store.SetHooks(objstore.Hooks{Before: hook})
				}
				_, err := tr.Round(e.ctx, m.id, e.epoch)
				e.store.SetHooks(objstore.Hooks{})
				if err == nil {
					t.Fatalf("round with write %d failing succeeded", i)
				}
				if _, err := tr.Round(e.ctx, m.id, e.epoch); err != nil {
					t.Fatalf("retry: %v", err)
				}
				m.check()
				m.checkGC()
			})
		}
	}
	for _, afterApply := range []bool{false, true} {
		t.Run(fmt.Sprintf("propose/applied=%v", afterApply), func(t *testing.T) {
			e, m, tr := setup(t)
			e.meta.failTiering(1, afterApply)
			first, err := tr.Round(e.ctx, m.id, e.epoch)
			if !errors.Is(err, errLostProposal) || !first.Committed {
				t.Fatalf("round with a lost proposal: %+v, %v", first, err)
			}
			res, err := tr.Round(e.ctx, m.id, e.epoch)
			if err != nil || res.Committed || res.Repaired == afterApply {
				t.Fatalf("round after the lost proposal: %+v, %v", res, err)
			}
			m.check()
			for b := range e.ends(m.id) {
				m.change(b, 10)
			}
			if _, err := tr.Round(e.ctx, m.id, e.epoch); err != nil {
				t.Fatal(err)
			}
			m.check()
		})
	}
}

// checkGC runs the lake collector with no delay: it deletes exactly the
// objects no lake snapshot references (the failed round's files; the files a
// rewrite replaced stay, older snapshots reference them), and the lake reads
// the same afterwards.
func (m *pkModel) checkGC() {
	e := m.e
	e.t.Helper()
	before, err := e.store.Inner().List(e.ctx, LakePrefix(m.id))
	if err != nil {
		e.t.Fatal(err)
	}
	refs, err := NewLake(e.store.Inner(), storeURL).references(e.ctx, m.id, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 0).Collect(e.ctx, []catalog.TableID{m.id})
	if err != nil {
		e.t.Fatal(err)
	}
	after, err := e.store.Inner().List(e.ctx, LakePrefix(m.id))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(after) != len(refs) || st.Deleted != len(before)-len(refs) {
		e.t.Fatalf("gc deleted %d of %d objects, %d referenced, %d left", st.Deleted, len(before), len(refs), len(after))
	}
	m.check()
}

// TestRoundPKFenced: a round under a stale epoch is rejected and the new
// holder's round makes the lake exact.
func TestRoundPKFenced(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(pkSpec("kv", 2, false))
	m := newPKModel(e, id, seed(t))
	for b := range e.ends(id) {
		m.change(b, 30)
	}
	old := e.epoch
	e.newCoordinator()
	if _, err := e.tierer().Round(e.ctx, id, old); !errors.Is(err, ErrFenced) {
		t.Fatalf("round under stale epoch: %v", err)
	}
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	m.check()
}

// TestRoundPKSplitsFiles: buckets larger than a file are written as several
// sorted files, read back in any order and merged with new keys.
func TestRoundPKSplitsFiles(t *testing.T) {
	defer func(n int) { fileRows = n }(fileRows)
	fileRows = 16
	e := newEnv(t)
	id := e.createTable(pkSpec("kv", 2, false))
	m := newPKModel(e, id, seed(t))
	tr := e.tierer()
	live := func(b catalog.BucketID) int {
		n := 0
		for k := range m.rows {
			if k.bucket == b {
				n++
			}
		}
		return n
	}
	small := func(b catalog.BucketID) bool { return live(b) <= 2*fileRows }
	for round := 0; ; round++ {
		// Five rounds, then more while the seed's deletes left a bucket
		// too few rows to need two files.
		if round >= 5 && !slices.ContainsFunc(slices.Collect(maps.Keys(e.ends(id))), small) {
			break
		}
		if round > 50 {
			t.Fatalf("after %d rounds a bucket has %d rows or fewer", round, 2*fileRows)
		}
		for b := range e.ends(id) {
			if round < 5 || small(b) {
				m.change(b, 30+m.rng.IntN(40))
			}
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		m.check()
	}
	files := e.readLakeFiles(id)
	for b, fs := range files {
		if len(fs) < 2 {
			t.Errorf("bucket %d has %d files, want several of at most 16 rows", b, len(fs))
		}
	}
	// Each bucket is split into full files of 16 rows and one remainder.
	lake := e.readPKLake(id)
	count := map[catalog.BucketID]int{}
	for k := range lake {
		count[k.bucket]++
	}
	for b, n := range count {
		if want := (n + 15) / 16; len(files[b]) != want {
			t.Errorf("bucket %d: %d rows in %d files, want %d files", b, n, len(files[b]), want)
		}
	}
}

// TestRoundPKFencedAfterLakeCommit: the lease moves between the lake commit
// of a rewrite round and its CommitTieringRound, which is rejected (stale
// epoch); the new holder records the snapshot from the lake (repair) and the
// lake equals the model through further rounds.
func TestRoundPKFencedAfterLakeCommit(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(pkSpec("kv", 2, false))
	m := newPKModel(e, id, seed(t))
	tr := e.tierer()
	for b := range e.ends(id) {
		m.change(b, 40)
	}
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	for b := range e.ends(id) {
		m.change(b, 25)
	}
	old, recorded := e.epoch, e.tiered(id)
	var once sync.Once
	e.store.SetHooks(objstore.Hooks{After: func(_ context.Context, op objstore.Op, key string, err error) error {
		if op == objstore.OpPut && strings.HasSuffix(key, "v3.metadata.json") && err == nil {
			once.Do(e.newCoordinator)
		}
		return err
	}})
	res, err := tr.Round(e.ctx, id, old)
	e.store.SetHooks(objstore.Hooks{})
	if !errors.Is(err, ErrFenced) || !res.Committed {
		t.Fatalf("round of the fenced coordinator: %+v, %v", res, err)
	}
	if ts := e.tiered(id); ts.LakeSequence != recorded.LakeSequence {
		t.Fatalf("a stale round was recorded: %+v", ts)
	}
	res, err = tr.Round(e.ctx, id, e.epoch)
	if err != nil || !res.Repaired || res.Committed {
		t.Fatalf("new holder's round: %+v, %v", res, err)
	}
	m.check()
	for b := range e.ends(id) {
		m.change(b, 10)
	}
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	m.check()
}
