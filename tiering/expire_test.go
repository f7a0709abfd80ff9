package tiering

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// lakeSnapshots returns the snapshot ids of the current lake metadata,
// oldest first, and its metadata version.
func (e *env) lakeSnapshots(id catalog.TableID) ([]int64, int) {
	e.t.Helper()
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if tbl == nil {
		return nil, 0
	}
	var ids []int64
	for _, s := range tbl.Metadata().Snapshots() {
		ids = append(ids, s.SnapshotID)
	}
	return ids, metadataVersion(tbl.MetadataLocation())
}

// checkStoreIsReferenced asserts that every object under the table's lake
// is referenced (GC left no garbage) and every referenced object exists.
func (e *env) checkStoreIsReferenced(id catalog.TableID) {
	e.t.Helper()
	refs, err := NewLake(e.store.Inner(), storeURL).references(e.ctx, id, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	objs, err := e.store.Inner().List(e.ctx, LakePrefix(id))
	if err != nil {
		e.t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, o := range objs {
		stored[o.Key] = true
		if !refs[o.Key] {
			e.t.Errorf("garbage left: %s", o.Key)
		}
	}
	for k := range refs {
		if !stored[k] {
			e.t.Errorf("referenced object %s is missing", k)
		}
	}
}

// commitUnrecorded commits an empty lake snapshot carrying the current
// offsets without recording it in the metadata log (as a round whose
// CommitTieringRound was lost does): the log then points to an older
// snapshot than the lake's current one.
func (e *env) commitUnrecorded(id catalog.TableID) int64 {
	e.t.Helper()
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	props := iceberg.Properties{OffsetsProperty: tbl.CurrentSnapshot().Summary.Properties[OffsetsProperty], EpochProperty: strconv.FormatUint(e.epoch, 10)}
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(e.ctx, nil, props, true); err != nil {
		e.t.Fatal(err)
	}
	tbl, err = tx.Commit(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return tbl.CurrentSnapshot().SnapshotID
}

// TestExpireSnapshots: after six rounds, expiry keeps the newest snapshots
// (and only those), the lake reads the same, and the collector then deletes
// the manifest lists of the expired snapshots and nothing the kept ones use.
func TestExpireSnapshots(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 2, ""))
	bs := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	tr := e.tierer()
	for i := range 6 {
		b := bs[i%2]
		model[b] = append(model[b], e.appendRows(id, b, int64(i*100), 10+i)...)
		if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || !res.Committed {
			t.Fatalf("round %d: %+v, %v", i, res, err)
		}
	}
	snaps, _ := e.lakeSnapshots(id)
	if len(snaps) != 6 {
		t.Fatalf("%d lake snapshots after 6 rounds", len(snaps))
	}
	// Everything is younger than an hour: nothing expires.
	if res, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{Retention: time.Hour, KeepLast: 1}); err != nil || res.Expired != 0 || res.Kept != 6 {
		t.Fatalf("expiry within the retention: %+v, %v", res, err)
	}
	res, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{Retention: 0, KeepLast: 2})
	if err != nil || res.Expired != 4 || res.Kept != 2 {
		t.Fatalf("expiry keeping 2: %+v, %v", res, err)
	}
	left, version := e.lakeSnapshots(id)
	if fmt.Sprint(left) != fmt.Sprint(snaps[4:]) || version != res.Version {
		t.Fatalf("lake keeps snapshots %v (version %d), want %v (version %d)", left, version, snaps[4:], res.Version)
	}
	e.checkLake(id, model)
	checkGC(t, e, id, model)
	e.checkStoreIsReferenced(id)
	// Expired manifest lists are gone from the store.
	objs, err := e.store.Inner().List(e.ctx, LakePrefix(id)+"metadata/snap-")
	if err != nil || len(objs) != 2 {
		t.Fatalf("%d manifest lists stored after expiry, want 2 (%v)", len(objs), err)
	}
	// Tiering goes on.
	model[bs[0]] = append(model[bs[0]], e.appendRows(id, bs[0], 1000, 7)...)
	if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Rows != 7 {
		t.Fatalf("round after expiry: %+v, %v", res, err)
	}
	e.checkLake(id, model)
}

