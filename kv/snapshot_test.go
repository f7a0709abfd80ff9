package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

// write runs one batch through the write path (Changes, the changelog,
// Apply) and returns the records.
func write(t testing.TB, c *kvcodec.Codec, tab *Tablet, l *memLog, writes []kvcodec.Write) []kvcodec.ChangeRecord {
	t.Helper()
	records, err := Changes(tab, writes)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 {
		return nil
	}
	if err := tab.Apply(records, l.append(t, c, records)); err != nil {
		t.Fatal(err)
	}
	return records
}

// fill upserts rows ids [from, to) with value v, in batches of 100.
func fill(t testing.TB, c *kvcodec.Codec, tab *Tablet, l *memLog, from, to int, v string) {
	t.Helper()
	for start := from; start < to; start += 100 {
		var rows []testRow
		for id := start; id < min(start+100, to); id++ {
			rows = append(rows, testRow{id: int64(id), name: "r", v: ptr(v), n: ptr(int64(id))})
		}
		keys, encoded := encodeRows(t, c, rows...)
		writes := make([]kvcodec.Write, len(keys))
		for i := range keys {
			writes[i] = kvcodec.Write{Op: kvcodec.OpUpsert, Key: keys[i], Row: encoded[i]}
		}
		write(t, c, tab, l, writes)
	}
}

// deleteRange deletes rows ids [from, to).
func deleteRange(t testing.TB, c *kvcodec.Codec, tab *Tablet, l *memLog, from, to int) {
	t.Helper()
	var rows []testRow
	for id := from; id < to; id++ {
		rows = append(rows, testRow{id: int64(id), name: "r"})
	}
	keys, _ := encodeRows(t, c, rows...)
	var writes []kvcodec.Write
	for _, k := range keys {
		writes = append(writes, kvcodec.Write{Op: kvcodec.OpDelete, Key: k})
	}
	write(t, c, tab, l, writes)
}

// flush makes the memtable an sstable, so that snapshots have several.
func flush(t testing.TB, tab *Tablet) {
	t.Helper()
	if err := tab.db.Flush(); err != nil {
		t.Fatal(err)
	}
}

func snapshotOf(rec catalog.CommitKVSnapshot) catalog.KVSnapshot {
	return catalog.KVSnapshot{ID: rec.SnapshotID, LeaderEpoch: rec.LeaderEpoch, LogOffset: rec.LogOffset, Manifest: rec.Manifest}
}

// restoreExactly restores snapshot s alone and checks that it holds exactly
// the changelog's state at its offset.
func restoreExactly(t testing.TB, ctx context.Context, store objstore.Store, root string, gen *int, bucket catalog.BucketID, l *memLog, s catalog.KVSnapshot) {
	t.Helper()
	*gen++
	tab, res, err := Restore(ctx, store, filepath.Join(root, fmt.Sprintf("tablet-%d", *gen)), RestoreOptions{
		Bucket: bucket, Snapshots: []catalog.KVSnapshot{s}, Tablet: testOptions()})
	if err != nil || len(res.Skipped) > 0 || res.Snapshot == nil {
		t.Fatalf("restore snapshot %d: %v, skipped %v", s.ID, err, res.Skipped)
	}
	defer tab.Close()
	if res.LogOffset != s.LogOffset {
		t.Fatalf("snapshot %d restored at offset %d, committed at %d", s.ID, res.LogOffset, s.LogOffset)
	}
	if d := diffStates(t, testCodecNoT(), tabletState(t, tab), l.stateAt(t, testCodecNoT(), s.LogOffset)); d != "" {
		t.Fatalf("snapshot %d differs from the changelog at offset %d:\n%s", s.ID, s.LogOffset, d)
	}
}

