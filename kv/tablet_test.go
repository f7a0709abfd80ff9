package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

func TestApplyOffsets(t *testing.T) {
	c := testCodec(t)
	dir := t.TempDir()
	tab, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "a"}, testRow{id: 2, name: "b"}, testRow{id: 3, name: "c"})
	ins := func(i int) kvcodec.ChangeRecord {
		return kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: keys[i], Row: rows[i]}
	}

	if err := tab.Apply([]kvcodec.ChangeRecord{ins(0), ins(1)}, 2); err != nil {
		t.Fatal(err)
	}
	// A gap changes nothing.
	if err := tab.Apply([]kvcodec.ChangeRecord{ins(2)}, 4); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("apply after a gap: %v, want ErrOffsetGap", err)
	}
	if _, ok, _ := tab.Get(keys[2]); ok || tab.AppliedOffset() != 2 {
		t.Fatalf("a refused apply changed the tablet (offset %d)", tab.AppliedOffset())
	}
	// An overlap applies only the new suffix: the delete of key 0 at offset
	// 1 is not re-applied; the insert of key 2 at offset 2 is.
	del0 := kvcodec.ChangeRecord{Type: kvcodec.Delete, Key: keys[0], Row: rows[0]}
	if err := tab.Apply([]kvcodec.ChangeRecord{del0, ins(2)}, 3); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tab.Get(keys[0]); !ok {
		t.Fatal("an already-applied offset was applied again")
	}
	if _, ok, _ := tab.Get(keys[2]); !ok || tab.AppliedOffset() != 3 {
		t.Fatalf("overlapping apply: key 2 present %v, offset %d", ok, tab.AppliedOffset())
	}
	// Entirely old records are a no-op.
	if err := tab.Apply([]kvcodec.ChangeRecord{del0}, 1); err != nil || tab.AppliedOffset() != 3 {
		t.Fatalf("old records: %v, offset %d", err, tab.AppliedOffset())
	}

	// A reader sees the state of its moment.
	r, err := tab.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Apply([]kvcodec.ChangeRecord{{Type: kvcodec.Delete, Key: keys[1], Row: rows[1]}}, 4); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Get(keys[1]); !ok || r.Offset() != 3 {
		t.Fatalf("reader at offset %d sees key 1: %v", r.Offset(), ok)
	}
	if _, ok, _ := tab.Get(keys[1]); ok {
		t.Fatal("the tablet still has a deleted key")
	}
	r.Close()

	// Reopen: the applied offset and rows persist.
	want := tabletState(t, tab)
	if err := tab.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Get(keys[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
	tab, err = Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	if tab.AppliedOffset() != 4 {
		t.Fatalf("reopened at offset %d, want 4", tab.AppliedOffset())
	}
	if d := diffStates(t, c, tabletState(t, tab), want); d != "" {
		t.Fatalf("reopened tablet differs:\n%s", d)
	}
}

func TestRecordReader(t *testing.T) {
	c := testCodec(t)
	tab, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	var rows []testRow
	for i := 999; i >= 0; i-- {
		r := testRow{id: int64(i % 10), name: fmt.Sprintf("k%04d", i)}
		if i%3 == 0 {
			r.v = ptr(fmt.Sprint(i))
		}
		rows = append(rows, r)
	}
	keys, encoded := encodeRows(t, c, rows...)
	var records []kvcodec.ChangeRecord
	for i := range keys {
		records = append(records, kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: keys[i], Row: encoded[i]})
	}
	if err := tab.Apply(records, uint64(len(records))); err != nil {
		t.Fatal(err)
	}
	r, err := tab.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr, err := NewRecordReader(r, c, nil, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	n, batches := 0, 0
	lastID, lastName := int64(-1), ""
	for rr.Next() {
		rec := rr.RecordBatch()
		batches++
		ids, names, vs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String), rec.Column(2).(*array.String)
		for i := range int(rec.NumRows()) {
			id, name := ids.Value(i), names.Value(i)
			if id < lastID || (id == lastID && name <= lastName) {
				t.Fatalf("row (%d, %s) after (%d, %s): not in key order", id, name, lastID, lastName)
			}
			lastID, lastName = id, name
			var num int
			fmt.Sscanf(name, "k%d", &num)
			if (num%3 == 0) == vs.IsNull(i) {
				t.Fatalf("row %s: v null %v", name, vs.IsNull(i))
			}
			n++
		}
	}
	if rr.Err() != nil {
		t.Fatal(rr.Err())
	}
	if n != 1000 || batches != 4 {
		t.Fatalf("read %d rows in %d batches, want 1000 in 4", n, batches)
	}
}