// TestExpireKeepsPinnedSnapshot: the snapshot the metadata log points to (and
// queries pin) is kept even when it is older than KeepLast, and still reads.
func TestExpireKeepsPinnedSnapshot(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, ""))
	b := sortedKeys(e.ends(id))[0]
	tr := e.tierer()
	var model []row
	for i := range 3 {
		model = append(model, e.appendRows(id, b, int64(i*100), 20)...)
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	pinned := e.tiered(id).LakeSnapshotID
	for range 3 {
		e.commitUnrecorded(id)
	}
	snaps, _ := e.lakeSnapshots(id)
	res, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1})
	if err != nil || res.Expired != 2 || res.Kept != 4 {
		t.Fatalf("expiry: %+v, %v", res, err)
	}
	left, _ := e.lakeSnapshots(id)
	if left[0] != pinned || fmt.Sprint(left) != fmt.Sprint(snaps[2:]) {
		t.Fatalf("kept %v, want the pinned %d and the three after it", left, pinned)
	}
	checkGC(t, e, id, map[catalog.BucketID][]row{b: model})
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	ids, _, err := scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: pinned, Schema: minkSchema(t, testSpec("events", 1, ""), "id")})
	if err != nil || len(ids) != 60 {
		t.Fatalf("read of the pinned snapshot: %d rows, %v", len(ids), err)
	}
	// The log disagreeing with the lake (its snapshot is not in the lake's
	// ancestry) expires nothing.
	e.propose(catalog.CommitTieringRound{Table: id, CoordinatorEpoch: e.epoch, Offsets: map[catalog.BucketID]uint64{b: 60},
		LakeSnapshotID: 12345, LakeSequence: 1000, At: time.Now()})
	if res, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err == nil || res.Expired != 0 {
		t.Fatalf("expiry with a log snapshot unknown to the lake: %+v, %v", res, err)
	}
}

// TestExpirePKReleasesReplacedFiles: on a primary-key table every round
// replaces the changed buckets' files; once the snapshots that held the old
// files expire, the collector deletes them and the store holds exactly the
// current files.
func TestExpirePKReleasesReplacedFiles(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(pkSpec("kv", 2, false))
	m := newPKModel(e, id, seed(t))
	tr := e.tierer()
	written := 0
	for range 4 {
		for b := range e.ends(id) {
			m.change(b, 20)
		}
		res, err := tr.Round(e.ctx, id, e.epoch)
		if err != nil {
			t.Fatal(err)
		}
		written += res.Files
	}
	countData := func() int {
		objs, err := e.store.Inner().List(e.ctx, LakePrefix(id)+"data/")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	currentFiles := func() int {
		n := 0
		for _, fs := range e.readLakeFiles(id) {
			n += len(fs)
		}
		return n
	}
	current := currentFiles()
	if n := countData(); n != written || n <= current {
		t.Fatalf("%d data files stored after 4 rounds that wrote %d; the lake has %d", n, written, current)
	}
	m.checkGC() // nothing expired: every file is kept
	if n := countData(); n != written {
		t.Fatalf("gc before expiry left %d data files, want %d", n, written)
	}
	if res, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err != nil || res.Expired != 3 {
		t.Fatalf("expiry: %+v, %v", res, err)
	}
	m.checkGC()
	if n := countData(); n != currentFiles() || n != current {
		t.Fatalf("%d data files stored after expiry and gc, the lake has %d", n, current)
	}
	e.checkStoreIsReferenced(id)
}

// TestExpireOldMetadataVersions: metadata versions that fall out of the
// current version's metadata log (write.metadata.previous-versions-max) are
// garbage; the lake still loads and rounds go on.
func TestExpireOldMetadataVersions(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, ""))
	b := sortedKeys(e.ends(id))[0]
	tr := e.tierer()
	var model []row
	for i := range 2 {
		model = append(model, e.appendRows(id, b, int64(i*100), 5)...)
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.MetadataPreviousVersionsMaxKey: "2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 6; i++ {
		model = append(model, e.appendRows(id, b, int64(i*100), 5)...)
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	_, version := e.lakeSnapshots(id) // v1 created, 2 rounds, properties, 4 rounds
	if version != 8 {
		t.Fatalf("metadata version %d, want 8", version)
	}
	models := map[catalog.BucketID][]row{b: model}
	checkGC(t, e, id, models)
	objs, err := e.store.Inner().List(e.ctx, LakePrefix(id)+"metadata/v")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key[strings.LastIndexByte(o.Key, '/')+1:])
	}
	if want := "[v6.metadata.json v7.metadata.json v8.metadata.json]"; fmt.Sprint(got) != want {
		t.Fatalf("metadata versions kept: %v, want %s", got, want)
	}
	model = append(model, e.appendRows(id, b, 600, 5)...)
	if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Rows != 5 {
		t.Fatalf("round after the old versions went: %+v, %v", res, err)
	}
	e.checkLake(id, map[catalog.BucketID][]row{b: model})
}

// TestExpireFenced: an expiry under a stale coordinator epoch commits
// nothing.
func TestExpireFenced(t *testing.T) {
	e, id, _ := faultEnv(t)
	tr := e.tierer()
	for range 3 {
		e.commitUnrecordedAfterRound(tr, id)
	}
	_, before := e.lakeSnapshots(id)
	old := e.epoch
	e.newCoordinator()
	if _, err := tr.Expire(e.ctx, id, old, ExpirePolicy{KeepLast: 1}); !errors.Is(err, ErrFenced) {
		t.Fatalf("expiry under a stale epoch: %v", err)
	}
	if _, after := e.lakeSnapshots(id); after != before {
		t.Fatalf("a fenced expiry committed metadata version %d", after)
	}
}

