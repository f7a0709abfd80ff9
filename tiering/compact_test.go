package tiering

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// lakeDataFiles lists the data files of the current lake snapshot: object
// key and size, sorted by key.
func (e *env) lakeDataFiles(id catalog.TableID) []objstore.ObjectInfo {
	e.t.Helper()
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return nil
	}
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []objstore.ObjectInfo
	for _, task := range tasks {
		out = append(out, objstore.ObjectInfo{Key: strings.TrimPrefix(task.File.FilePath(), storeURL+"/"), Size: task.File.FileSizeBytes()})
	}
	slices.SortFunc(out, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// checkFileRanges asserts that every data file of the lake holds exactly the
// rows its name says ([from, to) of its bucket, in offset order), read with
// iceberg-go per file, and that a bucket's files do not overlap.
func (e *env) checkFileRanges(id catalog.TableID) {
	e.t.Helper()
	lake := e.readLake(id)
	covered := map[catalog.BucketID]map[uint64]bool{}
	for _, f := range e.lakeDataFiles(id) {
		b, from, to, ok := parseLogFile(f.Key)
		if !ok {
			e.t.Fatalf("lake file %s: name does not parse", f.Key)
		}
		for off := from; off < to; off++ {
			if _, ok := lake[b][off]; !ok {
				e.t.Fatalf("lake file %s: bucket %d offset %d is not in the lake", f.Key, b, off)
			}
			if covered[b] == nil {
				covered[b] = map[uint64]bool{}
			}
			if covered[b][off] {
				e.t.Fatalf("lake file %s: bucket %d offset %d is in two files' ranges", f.Key, b, off)
			}
			covered[b][off] = true
		}
	}
	for b, rows := range lake {
		if len(rows) != len(covered[b]) {
			e.t.Fatalf("bucket %d: %d rows in the lake, file names cover %d", b, len(rows), len(covered[b]))
		}
	}
}

// TestCompactLogTable: twelve rounds leave a dozen small files per bucket;
// compaction replaces them with one file per bucket in one replace
// snapshot, the lake holds the same rows (iceberg-go and mink's reader),
// file names still say their ranges, the log records the new snapshot with
// the same offsets, and tiering goes on.
func TestCompactLogTable(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitioned=%v", partitioned), func(t *testing.T) {
			e := newEnv(t)
			partBy := ""
			if partitioned {
				partBy = "dt"
			}
			spec := testSpec("events", 2, partBy)
			id := e.createTable(spec)
			if partitioned {
				e.createPartition(id, "2026-01-01")
				e.createPartition(id, "2026-01-02")
			}
			bs := sortedKeys(e.ends(id))
			model := map[catalog.BucketID][]row{}
			tr := e.tierer()
			next := int64(0)
			for range 12 {
				for _, b := range bs {
					model[b] = append(model[b], e.appendRows(id, b, next, 7)...)
					next += 7
				}
				if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
					t.Fatal(err)
				}
			}
			before := e.tiered(id)
			if n := len(e.lakeDataFiles(id)); n != 12*len(bs) {
				t.Fatalf("%d data files after 12 rounds", n)
			}
			// At most MinFiles small files: nothing to do.
			if res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 12}); err != nil || res.Committed {
				t.Fatalf("compaction under the threshold: %+v, %v", res, err)
			}
			res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 4})
			if err != nil || !res.Committed {
				t.Fatalf("compaction: %+v, %v", res, err)
			}
			t.Logf("compaction: %+v", res)
			if res.FilesBefore != 12*len(bs) || res.FilesAfter != len(bs) || res.Rewritten != 12*len(bs) || res.Written != len(bs) || res.Rows != int64(len(model)*84) {
				t.Fatalf("compaction result %+v", res)
			}
			files := e.lakeDataFiles(id)
			if len(files) != len(bs) {
				t.Fatalf("%d data files after compaction: %v", len(files), files)
			}
			for i, f := range files {
				if want := fmt.Sprintf("b%d-0-84-e%d-c", bs[i], e.epoch); !strings.HasPrefix(path.Base(f.Key), want) {
					t.Errorf("compacted file %s, want a name starting %s", f.Key, want)
				}
			}
			e.checkLake(id, model)
			e.checkFileRanges(id)
			after := e.tiered(id)
			if after.LakeSnapshotID != res.SnapshotID || after.LakeSequence != res.Sequence || fmt.Sprint(after.Offsets) != fmt.Sprint(before.Offsets) ||
				!after.At.Equal(before.At) {
				t.Fatalf("the log records %+v after compaction %+v (before %+v)", after, res, before)
			}
			tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if op := tbl.CurrentSnapshot().Summary.Operation; op != "replace" {
				t.Fatalf("compaction snapshot operation %q, want replace", op)
			}
			// The compacted files carry statistics (and partitions).
			tasks, err := tbl.Scan().PlanFiles(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			offField, _ := tbl.Schema().FindFieldByName(OffsetColumn)
			for _, task := range tasks {
				if task.File.LowerBoundValues()[offField.ID] == nil || task.File.UpperBoundValues()[offField.ID] == nil || task.File.Count() != 84 {
					t.Errorf("compacted file %s: %d rows, %s bounds %v..%v", task.File.FilePath(), task.File.Count(), OffsetColumn,
						task.File.LowerBoundValues()[offField.ID], task.File.UpperBoundValues()[offField.ID])
				}
				if partitioned && task.File.Partition()[1000] == nil {
					t.Errorf("compacted file %s has no partition value", task.File.FilePath())
				}
			}
			// mink's reader, from the pinned snapshot, in file order.
			r := NewLakeReader(e.store.Inner(), storeURL, nil)
			ids, _, err := scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: after.LakeSnapshotID, Schema: minkSchema(t, spec, "id")})
			if err != nil || len(ids) != int(next) {
				t.Fatalf("mink's read after compaction: %d rows, %v", len(ids), err)
			}
			// Tiering goes on, and the old files are garbage only once
			// their snapshots expire.
			model[bs[0]] = append(model[bs[0]], e.appendRows(id, bs[0], 5000, 3)...)
			if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Rows != 3 {
				t.Fatalf("round after compaction: %+v, %v", res, err)
			}
			e.checkLake(id, model)
			checkGC(t, e, id, model)
			if _, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err != nil {
				t.Fatal(err)
			}
			checkGC(t, e, id, model)
			objs, err := e.store.Inner().List(e.ctx, LakePrefix(id)+"data/")
			if err != nil || len(objs) != len(bs)+1 {
				t.Fatalf("%d data objects stored after expiry and gc, want %d (%v)", len(objs), len(bs)+1, err)
			}
		})
	}
}

