package kv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

// History survives a close and a crash; Crash loses what was applied since
// the last flush (no WAL) but leaves a consistent tablet at an earlier
// applied offset with its rows; CheckFiles refuses a tablet whose sstable
// is gone.
func TestHistoryCrashAndCheckFiles(t *testing.T) {
	c := testCodec(t)
	dir := t.TempDir()
	tab, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tab.History(); ok || err != nil {
		t.Fatalf("a new tablet has a history: %v %v", ok, err)
	}
	h := History{Bucket: 7, LeaderEpoch: 3, Columns: 2}
	if err := tab.SetHistory(h); err != nil {
		t.Fatal(err)
	}
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "a"}, testRow{id: 2, name: "b"})
	if err := tab.Apply([]kvcodec.ChangeRecord{{Type: kvcodec.Insert, Key: keys[0], Row: rows[0]}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := tab.Close(); err != nil {
		t.Fatal(err)
	}
	tab, err = Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := tab.History(); !ok || err != nil || got != h {
		t.Fatalf("history after reopen: %+v %v %v, want %+v", got, ok, err, h)
	}
	if tab.AppliedOffset() != 1 {
		t.Fatalf("applied %d after a clean close, want 1", tab.AppliedOffset())
	}
	// Applied but never flushed: a crash loses it, all of it.
	if err := tab.Apply([]kvcodec.ChangeRecord{{Type: kvcodec.Insert, Key: keys[1], Row: rows[1]}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := tab.Crash(); err != nil {
		t.Fatal(err)
	}
	tab, err = Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := tab.History(); !ok || got != h {
		t.Fatalf("history after a crash: %+v %v", got, ok)
	}
	if tab.AppliedOffset() != 1 {
		t.Fatalf("applied %d after a crash, want 1 (the unflushed batch is lost)", tab.AppliedOffset())
	}
	if _, ok, _ := tab.Get(keys[1]); ok {
		t.Fatal("a crash kept the row of a batch whose offset it lost")
	}
	if _, ok, _ := tab.Get(keys[0]); !ok {
		t.Fatal("a crash lost a flushed row")
	}
	if err := tab.CheckFiles(); err != nil {
		t.Fatalf("check files of a sound tablet: %v", err)
	}
	tab.Close()

	ssts, _ := filepath.Glob(filepath.Join(dir, dbDir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no sstables to remove")
	}
	if err := os.Truncate(ssts[0], 10); err != nil {
		t.Fatal(err)
	}
	tab, err = Open(dir, testOptions())
	if err == nil {
		err = tab.CheckFiles()
		tab.Close()
	}
	t.Logf("truncated sstable: %v", err)
	if err == nil || !strings.Contains(err.Error(), ".sst") {
		t.Fatalf("a truncated sstable: %v, want an error naming it", err)
	}
}

// A tablet reopened in place (reused after a restart, clean or not) knows
// which of its sstables its snapshots stored: its next snapshot uploads
// none of them again. The reopened tablet's snapshot restores to the same
// rows.
func TestReopenedTabletReusesSnapshotFiles(t *testing.T) {
	ctx := context.Background()
	c := testCodec(t)
	store := objstore.NewMem()
	mv := newMetaView(t)
	dir := t.TempDir()
	// No compactions: a compaction's output is a new file, which a
	// snapshot uploads whether or not the tablet was reopened.
	opts := testOptions()
	opts.noCompactions = true
	tab, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var rs []testRow
	for i := 0; i < 2000; i++ {
		rs = append(rs, testRow{id: int64(i), name: fmt.Sprintf("n%d", i), v: ptr(strings.Repeat("x", 100))})
	}
	keys, rows := encodeRows(t, c, rs...)
	var recs []kvcodec.ChangeRecord
	for i := range keys {
		recs = append(recs, kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: keys[i], Row: rows[i]})
	}
	if err := tab.Apply(recs, uint64(len(recs))); err != nil {
		t.Fatal(err)
	}
	first, err := mv.snapshot(ctx, tab, store)
	if err != nil {
		t.Fatal(err)
	}
	want := tabletState(t, tab)
	for _, crash := range []bool{false, true} {
		if crash {
			err = tab.Crash()
		} else {
			err = tab.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if tab, err = Open(dir, opts); err != nil {
			t.Fatal(err)
		}
		mv.lead()
		res, err := mv.snapshot(ctx, tab, store)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for _, f := range first.Manifest.Files {
			if isImmutable(f.Name) {
				stored[f.Name] = true
			}
		}
		kept := 0
		for _, f := range res.Manifest.Files {
			if stored[f.Name] {
				kept++
			}
		}
		if kept == 0 || res.ReusedFiles != kept {
			t.Fatalf("crash %v: the reopened tablet's snapshot reused %d of the %d sstables the first snapshot stored (uploaded %d files, %d bytes; the first snapshot uploaded %d bytes)",
				crash, res.ReusedFiles, kept, res.UploadedFiles, res.UploadedBytes, first.UploadedBytes)
		}
	}
	tab.Close()
	got, res, err := Restore(ctx, store, filepath.Join(t.TempDir(), "r"), RestoreOptions{Bucket: mv.bucket, Snapshots: mv.retained(), Tablet: testOptions()})
	if err != nil || res.Snapshot == nil || res.LogOffset != uint64(len(recs)) {
		t.Fatalf("restore: %+v %v", res, err)
	}
	if diff := diffStates(t, c, tabletState(t, got), want); diff != "" {
		t.Fatalf("restored from the reopened tablet's snapshot: %s", diff)
	}
	got.Close()
}
