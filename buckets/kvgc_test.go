package buckets

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

func countKV(t *testing.T, store objstore.Store, prefix string) int {
	t.Helper()
	infos, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

// Snapshot objects that left retention are deleted only after the delay,
// never one a retained snapshot references (the bucket restores exactly
// afterwards); a dropped table's snapshot objects all go.
func TestKVCollector(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	ctx := context.Background()
	model := kvModel{}
	for round := 0; round < 5; round++ {
		for i := 0; i < 30; i++ {
			model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, int64(i + round*7), fmt.Sprintf("r%d", round)}, {kvcodec.OpDelete, int64(i * round), ""}})
		}
		if err := b.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	prefix := kv.BucketPrefix(id)
	before := countKV(t, env.store, prefix)

	now := time.Unix(1000, 0)
	gc := NewKVCollector(env.store, cat, time.Minute)
	gc.Now = func() time.Time { return now }
	st, err := gc.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 0 || st.Waiting == 0 {
		t.Fatalf("first collection: %+v; want garbage waiting, nothing deleted", st)
	}
	if n := countKV(t, env.store, prefix); n != before {
		t.Fatalf("objects deleted before the delay: %d → %d", before, n)
	}
	now = now.Add(time.Minute)
	if st, err = gc.Collect(ctx); err != nil || st.Deleted == 0 || st.Waiting != 0 {
		t.Fatalf("after the delay: %+v, %v", st, err)
	}
	after := countKV(t, env.store, prefix)
	// Everything left is referenced by a retained manifest (or is one).
	snaps := retained(cat, id)
	if after >= before || len(snaps) != 2 {
		t.Fatalf("%d objects before, %d after, %d snapshots retained", before, after, len(snaps))
	}
	// The newest snapshot restores; then the older one on its own too.
	for _, s := range []catalog.KVSnapshot{snaps[1], snaps[0]} {
		tab, res, err := kv.Restore(ctx, env.store, t.TempDir()+"/r", kv.RestoreOptions{Bucket: id, Snapshots: []catalog.KVSnapshot{s}, Tablet: kv.Options{Logger: quiet()}})
		if err != nil || res.Snapshot == nil || len(res.Skipped) != 0 {
			t.Fatalf("restore snapshot %d after gc: %+v %v", s.ID, res, err)
		}
		tab.Close()
	}
	m.Close()
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("after gc and restart: %v\nwant %v", got, model)
	}

	// Drop the table: its snapshot objects go after the delay.
	var table catalog.TableID
	cat.Read(func(v *catalog.View) { table = v.Buckets[id].Table })
	if _, err := cat.Propose(ctx, catalog.DropTable{Table: table}); err != nil {
		t.Fatal(err)
	}
	if st, err = gc.Collect(ctx); err != nil || st.Deleted != 0 {
		t.Fatalf("dropped table, first collection: %+v %v", st, err)
	}
	now = now.Add(time.Minute)
	if st, err = gc.Collect(ctx); err != nil || st.Deleted == 0 {
		t.Fatalf("dropped table, after the delay: %+v %v", st, err)
	}
	if n := countKV(t, env.store, "kv/"); n != 0 {
		infos, _ := env.store.List(ctx, "kv/")
		var keys []string
		for _, i := range infos {
			keys = append(keys, i.Key)
		}
		t.Fatalf("%d snapshot objects left after the drop: %s", n, strings.Join(keys, " "))
	}
}
