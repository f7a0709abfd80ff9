package kv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minkdb/mink/kv/kvcodec"
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