// TestCompactGroups: runs stop at large files, at gaps and at the target
// size; single files are left.
func TestCompactGroups(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, ""))
	b := sortedKeys(e.ends(id))[0]
	tr := e.tierer()
	model := map[catalog.BucketID][]row{}
	sizes := []int{5, 5, 5, 4000, 5, 5, 5, 5, 5, 5}
	for i, n := range sizes {
		model[b] = append(model[b], e.appendRows(id, b, int64(i*1000), n)...)
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	files := e.lakeDataFiles(id)
	var big, small int64
	for _, f := range files {
		if _, from, to, _ := parseLogFile(f.Key); to-from == 4000 {
			big = f.Size
		} else {
			small = max(small, f.Size)
		}
	}
	if big <= 3*small {
		t.Fatalf("the 4000-row file (%d bytes) is not larger than three 5-row files (%d bytes each)", big, small)
	}
	// Target: the big file is not small; three small files fit in one.
	target := min(big, 3*small+small/2)
	res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: target, MinFiles: 2})
	if err != nil || !res.Committed {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	var got []string
	for _, f := range e.lakeDataFiles(id) {
		_, from, to, _ := parseLogFile(f.Key)
		got = append(got, fmt.Sprintf("%d-%d", from, to))
	}
	slices.Sort(got)
	// [0,15) from three files; the 4000-row file alone; then six small
	// files in runs of three.
	if want := "[0-15 15-4015 4015-4030 4030-4045]"; fmt.Sprint(got) != want {
		t.Fatalf("files after compaction %v, want %s", got, want)
	}
	e.checkLake(id, model)
	e.checkFileRanges(id)
}

