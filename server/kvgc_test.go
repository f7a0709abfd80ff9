package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server"
)

// A node snapshots its primary-key bucket every kv_snapshot_interval while
// it changes, the coordinator deletes the snapshot objects that left
// retention, and after a restart the bucket restores from what is left,
// exactly.
func TestKVSnapshotLoopAndGC(t *testing.T) {
	dataDir := t.TempDir()
	tweak := func(c *server.Config) {
		c.KVSnapshotInterval = 50 * time.Millisecond
		c.GCInterval = 50 * time.Millisecond
		c.GCDelay = 0
	}
	n := minktest.Start(t, minktest.Options{DataDir: dataDir, Tweak: tweak})
	ctx := context.Background()
	spec := catalog.TableSpec{Name: "kvt", Columns: []catalog.Column{{Name: "k", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}},
		PrimaryKey: []string{"k"}, Buckets: 1}
	out, err := n.Server.Catalog().Propose(ctx, catalog.CreateTable{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	waitKV := func(n *minktest.Node) *buckets.KVBucket {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if m := n.Server.Buckets(); m != nil {
				b, err := m.KVBucket(id)
				if err == nil {
					return b
				}
				if !errors.Is(err, buckets.ErrUnavailable) {
					t.Fatal(err)
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("bucket not open")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b := waitKV(n)
	want := map[int64]string{}
	for round := 0; round < 12; round++ {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, b.Codec().Schema())
		for k := int64(0); k < 50; k++ {
			v := fmt.Sprintf("r%d", round)
			bld.Field(0).(*array.Int64Builder).Append(k + int64(round)*10)
			bld.Field(1).(*array.StringBuilder).Append(v)
			want[k+int64(round)*10] = v
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		ws, err := b.Codec().Writes(kvcodec.OpUpsert, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Write(ctx, ws); err != nil {
			t.Fatal(err)
		}
		time.Sleep(120 * time.Millisecond) // at least one snapshot per round
	}
	var snaps []catalog.KVSnapshot
	n.Server.Catalog().Read(func(v *catalog.View) { snaps = v.Buckets[id].Snapshots })
	if len(snaps) != 2 || snaps[1].ID < 4 {
		t.Fatalf("retained snapshots %+v: the snapshot loop did not run every interval", snaps)
	}
	// Old attempts go: no attempt older than the newest retained snapshot
	// keeps its manifest unless it is retained. (Its directory may keep
	// the files a retained snapshot reuses; attempts newer than the
	// newest retained one, in progress or failed on a loaded machine,
	// stay until a newer snapshot is retained.)
	leftovers := func() []string {
		var retained []catalog.KVSnapshot
		n.Server.Catalog().Read(func(v *catalog.View) { retained = v.Buckets[id].Snapshots })
		keep := map[string]bool{}
		var newest [2]uint64
		for _, s := range retained {
			keep[fmt.Sprintf("%020d-%020d", s.LeaderEpoch, s.ID)] = true
			if a := [2]uint64{s.LeaderEpoch, s.ID}; a[0] > newest[0] || (a[0] == newest[0] && a[1] > newest[1]) {
				newest = a
			}
		}
		entries, _ := os.ReadDir(filepath.Join(dataDir, "objects", "kv", fmt.Sprint(id)))
		var old []string
		for _, e := range entries {
			var epoch, aid uint64
			if _, err := fmt.Sscanf(e.Name(), "%020d-%020d", &epoch, &aid); err != nil {
				old = append(old, e.Name()) // not an attempt: never written by mink
				continue
			}
			manifest := filepath.Join(dataDir, "objects", "kv", fmt.Sprint(id), e.Name(), "snapshot.json")
			if _, err := os.Stat(manifest); err != nil {
				continue // only files a retained snapshot reuses
			}
			if !keep[e.Name()] && (epoch < newest[0] || (epoch == newest[0] && aid < newest[1])) {
				old = append(old, e.Name())
			}
		}
		return old
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(leftovers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := leftovers(); len(got) > 0 {
		t.Fatalf("snapshot attempts older than the newest retained one left after GC: %v", got)
	}

	// What GC left restores: every retained snapshot on its own.
	store, err := objstore.NewDir(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	n.Server.Catalog().Read(func(v *catalog.View) { snaps = v.Buckets[id].Snapshots })
	for _, s := range snaps {
		tab, res, err := kv.Restore(ctx, store, filepath.Join(t.TempDir(), "r"), kv.RestoreOptions{Bucket: id, Snapshots: []catalog.KVSnapshot{s}})
		if err != nil || res.Snapshot == nil || len(res.Skipped) > 0 {
			t.Fatalf("restore of retained snapshot %d after GC: %+v %v", s.ID, res, err)
		}
		tab.Close()
	}

	if err := n.Server.Close(); err != nil {
		t.Fatal(err)
	}
	n = minktest.Start(t, minktest.Options{DataDir: dataDir, Tweak: tweak})
	b = waitKV(n)
	r, err := b.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[int64]string{}
	err = r.Scan(nil, nil, func(_, row []byte) error {
		rec, err := b.Codec().DecodeRows(memory.DefaultAllocator, [][]byte{row})
		if err != nil {
			return err
		}
		got[rec.Column(0).(*array.Int64).Value(0)] = rec.Column(1).(*array.String).Value(0)
		rec.Release()
		return nil
	})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart: %d rows %v, want %d rows", len(got), err, len(want))
	}
}