// TestSnapshotWhileWriting takes snapshots while a writer keeps upserting
// and deleting, and checks that each restores to exactly the changelog's
// state at its offset (no lost update, no resurrected delete), and to the
// final state after replay.
func TestSnapshotWhileWriting(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	t.Logf("seed %d", seed)
	c := testCodec(t)
	mv := newMetaView(t)
	store := objstore.NewMem()
	root := t.TempDir()
	tab, err := Open(filepath.Join(root, "tablet-0"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()

	var (
		mu  sync.Mutex // guards log
		log memLog
	)
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for n := 0; ; n++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			var writes []kvcodec.Write
			for range 1 + rng.IntN(8) {
				r := testRow{id: rng.Int64N(300), name: "w", v: ptr(fmt.Sprint(n)), n: ptr(int64(n))}
				keys, rows := encodeRows(t, c, r)
				if rng.IntN(3) == 0 {
					writes = append(writes, kvcodec.Write{Op: kvcodec.OpDelete, Key: keys[0]})
				} else {
					writes = append(writes, kvcodec.Write{Op: kvcodec.OpUpsert, Key: keys[0], Row: rows[0]})
				}
			}
			records, err := Changes(tab, writes)
			if err != nil {
				writerDone <- err
				return
			}
			if len(records) == 0 {
				continue
			}
			// The writer is the only appender: the changelog order is the
			// apply order.
			mu.Lock()
			end := log.append(t, c, records)
			mu.Unlock()
			if err := tab.Apply(records, end); err != nil {
				writerDone <- err
				return
			}
		}
	}()

	var snaps []catalog.KVSnapshot
	for range 4 {
		// Let the writer make progress between snapshots.
		for {
			mu.Lock()
			end := log.end
			mu.Unlock()
			if end >= uint64(len(snaps)+1)*400 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		res, err := mv.snapshot(ctx, tab, store)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snapshotOf(res.Record))
	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	final := tabletState(t, tab)
	if d := diffStates(t, c, final, log.stateAt(t, c, log.end)); d != "" {
		t.Fatalf("the tablet differs from its changelog:\n%s", d)
	}
	gen := 0
	for _, s := range snaps {
		restoreExactly(t, ctx, store, root, &gen, mv.bucket, &log, s)
		restored, _ := mv.restore(ctx, store, root, &gen, &log, []catalog.KVSnapshot{s})
		if d := diffStates(t, c, tabletState(t, restored), final); d != "" {
			t.Fatalf("snapshot %d plus replay differs from the final state:\n%s", s.ID, d)
		}
		restored.Close()
	}
	t.Logf("changelog end %d, snapshots at %v", log.end, snaps)
}

// objectsUnder lists the keys with prefix in store.
func objectsUnder(t testing.TB, store objstore.Store, prefix string) map[string]bool {
	t.Helper()
	infos, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range infos {
		out[o.Key] = true
	}
	return out
}

// referencedBy returns the objects that the retained snapshots need.
func referencedBy(t testing.TB, store objstore.Store, bucket catalog.BucketID, snaps []catalog.KVSnapshot) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range snaps {
		m, err := readManifest(context.Background(), store, bucket, s)
		if err != nil {
			t.Fatal(err)
		}
		out[s.Manifest] = true
		for _, f := range m.Files {
			if f.Key != "" {
				out[f.Key] = true
			}
		}
	}
	return out
}

// checkCollect runs garbage collection and checks that it deletes nothing a
// retained snapshot references and that every retained snapshot restores.
func checkCollect(t testing.TB, ctx context.Context, mv *metaView, store objstore.Store, root string, gen *int, l *memLog) []string {
	t.Helper()
	needed := referencedBy(t, store, mv.bucket, mv.retained())
	garbage := mv.collect(ctx, store)
	for _, k := range garbage {
		if needed[k] {
			t.Fatalf("garbage collection deleted %s, which a retained snapshot references", k)
		}
	}
	for _, s := range mv.retained() {
		restoreExactly(t, ctx, store, root, gen, mv.bucket, l, s)
	}
	return garbage
}