// TestCompactPKTableDoesNothing: primary-key lakes are rewritten per bucket
// by their rounds; compaction leaves them alone.
func TestCompactPKTableDoesNothing(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(pkSpec("kv", 1, false))
	m := newPKModel(e, id, seed(t))
	for range 3 {
		for b := range e.ends(id) {
			m.change(b, 10)
		}
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := e.tierer().Compact(e.ctx, id, e.epoch, CompactPolicy{MinFiles: 1}); err != nil || res.Committed {
		t.Fatalf("compaction of a primary-key table: %+v, %v", res, err)
	}
	m.check()
}

// compactEnv is a table with two buckets and six small files in each.
func compactEnv(t *testing.T) (*env, catalog.TableID, map[catalog.BucketID][]row) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 2, ""))
	bs := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	tr := e.tierer()
	for i := range 6 {
		for j, b := range bs {
			model[b] = append(model[b], e.appendRows(id, b, int64(i*100+j*10), 4+j)...)
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	return e, id, model
}

var testCompactPolicy = CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 2}

// compactPuts lists the object-store writes of one successful compaction.
func compactPuts(t *testing.T) []string {
	e, id, _ := compactEnv(t)
	var mu sync.Mutex
	var keys []string
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut {
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		}
		return nil
	}})
	if res, err := e.tierer().Compact(e.ctx, id, e.epoch, testCompactPolicy); err != nil || !res.Committed {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	return keys
}

// TestCompactFailsAtEveryWrite fails a compaction at each of its
// object-store writes, before the write and after it (response lost): the
// lake reads the same after the failure, the retried compaction (or, after
// a lost commit response, the next round's repair) leaves one file per
// bucket, and the collector removes exactly the garbage.
func TestCompactFailsAtEveryWrite(t *testing.T) {
	puts := compactPuts(t)
	if len(puts) < 4 {
		t.Fatalf("a compaction made only %d writes: %v", len(puts), puts)
	}
	for i := range puts {
		for _, lost := range []bool{false, true} {
			t.Run(fmt.Sprintf("write%d-%s-lost=%v", i, path.Base(puts[i]), lost), func(t *testing.T) {
				e, id, model := compactEnv(t)
				e.failPut(i, lost)
				tr := e.tierer()
				if _, err := tr.Compact(e.ctx, id, e.epoch, testCompactPolicy); err == nil {
					t.Fatalf("compaction succeeded with write %d failing", i)
				}
				e.store.SetHooks(objstore.Hooks{})
				e.checkLake(id, model)
				res, err := tr.Compact(e.ctx, id, e.epoch, testCompactPolicy)
				if err != nil {
					t.Fatal(err)
				}
				lastPut := i == len(puts)-1
				if lost && lastPut {
					// The lost commit took effect: nothing left to do,
					// and the next round records the snapshot.
					if res.Committed {
						t.Fatalf("compaction after a lost commit response: %+v", res)
					}
					if r, err := tr.Round(e.ctx, id, e.epoch); err != nil || !r.Repaired {
						t.Fatalf("round after a lost compaction commit: %+v, %v", r, err)
					}
				} else if !res.Committed || res.FilesAfter != 2 {
					t.Fatalf("retried compaction: %+v", res)
				}
				if n := len(e.lakeDataFiles(id)); n != 2 {
					t.Fatalf("%d data files after the retry", n)
				}
				e.checkLake(id, model)
				e.checkFileRanges(id)
				checkGC(t, e, id, model)
			})
		}
	}
}

// TestCompactFenced: a new coordinator registers while the compaction writes
// its files (it stops and commits nothing), or just after its lake commit
// (its CommitTieringRound is rejected and the new holder's round records
// the snapshot).
func TestCompactFenced(t *testing.T) {
	for _, afterCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("afterCommit=%v", afterCommit), func(t *testing.T) {
			e, id, model := compactEnv(t)
			old := e.epoch
			_, version := e.lakeSnapshots(id)
			var once sync.Once
			commitKey := fmt.Sprintf("/v%d.metadata.json", version+1)
			e.store.SetHooks(objstore.Hooks{After: func(_ context.Context, op objstore.Op, key string, err error) error {
				if op == objstore.OpPut && err == nil && (afterCommit == strings.HasSuffix(key, commitKey)) && (afterCommit || strings.Contains(key, "/data/")) {
					once.Do(e.newCoordinator)
				}
				return err
			}})
			res, err := e.tierer().Compact(e.ctx, id, old, testCompactPolicy)
			if !errors.Is(err, ErrFenced) || res.Committed != afterCommit {
				t.Fatalf("compaction of the fenced coordinator: %+v, %v", res, err)
			}
			e.store.SetHooks(objstore.Hooks{})
			if _, v := e.lakeSnapshots(id); (v == version) == afterCommit {
				t.Fatalf("metadata version %d after the fenced compaction (was %d)", v, version)
			}
			r, err := e.tierer().Round(e.ctx, id, e.epoch)
			if err != nil || r.Repaired != afterCommit || r.Committed {
				t.Fatalf("new holder's round: %+v, %v", r, err)
			}
			e.checkLake(id, model)
			checkGC(t, e, id, model)
		})
	}
}

