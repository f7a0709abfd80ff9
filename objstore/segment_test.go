package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/minkdb/mink/objstore"
)

// A segment is zero-filled, invisible until published, create-only against
// objects and other segments, readable as an object while it is written,
// and removed if closed unpublished.
func TestDirSegment(t *testing.T) {
	ctx := context.Background()
	d, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seg, err := d.NewSegment(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if objs, _ := d.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("an unpublished segment is listed: %v", objs)
	}
	if err := seg.WriteAt([]byte("abc"), 10); err != nil {
		t.Fatal(err)
	}
	if err := seg.WriteAt([]byte("x"), 4096); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Fatalf("a write past the segment's end: %v, want ErrInvalidRange", err)
	}
	if err := d.PutIfAbsent(ctx, "wal/taken", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := seg.Publish(ctx, "wal/taken"); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("publishing over an object: %v, want ErrExists", err)
	}
	if err := seg.Publish(ctx, "wal/seg"); err != nil {
		t.Fatal(err)
	}
	if err := seg.Publish(ctx, "wal/seg"); err != nil {
		t.Fatalf("publishing again under the same key: %v", err)
	}
	if err := seg.WriteAt([]byte("def"), 13); err != nil {
		t.Fatal(err)
	}
	data, err := d.Get(ctx, "wal/seg")
	if err != nil || len(data) != 4096 || string(data[10:16]) != "abcdef" || data[0] != 0 || data[4095] != 0 {
		t.Fatalf("published segment: %d bytes %q…, %v", len(data), data[:20], err)
	}
	if err := d.PutIfAbsent(ctx, "wal/seg", []byte("2")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("a put over a segment: %v, want ErrExists", err)
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err := d.Get(ctx, "wal/seg"); err != nil || len(data) != 4096 {
		t.Fatalf("a closed published segment: %d bytes, %v", len(data), err)
	}

	// Of concurrent publishes of one key, exactly one wins.
	var wg sync.WaitGroup
	wins := make(chan int, 8)
	for i := range 8 {
		s, err := d.NewSegment(ctx, 512)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			err := s.Publish(ctx, "wal/race")
			if err == nil {
				wins <- i
			} else if !errors.Is(err, objstore.ErrExists) {
				t.Errorf("publish %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d concurrent publishes of one key succeeded, want 1", n)
	}
	temps, _ := os.ReadDir(filepath.Join(d.Root(), ".objstore-tmp"))
	if len(temps) != 0 {
		t.Fatalf("closed segments left %d staging files", len(temps))
	}
}

// A staged segment left by a crashed process is removed when the store is
// opened again; one that a live writer has open is kept.
func TestDirOrphanSegments(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	live, err := d.NewSegment(ctx, 512)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	orphan := filepath.Join(root, ".objstore-tmp", "seg-crashed")
	if err := os.WriteFile(orphan, make([]byte, 512), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.NewDir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the crashed writer's staged segment is still there: %v", err)
	}
	if err := live.Publish(ctx, "wal/live"); err != nil {
		t.Fatalf("the live writer's staged segment was removed: %v", err)
	}
}