// TestSnapshotUploadFailsHalfway: a snapshot whose upload fails after some
// files leaves the retained snapshots intact, its objects are not collected
// while a retry may use them, and the retry succeeds reusing them.
func TestSnapshotUploadFailsHalfway(t *testing.T) {
	ctx := context.Background()
	c := testCodec(t)
	mv := newMetaView(t)
	store := objstore.NewFaulty(objstore.NewMem())
	root := t.TempDir()
	gen := 0
	var log memLog
	opts := testOptions()
	opts.UploadConcurrency = 1 // uploads in order: sstables, then the rest
	opts.noCompactions = true  // the sstables stay, so reuse can be counted
	tab, err := Open(filepath.Join(root, "tablet-0"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()

	fill(t, c, tab, &log, 0, 2000, "a")
	res1, err := mv.snapshot(ctx, tab, store)
	if err != nil {
		t.Fatal(err)
	}
	if res1.ReusedFiles != 0 || res1.UploadedFiles < 3 {
		t.Fatalf("first snapshot: uploaded %d, reused %d", res1.UploadedFiles, res1.ReusedFiles)
	}
	fill(t, c, tab, &log, 2000, 3000, "b")
	flush(t, tab)
	fill(t, c, tab, &log, 3000, 4000, "c")

	// Snapshot 2 fails half-way: its sstables are uploaded, the other files
	// fail (retries too).
	store.SetHooks(objstore.Hooks{Before: func(ctx context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut && !isImmutable(key) {
			return objstore.ErrInjected
		}
		return nil
	}})
	_, err = tab.Snapshot(ctx, store, SnapshotOptions{Bucket: mv.bucket, LeaderEpoch: mv.epoch, Retained: mv.retained()})
	store.Reset()
	if !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("snapshot with a failing put: %v", err)
	}
	failedPrefix := snapshotPrefix(mv.bucket, mv.epoch, 2)
	failed := objectsUnder(t, store, failedPrefix)
	if len(failed) < 2 || failed[failedPrefix+manifestName] {
		t.Fatalf("the failed attempt left %v: want its sstables and no manifest", failed)
	}
	// The failed attempt's objects are newer than every retained snapshot:
	// a retry may use them, so they are not garbage yet.
	if garbage := checkCollect(t, ctx, mv, store, root, &gen, &log); len(garbage) > 0 {
		t.Fatalf("collected %v while the retry may use them", garbage)
	}

	// A lost response on the retry's first put is not a failure.
	store.Inject(objstore.Rule{Ops: objstore.OpPut, Times: 1, LoseResponse: true})
	res2, err := mv.snapshot(ctx, tab, store)
	store.Reset()
	if err != nil {
		t.Fatal(err)
	}
	// Nothing uploaded before is uploaded again: every sstable of the retry
	// that snapshot 1 or the failed attempt stored is referenced there.
	known := map[string]string{}
	for _, f := range res1.Manifest.Files {
		if isImmutable(f.Name) {
			known[f.Name] = f.Key
		}
	}
	for k := range failed {
		known[k[len(failedPrefix):]] = k
	}
	reusedFromFailed := 0
	for _, f := range res2.Manifest.Files {
		if k, ok := known[f.Name]; ok && k != f.Key {
			t.Fatalf("the retry uploaded %s again as %s; it is stored at %s", f.Name, f.Key, k)
		}
		if failed[f.Key] {
			reusedFromFailed++
		}
		if strings.HasPrefix(f.Key, failedPrefix) && !isImmutable(f.Name) {
			t.Fatalf("the retry references the failed attempt's mutable file %s", f.Key)
		}
	}
	// Without compactions the sstables are: snapshot 1's, and the two the
	// failed attempt uploaded.
	if reusedFromFailed != 2 || res2.ReusedFiles != 3 {
		t.Fatalf("the retry reused %d files, %d from the failed attempt (%v); want 3 and 2", res2.ReusedFiles, reusedFromFailed, failed)
	}
	t.Logf("snapshot 1: %d files; failed attempt: %v; retry: uploaded %d, reused %d (%d from the failed attempt)",
		res1.UploadedFiles, failed, res2.UploadedFiles, res2.ReusedFiles, reusedFromFailed)

	// Snapshot 3 at the same epoch, after deletes; then snapshot 1 leaves
	// retention and
	// what only it and the failed attempt needed is garbage.
	fill(t, c, tab, &log, 4000, 4500, "d")
	deleteRange(t, c, tab, &log, 0, 500)
	if _, err := mv.snapshot(ctx, tab, store); err != nil {
		t.Fatal(err)
	}
	garbage := checkCollect(t, ctx, mv, store, root, &gen, &log)
	if len(garbage) == 0 {
		t.Fatal("nothing was collected after snapshot 1 left retention")
	}
	restored, _ := mv.restore(ctx, store, root, &gen, &log, mv.retained())
	defer restored.Close()
	if d := diffStates(t, c, tabletState(t, restored), tabletState(t, tab)); d != "" {
		t.Fatalf("restored tablet differs:\n%s", d)
	}
}

// TestSnapshotCommitRejected: a snapshot whose commit is rejected (the
// leader was fenced meanwhile) never costs a retained snapshot its files,
// and the new leader's snapshots proceed.
func TestSnapshotCommitRejected(t *testing.T) {
	ctx := context.Background()
	c := testCodec(t)
	mv := newMetaView(t)
	store := objstore.NewMem()
	root := t.TempDir()
	gen := 0
	var log memLog
	tab, err := Open(filepath.Join(root, "tablet-0"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()

	fill(t, c, tab, &log, 0, 1000, "a")
	if _, err := mv.snapshot(ctx, tab, store); err != nil {
		t.Fatal(err)
	}
	fill(t, c, tab, &log, 500, 1500, "b")
	res, err := tab.Snapshot(ctx, store, SnapshotOptions{Bucket: mv.bucket, LeaderEpoch: mv.epoch, Retained: mv.retained()})
	if err != nil {
		t.Fatal(err)
	}
	mv.lead() // a failover: the old leader's commit is stale
	if out := mv.apply(res.Record); !errors.Is(out.Err, catalog.ErrStaleEpoch) {
		t.Fatalf("stale commit: %v", out.Err)
	}
	checkCollect(t, ctx, mv, store, root, &gen, &log)

	// The new leader restores, replays, writes, snapshots twice. Every
	// sstable it still has from the restored snapshot is referenced, not
	// uploaded again (compactions may have replaced some).
	nl, restoredRes := mv.restore(ctx, store, root, &gen, &log, mv.retained())
	defer nl.Close()
	restoredManifest, err := readManifest(ctx, store, mv.bucket, *restoredRes.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	restoredKeys := map[string]string{}
	for _, f := range restoredManifest.Files {
		if isImmutable(f.Name) {
			restoredKeys[f.Name] = f.Key
		}
	}
	fill(t, c, nl, &log, 1500, 1600, "c")
	for range 2 {
		res, err := mv.snapshot(ctx, nl, store)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Manifest.Files {
			if k, ok := restoredKeys[f.Name]; ok && k != f.Key {
				t.Fatalf("the new leader uploaded %s again as %s; the restored snapshot has it at %s", f.Name, f.Key, k)
			}
		}
	}
	rejected := objectsUnder(t, store, snapshotPrefix(mv.bucket, res.Record.LeaderEpoch, res.Record.SnapshotID))
	garbage := checkCollect(t, ctx, mv, store, root, &gen, &log)
	for k := range rejected {
		if !strings.Contains(strings.Join(garbage, " "), k) {
			t.Errorf("%s of the rejected snapshot was not collected", k)
		}
	}
	if d := diffStates(t, c, tabletState(t, nl), log.stateAt(t, c, log.end)); d != "" {
		t.Fatal(d)
	}
}

// corruptObject rewrites an object of the inner store through fn.
func corruptObject(t testing.TB, store objstore.Store, key string, fn func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	data, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if data = fn(data); data != nil {
		if err := store.PutIfAbsent(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoreFallsBack damages the newest (or both) retained snapshots and
// checks that restore reports it loudly, naming the object, and falls back
// to the previous snapshot or to an empty tablet, never serving partial
// state.
func TestRestoreFallsBack(t *testing.T) {
	ctx := context.Background()
	c := testCodec(t)
	flipByte := func(data []byte) []byte { data[len(data)/2] ^= 0x40; return data }
	truncate := func(data []byte) []byte { return data[:len(data)-1] }
	halve := func(data []byte) []byte { return data[:len(data)/2] }
	remove := func([]byte) []byte { return nil }
	type picker func(t *testing.T, store objstore.Store, mv *metaView) string
	// newestSST picks an sstable that only the newest snapshot references.
	newestSST := func(t *testing.T, store objstore.Store, mv *metaView) string {
		retained := mv.retained()
		older := referencedBy(t, store, mv.bucket, retained[:1])
		m, err := readManifest(ctx, store, mv.bucket, retained[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			if isImmutable(f.Name) && !older[f.Key] {
				return f.Key
			}
		}
		t.Fatal("no sstable only the newest snapshot references")
		return ""
	}
	newestManifest := func(t *testing.T, store objstore.Store, mv *metaView) string { return mv.retained()[1].Manifest }
	olderManifest := func(t *testing.T, store objstore.Store, mv *metaView) string { return mv.retained()[0].Manifest }
	type damage struct {
		pick picker
		how  func([]byte) []byte
	}
	tests := []struct {
		name    string
		damage  []damage
		restore int // 1: the older snapshot; 0: none (full replay)
	}{
		{"corrupt sstable", []damage{{newestSST, flipByte}}, 1},
		{"truncated sstable", []damage{{newestSST, truncate}}, 1},
		{"missing sstable", []damage{{newestSST, remove}}, 1},
		{"missing manifest", []damage{{newestManifest, remove}}, 1},
		{"garbled manifest", []damage{{newestManifest, halve}}, 1},
		{"both manifests missing", []damage{{newestManifest, remove}, {olderManifest, remove}}, 0},
		{"newest sstable corrupt and older manifest garbled", []damage{{newestSST, flipByte}, {olderManifest, halve}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mv := newMetaView(t)
			store := objstore.NewFaulty(objstore.NewMem())
			root := t.TempDir()
			var log memLog
			tab, err := Open(filepath.Join(root, "tablet-0"), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			fill(t, c, tab, &log, 0, 1000, "a")
			if _, err := mv.snapshot(ctx, tab, store); err != nil {
				t.Fatal(err)
			}
			deleteRange(t, c, tab, &log, 0, 300)
			fill(t, c, tab, &log, 900, 1200, "b")
			if _, err := mv.snapshot(ctx, tab, store); err != nil {
				t.Fatal(err)
			}
			fill(t, c, tab, &log, 1200, 1300, "c")
			want := tabletState(t, tab)

			var damaged []string
			for _, d := range tt.damage {
				key := d.pick(t, store, mv)
				corruptObject(t, store.Inner(), key, d.how)
				damaged = append(damaged, key)
			}
			var reported []error
			restored, res, err := Restore(ctx, store, filepath.Join(root, "restored"), RestoreOptions{
				Bucket: mv.bucket, Snapshots: mv.retained(), Tablet: testOptions(),
				OnCorrupt: func(s catalog.KVSnapshot, err error) { reported = append(reported, err) },
			})
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			defer restored.Close()
			wantSkipped := 2 - tt.restore
			if len(res.Skipped) != wantSkipped || len(reported) != wantSkipped {
				t.Fatalf("skipped %v, reported %v; want %d", res.Skipped, reported, wantSkipped)
			}
			for i, err := range res.Skipped {
				if !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), damaged[i]) {
					t.Errorf("skip error %q: want ErrCorruptSnapshot naming %s", err, damaged[i])
				}
			}
			switch {
			case tt.restore == 1 && (res.Snapshot == nil || res.Snapshot.ID != mv.retained()[0].ID):
				t.Fatalf("restored %+v, want the older snapshot", res.Snapshot)
			case tt.restore == 0 && (res.Snapshot != nil || res.LogOffset != 0 || len(tabletState(t, restored)) != 0):
				t.Fatalf("restored %+v at offset %d, want an empty tablet", res.Snapshot, res.LogOffset)
			}
			log.replay(t, c, restored, res.LogOffset)
			if d := diffStates(t, c, tabletState(t, restored), want); d != "" {
				t.Fatalf("after replay:\n%s", d)
			}
		})
	}
}

// TestRestoreTransientError: an object-store error that is not about the
// snapshot (an outage) aborts the restore instead of falling back.
func TestRestoreTransientError(t *testing.T) {
	ctx := context.Background()
	c := testCodec(t)
	mv := newMetaView(t)
	store := objstore.NewFaulty(objstore.NewMem())
	root := t.TempDir()
	var log memLog
	tab, err := Open(filepath.Join(root, "tablet-0"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	fill(t, c, tab, &log, 0, 300, "a")
	if _, err := mv.snapshot(ctx, tab, store); err != nil {
		t.Fatal(err)
	}
	store.Inject(objstore.Rule{Ops: objstore.OpGet, Match: "kv/*/*/*.sst", Times: 1, Err: errors.New("connection reset")})
	_, res, err := Restore(ctx, store, filepath.Join(root, "restored"), RestoreOptions{Bucket: mv.bucket, Snapshots: mv.retained(), Tablet: testOptions()})
	if err == nil || errors.Is(err, ErrCorruptSnapshot) || len(res.Skipped) > 0 {
		t.Fatalf("restore during an outage: %v, skipped %v; want the outage's error", err, res.Skipped)
	}
	// Once the store is back, the same restore works.
	gen := 0
	restored, _ := mv.restore(ctx, store, root, &gen, &log, mv.retained())
	defer restored.Close()
	if d := diffStates(t, c, tabletState(t, restored), tabletState(t, tab)); d != "" {
		t.Fatal(d)
	}
}
