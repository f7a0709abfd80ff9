package etcdlog

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func countKeys(t testing.TB, client *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := client.Get(metalogtest.Context(t, 10*time.Second), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

func TestEtcdLogTruncatesAndCompacts(t *testing.T) {
	ctx := metalogtest.Context(t, 30*time.Second)
	client := testClient(t)
	l := New(client, testCluster(t))
	for i := 1; i <= 30; i++ {
		if _, err := l.Append(ctx, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := client.Get(ctx, l.keys.entry(1))
	if err != nil {
		t.Fatal(err)
	}
	oldRev := first.Header.Revision
	if err := l.SaveSnapshot(ctx, 10, []byte("v10")); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveSnapshot(ctx, 25, []byte("v25")); err != nil {
		t.Fatal(err)
	}
	// Entries 1..10 are gone, 11..30 stay.
	if n := countKeys(t, client, l.keys.logPrefix); n != 20 {
		t.Fatalf("%d log keys after truncation through 10, want 20", n)
	}
	if tr, err := l.Truncated(ctx); err != nil || tr != 10 {
		t.Fatalf("Truncated = %d, %v; want 10", tr, err)
	}
	// One snapshot's chunks remain.
	if n := countKeys(t, client, l.keys.snapPrefix); n != 1 {
		t.Fatalf("%d snapshot chunk keys, want 1", n)
	}
	// etcd's history before the truncation is compacted away.
	_, err = client.Get(ctx, l.keys.entry(1), clientv3.WithRev(oldRev))
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("reading revision %d after the snapshot = %v, want ErrCompacted", oldRev, err)
	}
	// A tail started from the truncated part is told so; from 11 it works.
	metalogtest.CheckTail(t, l, 10, metalog.ErrTruncated)
	metalogtest.CheckTail(t, l, 11, nil)
}

func TestEtcdSnapshotChunked(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	client := testClient(t)
	l := New(client, testCluster(t))
	// Above etcd's default 1.5 MiB request limit.
	big := make([]byte, 3*SnapshotChunkBytes+12345)
	rand.Read(big)
	if err := l.SaveSnapshot(ctx, 7, big); err != nil {
		t.Fatal(err)
	}
	index, got, err := l.LoadSnapshot(ctx)
	if err != nil || index != 7 || !bytes.Equal(got, big) {
		t.Fatalf("LoadSnapshot = %d, %d bytes, %v; want 7 and the %d bytes saved", index, len(got), err, len(big))
	}
	if n := countKeys(t, client, l.keys.snapPrefix); n != 4 {
		t.Fatalf("%d chunk keys, want 4", n)
	}
	ptr, err := client.Get(ctx, l.keys.snapshot)
	if err != nil || len(ptr.Kvs) != 1 || len(ptr.Kvs[0].Value) > 1024 {
		t.Fatalf("snapshot pointer: %v %v", ptr, err)
	}
	// A newer snapshot replaces the chunks of the older one.
	big2 := bytes.Repeat([]byte("x"), SnapshotChunkBytes+1)
	if err := l.SaveSnapshot(ctx, 9, big2); err != nil {
		t.Fatal(err)
	}
	if index, got, err := l.LoadSnapshot(ctx); err != nil || index != 9 || !bytes.Equal(got, big2) {
		t.Fatalf("LoadSnapshot = %d, %d bytes, %v; want the snapshot at 9", index, len(got), err)
	}
	if n := countKeys(t, client, l.keys.snapPrefix); n != 2 {
		t.Fatalf("%d chunk keys after the second snapshot, want 2", n)
	}
}

// TestEtcdSnapshotRace saves the same and different indexes from several
// goroutines at once: the stored snapshot is the highest, intact.
func TestEtcdSnapshotRace(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	client := testClient(t)
	cluster := testCluster(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := New(client, cluster)
			l.chunkBytes = 1000
			index := uint64(10 + i%3)
			data := bytes.Repeat(fmt.Appendf(nil, "%d;", index), 2000)
			if err := l.SaveSnapshot(ctx, index, data); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	l := New(client, cluster)
	index, data, err := l.LoadSnapshot(ctx)
	if err != nil || index != 12 || !bytes.Equal(data, bytes.Repeat([]byte("12;"), 2000)) {
		t.Fatalf("LoadSnapshot = %d, %d bytes, %v; want index 12 intact", index, len(data), err)
	}
}

func TestEtcdAppendTooLarge(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := New(testClient(t), testCluster(t))
	if _, err := l.Append(ctx, make([]byte, metalog.MaxAppendBytes+1)); !errors.Is(err, metalog.ErrNotAppended) {
		t.Fatalf("Append of %d bytes = %v, want ErrNotAppended", metalog.MaxAppendBytes+1, err)
	}
	if _, err := l.AppendBatch(ctx, make([][]byte, metalog.MaxAppendEntries+1)); !errors.Is(err, metalog.ErrNotAppended) {
		t.Fatalf("AppendBatch of %d entries = %v, want ErrNotAppended", metalog.MaxAppendEntries+1, err)
	}
	if h, err := l.Head(ctx); err != nil || h != 0 {
		t.Fatalf("head = %d, %v; want 0", h, err)
	}
	// The Catalog refuses such a record before appending it.
	c := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))
	big := metalogtest.CreateTable("big")
	big.Spec.Options = map[string]string{"comment": strings.Repeat("x", metalog.MaxAppendBytes)}
	if _, err := c.Propose(ctx, big); !errors.Is(err, metalog.ErrNotAppended) {
		t.Fatalf("Propose of a huge record = %v, want ErrNotAppended", err)
	}
}

// TestEtcdAppendLostResponse cuts the connection as an append's request goes
// out or as etcd's answer comes back, so the append may or may not have
// committed. Append must end up with exactly one copy of each entry and
// return its index.
func TestEtcdAppendLostResponse(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
	client, err := Dial(ctx, []string{proxy.addr()}, metalogtest.Logger(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	l := New(client, cluster)
	indexes := map[uint64]string{}
	cuts := 0
	for i := range 12 {
		data := fmt.Sprintf("entry-%d", i)
		// Appends 0, 4, 8 lose their responses, 2, 6, 10 their requests.
		if i%2 == 0 {
			proxy.armCut(i%4 == 0)
		}
		index, err := l.Append(ctx, []byte(data))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if !proxy.cutArmed() && i%2 == 0 {
			cuts++
		}
		indexes[index] = data
	}
	if cuts == 0 {
		t.Fatal("no connection was cut")
	}
	direct := New(testClient(t), cluster)
	head, err := direct.Head(ctx)
	if err != nil || head != 12 {
		t.Fatalf("head = %d, %v; want 12 (one entry per append)", head, err)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	direct.Tail(tctx, 1, func(index uint64, data []byte) error {
		if indexes[index] != string(data) {
			t.Errorf("entry %d = %q, Append returned it for %q", index, data, indexes[index])
		}
		if index == head {
			cancel()
		}
		return nil
	})
}

// TestEtcdRestartAndBootstrap restarts a catalog from a snapshot and starts a
// brand-new one after the log was truncated: all reach the same view.
func TestEtcdRestartAndBootstrap(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	l := New(testClient(t), cluster)
	a, err := metalog.Open(ctx, l, metalogtest.Options(5))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 33 {
		rec := catalog.Record(metalogtest.CreateTable(fmt.Sprintf("t%d", i)))
		if i%4 == 0 {
			rec = catalog.RegisterNode{Node: 1, ExpectEpoch: uint64(i / 4)}
		}
		if _, err := a.Propose(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	metalogtest.WaitFor(t, "snapshot at 30", func() bool { i, _, _ := l.LoadSnapshot(ctx); return i == 30 })
	want := metalogtest.EncodeView(t, a.View())
	a.Close()
	if tr, _ := l.Truncated(ctx); tr == 0 {
		t.Fatal("nothing truncated")
	}

	var applied metalogtest.ApplyLog
	opts := metalogtest.Options(5)
	opts.TestingKnobs.OnApply = applied.Hook
	restarted := metalogtest.OpenCatalog(t, l, opts)
	if got := metalogtest.EncodeView(t, restarted.View()); !bytes.Equal(got, want) {
		t.Fatal("restarted catalog's view differs")
	}
	if want := []uint64{31, 32, 33}; fmt.Sprint(applied.Indexes()) != fmt.Sprint(want) {
		t.Fatalf("restarted catalog applied %v, want %v", applied.Indexes(), want)
	}

	fresh := metalogtest.OpenCatalog(t, New(testClient(t), cluster), metalogtest.Options(5))
	if got := metalogtest.EncodeView(t, fresh.View()); !bytes.Equal(got, want) {
		t.Fatal("new catalog's view differs")
	}
	// Both follow new entries.
	out, err := fresh.Propose(ctx, metalogtest.CreateTable("late"))
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.WaitIndex(ctx, out.Index); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(metalogtest.EncodeView(t, restarted.View()), metalogtest.EncodeView(t, fresh.View())) {
		t.Fatal("views differ after a new entry")
	}
}

// TestEtcdLaggingCatalogReloadsSnapshot cuts one catalog off etcd while
// another appends past two snapshots (truncating and compacting). When it
// reconnects, its watch is compacted and the entries it needs are gone: it
// loads the snapshot and carries on.
func TestEtcdLaggingCatalogReloadsSnapshot(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	l := New(testClient(t), cluster)
	a := metalogtest.OpenCatalog(t, l, metalogtest.Options(5))
	if _, err := a.Propose(ctx, catalog.RegisterNode{Node: 1}); err != nil {
		t.Fatal(err)
	}

	proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
	client, err := Dial(ctx, []string{proxy.addr()}, metalogtest.Logger(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var mu sync.Mutex
	var reloaded []uint64
	opts := metalogtest.Options(5)
	opts.TestingKnobs.OnReload = func(index uint64) {
		mu.Lock()
		reloaded = append(reloaded, index)
		mu.Unlock()
	}
	b := metalogtest.OpenCatalog(t, New(client, cluster), opts)
	if b.AppliedIndex() != 1 {
		t.Fatalf("b applied %d, want 1", b.AppliedIndex())
	}

	proxy.freeze()
	for i := range 23 {
		if _, err := a.Propose(ctx, metalogtest.CreateTable(fmt.Sprintf("t%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	metalogtest.WaitFor(t, "snapshot at 20", func() bool { i, _, _ := l.LoadSnapshot(ctx); return i == 20 })
	proxy.cutAll()
	proxy.thaw()

	head, _ := l.Head(ctx)
	if err := b.WaitIndex(ctx, head); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reloaded) == 0 {
		t.Fatal("the lagging catalog did not reload the snapshot")
	}
	if !bytes.Equal(metalogtest.EncodeView(t, a.View()), metalogtest.EncodeView(t, b.View())) {
		t.Fatal("views differ after the reload")
	}
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestDialUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	var logs logBuffer
	start := time.Now()
	_, err = Dial(metalogtest.Context(t, 30*time.Second), []string{dead}, slog.New(slog.NewTextHandler(&logs, nil)), 1500*time.Millisecond)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
	want := fmt.Sprintf("etcd at %s unreachable after 1.5s", dead)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Dial error %q, want it to contain %q and the reason", err, want)
	}
	if elapsed < 1500*time.Millisecond || elapsed > 10*time.Second {
		t.Fatalf("Dial gave up after %v, want about 1.5s", elapsed)
	}
	if !strings.Contains(logs.String(), "etcd unreachable, retrying") || !strings.Contains(logs.String(), dead) {
		t.Fatalf("no retry log line naming %s:\n%s", dead, logs.String())
	}
}

// TestEtcdSnapshotInterruptedSave leaves behind what a node that crashed in
// the middle of SaveSnapshot leaves: chunks without a pointer, and log keys
// that the truncation did not get to. The next save cleans both up, and
// loads never see the half-written snapshot.
func TestEtcdSnapshotInterruptedSave(t *testing.T) {
	ctx := metalogtest.Context(t, 30*time.Second)
	client := testClient(t)
	l := New(client, testCluster(t))
	for i := 1; i <= 30; i++ {
		if _, err := l.Append(ctx, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SaveSnapshot(ctx, 10, []byte("v10")); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveSnapshot(ctx, 20, []byte("v20")); err != nil {
		t.Fatal(err)
	}
	// A save of 25 that died after its chunks; a truncation through 10 that
	// died before deleting entries 4..10.
	orphan := fmt.Sprintf("%s%020d/%s/", l.keys.snapPrefix, 25, "deadbeefdeadbeef")
	for i := range 2 {
		if _, err := client.Put(ctx, chunkKey(orphan, i), "half"); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(4); i <= 10; i++ {
		if _, err := client.Put(ctx, l.keys.entry(i), "left behind"); err != nil {
			t.Fatal(err)
		}
	}
	metalogtest.CheckSnapshot(t, l, 20, "v20")

	if err := l.SaveSnapshot(ctx, 30, []byte("v30")); err != nil {
		t.Fatal(err)
	}
	metalogtest.CheckSnapshot(t, l, 30, "v30")
	if n := countKeys(t, client, l.keys.snapPrefix); n != 1 {
		t.Fatalf("%d chunk keys after the next save, want 1 (the orphans deleted)", n)
	}
	if n := countKeys(t, client, l.keys.logPrefix); n != 10 {
		t.Fatalf("%d log keys after truncating through 20, want 10 (21..30)", n)
	}
	metalogtest.CheckTail(t, l, 21, nil)
	metalogtest.CheckTail(t, l, 20, metalog.ErrTruncated)
}
func TestEtcdLogConformance(t *testing.T) {
	metalogtest.LogConformance(t, func(t *testing.T) metalog.Log {
		return New(testClient(t), testCluster(t))
	})
}