// TestCompactLosesToRound: a round commits while a compaction writes its
// files; the compaction's commit fails (ErrLakeConflict), its file is
// garbage, and the lake holds each row once.
func TestCompactLosesToRound(t *testing.T) {
	e, id, model := compactEnv(t)
	bs := sortedKeys(model)
	tr := e.tierer()
	// The first data file written is the compaction's (the round runs
	// inside the hook, and its own writes must not fire it again).
	var fired atomic.Bool
	e.store.SetHooks(objstore.Hooks{After: func(_ context.Context, op objstore.Op, key string, err error) error {
		if op == objstore.OpPut && err == nil && strings.Contains(key, "/data/") && fired.CompareAndSwap(false, true) {
			model[bs[1]] = append(model[bs[1]], e.appendRows(id, bs[1], 9000, 5)...)
			if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
				t.Error(err)
			}
		}
		return err
	}})
	if _, err := tr.Compact(e.ctx, id, e.epoch, testCompactPolicy); !errors.Is(err, ErrLakeConflict) {
		t.Fatalf("compaction that lost to a round: %v", err)
	}
	e.store.SetHooks(objstore.Hooks{})
	e.checkLake(id, model)
	checkGC(t, e, id, model)
	if res, err := tr.Compact(e.ctx, id, e.epoch, testCompactPolicy); err != nil || !res.Committed {
		t.Fatalf("compaction after the round: %+v, %v", res, err)
	}
	e.checkLake(id, model)
	e.checkFileRanges(id)
}

// TestLakeHistoryRandom runs a seeded random history of appends, rounds,
// compactions, expiries and collections, some of them failing at a random
// object-store write, and checks after each step that the lake (read by
// iceberg-go, and by mink's reader at the snapshot the log records) equals
// the model, and that the collector leaves exactly what the lake
// references.
func TestLakeHistoryRandom(t *testing.T) {
	s := seed(t)
	rng := rand.New(rand.NewPCG(s, s^0x5eed))
	e := newEnv(t)
	spec := testSpec("events", 3, "")
	id := e.createTable(spec)
	bs := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	tiered := map[catalog.BucketID]int{} // rows of each bucket the log says are tiered
	tr := e.tierer()
	gc := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 0)
	reader := NewLakeReader(e.store.Inner(), storeURL, nil)
	next := int64(0)
	compacted, expired := 0, 0
	failNext := func() {
		// Fail one of the next few writes, before or after it lands.
		k, lost := 1+rng.IntN(4), rng.IntN(2) == 0
		e.failPut(k-1, lost)
	}
	for step := range 120 {
		faulty := rng.IntN(5) == 0
		if faulty {
			failNext()
		}
		var (
			op  string
			err error
		)
		switch k := rng.IntN(10); {
		case k < 4:
			op = "append"
			b := bs[rng.IntN(len(bs))]
			n := 1 + rng.IntN(20)
			model[b] = append(model[b], e.appendRows(id, b, next, n)...)
			next += int64(n)
		case k < 6:
			op = "round"
			_, err = tr.Round(e.ctx, id, e.epoch)
		case k < 8:
			op = "compact"
			var res CompactResult
			res, err = tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: int64(2000 + rng.IntN(20000)), MinFiles: 1 + rng.IntN(3)})
			if res.Committed && err == nil {
				compacted++
			}
		case k < 9:
			op = "expire"
			var res ExpireResult
			res, err = tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1 + rng.IntN(3)})
			expired += res.Expired
		default:
			op = "gc"
			_, err = gc.Collect(e.ctx, []catalog.TableID{id})
		}
		e.store.SetHooks(objstore.Hooks{})
		if err != nil && !faulty {
			t.Fatalf("step %d %s: %v", step, op, err)
		}
		// The lake holds, per bucket, a prefix of the model: what the
		// log says is tiered, or more after a lost record.
		got := e.readLake(id)
		ts := e.tiered(id)
		for _, b := range bs {
			if int(ts.Offsets[b]) < tiered[b] {
				t.Fatalf("step %d %s: bucket %d tiered offset went back from %d to %d", step, op, b, tiered[b], ts.Offsets[b])
			}
			tiered[b] = int(ts.Offsets[b])
			if len(got[b]) < tiered[b] || len(got[b]) > len(model[b]) {
				t.Fatalf("step %d %s: bucket %d: lake has %d rows, the log says %d are tiered, %d written", step, op, b, len(got[b]), tiered[b], len(model[b]))
			}
			for off := range len(got[b]) {
				r, ok := got[b][uint64(off)]
				if !ok || !sameRow(r.row, model[b][off]) {
					t.Fatalf("step %d %s: bucket %d offset %d: lake has %v (%v), want %s", step, op, b, off, fmtRow(r.row), ok, fmtRow(model[b][off]))
				}
			}
		}
		if ts.LakeSnapshotID != 0 {
			// mink's reader at the snapshot queries pin.
			want := 0
			for _, b := range bs {
				want += tiered[b]
			}
			ids, _, err := scanIDs(t, e, reader, ScanRequest{Table: id, Snapshot: ts.LakeSnapshotID, Schema: minkSchema(t, spec, "id")})
			if err != nil || len(ids) < want {
				t.Fatalf("step %d %s: mink's read of the pinned snapshot: %d rows, want at least %d: %v", step, op, len(ids), want, err)
			}
		}
		if op == "gc" && !faulty {
			e.checkStoreIsReferenced(id)
		}
	}
	t.Logf("%d compactions committed, %d snapshots expired", compacted, expired)
	if compacted == 0 || expired == 0 {
		t.Fatalf("the history committed %d compactions and expired %d snapshots: it tests too little", compacted, expired)
	}
	// Finally everything is tiered, compacted, expired and collected.
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 30, MinFiles: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Collect(e.ctx, []catalog.TableID{id}); err != nil {
		t.Fatal(err)
	}
	e.checkLake(id, model)
	e.checkFileRanges(id)
	e.checkStoreIsReferenced(id)
	if n := len(e.lakeDataFiles(id)); n > len(bs) {
		t.Fatalf("%d data files after the final compaction of %d buckets", n, len(bs))
	}
}