func (e *env) commitUnrecordedAfterRound(tr *Tierer, id catalog.TableID) {
	e.t.Helper()
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		e.t.Fatal(err)
	}
	e.commitUnrecorded(id)
}

// TestExpireFailsHalfWay fails the expiry's metadata commit, before it
// reaches the store and after (the response is lost): the lake reads the
// same either way, a second expiry finishes the job, and the collector
// leaves exactly what the kept snapshots use.
func TestExpireFailsHalfWay(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost=%v", lost), func(t *testing.T) {
			e, id, model := faultEnv(t)
			tr := e.tierer()
			bs := sortedKeys(model)
			for i := range 3 {
				model[bs[0]] = append(model[bs[0]], e.appendRows(id, bs[0], int64(1000+i*100), 4)...)
				if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
					t.Fatal(err)
				}
			}
			_, version := e.lakeSnapshots(id)
			next := fmt.Sprintf("/metadata/v%d.metadata.json", version+1)
			var once sync.Once
			e.store.SetHooks(objstore.Hooks{
				Before: func(_ context.Context, op objstore.Op, key string) error {
					if !lost && op == objstore.OpPut && strings.HasSuffix(key, next) {
						return objstore.ErrInjected
					}
					return nil
				},
				After: func(_ context.Context, op objstore.Op, key string, err error) error {
					if lost && err == nil && op == objstore.OpPut && strings.HasSuffix(key, next) {
						once.Do(func() { err = objstore.ErrResponseLost })
					}
					return err
				},
			})
			if _, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err == nil {
				t.Fatal("expiry succeeded with its commit failing")
			}
			e.store.SetHooks(objstore.Hooks{})
			e.checkLake(id, model)
			res, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1})
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := e.lakeSnapshots(id); len(left) != 1 || (lost != (res.Expired == 0)) {
				t.Fatalf("after the retry: %d snapshots, %+v", len(left), res)
			}
			checkGC(t, e, id, model)
			e.checkStoreIsReferenced(id)
		})
	}
}

// TestCollectDropped: the lake of a dropped table goes (after the delay),
// the lakes of live tables stay, and a lake under an id the catalog never
// handed out is left alone. Objects a late round writes into the dropped
// lake go in a later pass.
func TestCollectDropped(t *testing.T) {
	e := newEnv(t)
	keep := e.createTable(testSpec("kept", 1, ""))
	drop := e.createTable(testSpec("dropped", 2, ""))
	model := map[catalog.BucketID][]row{}
	for _, id := range []catalog.TableID{keep, drop} {
		for _, b := range sortedKeys(e.ends(id)) {
			rows := e.appendRows(id, b, 0, 12)
			if id == keep {
				model[b] = rows
			}
		}
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	foreign := catalog.TableID(1 << 40)
	if err := e.store.Inner().PutIfAbsent(e.ctx, LakePrefix(foreign)+"metadata/v1.metadata.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	e.propose(catalog.DropTable{Table: drop})
	live := func([]catalog.TableID) (map[catalog.TableID]bool, uint64) {
		out := map[catalog.TableID]bool{}
		var next uint64
		e.cat.Read(func(v *catalog.View) {
			for id := range v.Tables {
				out[id] = true
			}
			next = v.NextID
		})
		return out, next
	}
	count := func(id catalog.TableID) int {
		objs, err := e.store.Inner().List(e.ctx, LakePrefix(id))
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	dropped, kept := count(drop), count(keep)
	if dropped == 0 {
		t.Fatal("the dropped table has no lake")
	}
	gc := NewLakeCollector(NewLake(e.store.Inner(), storeURL), time.Hour)
	now := time.Now()
	gc.now = func() time.Time { return now }
	if st, err := gc.CollectDropped(e.ctx, live); err != nil || st.Deleted != 0 || st.Waiting != dropped {
		t.Fatalf("first pass: %+v, %v (the dropped lake has %d objects)", st, err, dropped)
	}
	// A late round of an old lease holder writes one more file.
	late := LakePrefix(drop) + "data/b99-0-1-e1-late.parquet"
	if err := e.store.Inner().PutIfAbsent(e.ctx, late, []byte("x")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if st, err := gc.CollectDropped(e.ctx, live); err != nil || st.Deleted != dropped || st.Waiting != 1 {
		t.Fatalf("pass after the delay: %+v, %v", st, err)
	}
	now = now.Add(2 * time.Hour)
	if st, err := gc.CollectDropped(e.ctx, live); err != nil || st.Deleted != 1 {
		t.Fatalf("pass after the late file's delay: %+v, %v", st, err)
	}
	if n := count(drop); n != 0 {
		t.Fatalf("%d objects of the dropped lake left", n)
	}
	if count(keep) != kept || count(foreign) != 1 {
		t.Fatalf("other lakes changed: kept table %d -> %d objects, foreign %d", kept, count(keep), count(foreign))
	}
	e.checkLake(keep, model)
}
