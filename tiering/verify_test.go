package tiering

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestLakeReaderFlippedByte flips one byte of a lake data file, at every
// 11th position: each scan returns exactly the file's rows or a
// LakeFileError naming the file, never other rows, and never panics
// (arrow-go's decoder, which iceberg-go runs in goroutines of its own,
// panics on some damaged page headers and footers, which ended the
// process before the file was verified as it enters the cache).
func TestLakeReaderFlippedByte(t *testing.T) {
	e := newEnv(t)
	id, spec, snap, key, good := tieredFile(t, e)
	store := e.store.Inner()
	req := ScanRequest{Table: id, Snapshot: snap, Schema: minkSchema(t, spec, "id", "s")}
	scan := func(data []byte) (string, error) {
		t.Helper()
		if err := store.Delete(e.ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := store.PutIfAbsent(e.ctx, key, data); err != nil {
			t.Fatal(err)
		}
		cache, err := NewFileCache(t.TempDir(), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		var rows strings.Builder
		err = NewLakeReader(store, storeURL, cache).Scan(e.ctx, req, func(rec arrow.RecordBatch) error {
			ids, ss := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
			for i := range int(rec.NumRows()) {
				rows.WriteString(ids.ValueStr(i) + "|" + ss.ValueStr(i) + "\n")
			}
			return nil
		})
		return rows.String(), err
	}
	want, err := scan(good)
	if err != nil || strings.Count(want, "\n") != 100 {
		t.Fatalf("scan of the good file: %d rows, %v", strings.Count(want, "\n"), err)
	}
	detected := 0
	for i := 0; i < len(good); i += 11 {
		bad := slices.Clone(good)
		bad[i] ^= 0x20
		got, err := scan(bad)
		var fe *LakeFileError
		switch {
		case err == nil && got != want:
			t.Fatalf("byte %d flipped: the scan returned other rows than the file's, and no error", i)
		case err != nil && (!errors.As(err, &fe) || fe.Key != key || !strings.Contains(err.Error(), key)):
			t.Fatalf("byte %d flipped: %v, want a LakeFileError naming %s", i, err, key)
		case err != nil:
			detected++
		}
	}
	if detected == 0 {
		t.Fatal("no flipped byte was detected")
	}
	t.Logf("%d of %d flips detected; the others left the rows as they were (unused or unchecked footer bytes)", detected, (len(good)+10)/11)
}