// TestCompactWriteAmplification simulates a day of one-minute rounds of a
// slow bucket (1,440 files of 10 KiB) compacted after every round with the
// default policy: merging only files of similar size rewrites each byte a
// few times (not once per compaction, which would be hundreds), and the
// bucket never has more than a few dozen files.
func TestCompactWriteAmplification(t *testing.T) {
	const (
		fileSize = 10 << 10
		fileRows = 100
		rounds   = 1440
	)
	mk := func(from, to uint64, size int64) logFile {
		b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData,
			fmt.Sprintf("%s/lake/1/data/b1-%d-%d-e1-x.parquet", storeURL, from, to), iceberg.ParquetFile, nil, nil, nil, int64(to-from), size)
		if err != nil {
			t.Fatal(err)
		}
		return logFile{df: b.Build(), bucket: 1, from: from, to: to}
	}
	var (
		files      []logFile
		written    int64
		maxFiles   int
		compaction int
	)
	// Round files vary by ±20% (a fixed size could hide a run broken by
	// sizes on either side of a boundary).
	sd := seed(t)
	rng := rand.New(rand.NewPCG(sd, sd))
	var data int64
	for r := range rounds {
		size := int64(fileSize*4/5 + rng.IntN(fileSize*2/5))
		data += size
		files = append(files, mk(uint64(r*fileRows), uint64((r+1)*fileRows), size))
		groups := compactGroups(files, DefaultTargetFileSize, 1<<20, DefaultCompactMinFiles)
		for _, g := range groups {
			compaction++
			var size int64
			for _, f := range g {
				size += f.df.FileSizeBytes()
				files = slices.DeleteFunc(files, func(x logFile) bool { return x.from == f.from })
			}
			files = append(files, mk(g[0].from, g[len(g)-1].to, size))
			written += size
		}
		maxFiles = max(maxFiles, len(files))
	}
	amp := float64(written) / float64(data)
	t.Logf("%d compactions, %d files at most, %d at the end, compaction wrote %.2f× the data", compaction, maxFiles, len(files), amp)
	if amp > 3 || maxFiles > 4*(DefaultCompactMinFiles+1) || compaction == 0 {
		t.Fatalf("%d compactions, %d files at most, write amplification %.2f", compaction, maxFiles, amp)
	}
}