// TestPending checks the write-side overlay: a pipelined batch sees the
// staged ones; readers of the tablet see only applied batches.
func TestPending(t *testing.T) {
	c := testCodec(t)
	tab, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	p := NewPending(tab)
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "a"}, testRow{id: 1, name: "a", v: ptr("x")})
	var log memLog

	b1, err := p.Changes(nil, []kvcodec.Write{{Op: kvcodec.OpInsert, Key: keys[0], Row: rows[0]}})
	if err != nil {
		t.Fatal(err)
	}
	// Batch 2, computed before batch 1 is acknowledged, sees batch 1's row.
	if _, err := p.Changes(nil, []kvcodec.Write{{Op: kvcodec.OpInsert, Key: keys[0], Row: rows[1]}}); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("insert over a staged row: %v, want ErrDuplicateKey", err)
	}
	b2, err := p.Changes(nil, []kvcodec.Write{{Op: kvcodec.OpUpsert, Key: keys[0], Row: rows[1]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b2) != 2 || b2[0].Type != kvcodec.UpdateBefore || string(b2[0].Row) != string(rows[0]) {
		t.Fatalf("batch 2 records %v: want -U of the staged row, +U", b2)
	}
	b3, err := p.Changes(nil, []kvcodec.Write{{Op: kvcodec.OpDelete, Key: keys[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Staged() != 4 {
		t.Fatalf("staged %d records, want 4", p.Staged())
	}
	// No-op batches stage nothing.
	otherKeys, otherRows := encodeRows(t, c, testRow{id: 2, name: "b"})
	if recs, err := p.Changes(nil, []kvcodec.Write{{Op: kvcodec.OpDelete, Key: otherKeys[0]}, {Op: kvcodec.OpUpdate, Key: otherKeys[0], Row: otherRows[0]}}); err != nil || len(recs) != 0 || p.Staged() != 4 {
		t.Fatalf("a no-op batch: %v %v, %d staged", recs, err, p.Staged())
	}

	// Nothing is acknowledged: readers see nothing.
	if _, ok, _ := tab.Get(keys[0]); ok {
		t.Fatal("the tablet shows an unacknowledged row")
	}
	if _, ok, _ := p.Get(keys[0]); ok {
		t.Fatal("pending shows a deleted row")
	}
	if err := p.Apply(b1, log.append(t, c, b1)); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := tab.Get(keys[0]); !ok || string(got) != string(rows[0]) {
		t.Fatal("batch 1 is not visible after its apply")
	}
	if _, ok, _ := p.Get(keys[0]); ok {
		t.Fatal("pending lost the staged delete once batch 1 was applied")
	}
	if err := p.Apply(b2, log.append(t, c, b2)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := tab.Get(keys[0]); string(got) != string(rows[1]) {
		t.Fatal("batch 2 is not visible after its apply")
	}
	// Batch 3's append fails: everything staged is dropped.
	p.Discard()
	if got, ok, _ := p.Get(keys[0]); !ok || string(got) != string(rows[1]) || p.Staged() != 0 {
		t.Fatal("after Discard, pending does not read the tablet")
	}
	_ = b3
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("applying a batch that is not the oldest staged did not panic")
			}
		}()
		p.Apply(b3, 10)
	}()
}

// TestTabletDirGuards: a directory that is not a tablet's is never used, and
// replaying a changelog that no longer starts where the tablet is fails.
func TestTabletDirGuards(t *testing.T) {
	c := testCodec(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, testOptions()); err == nil {
		t.Fatal("Open used a directory holding other files")
	}
	if _, _, err := Restore(context.Background(), objstore.NewMem(), dir, RestoreOptions{Bucket: 1, Tablet: testOptions()}); err == nil {
		t.Fatal("Restore used a directory holding other files")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal(err)
	}

	// An empty tablet (full replay) given a stream trimmed to offset 10.
	tab, err := Open(filepath.Join(dir, "tablet"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "a"})
	payload, err := c.EncodeChanges([]kvcodec.ChangeRecord{{Type: kvcodec.Insert, Key: keys[0], Row: rows[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.ApplyEntry(c, 10, 1, payload); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("replay from a trimmed stream: %v, want ErrOffsetGap", err)
	}
	if err := tab.ApplyEntry(c, 0, 2, payload); !errors.Is(err, kvcodec.ErrBadRow) {
		t.Fatalf("an entry whose count disagrees with its payload: %v, want kvcodec.ErrBadRow", err)
	}
}
