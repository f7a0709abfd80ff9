package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// objects returns committed objects of n entries each, written at the
// given times.
func objects(stream catalog.StreamID, start, n uint64, at ...time.Time) []catalog.StreamObject {
	var out []catalog.StreamObject
	for i, a := range at {
		s := start + uint64(i)*n
		out = append(out, catalog.StreamObject{Key: fmt.Sprintf("streams/%d/%d", stream, s), Start: s, End: s + n, Size: 1, At: a})
	}
	return out
}

// A deposed lease holder's retention pass trims nothing: its TrimStream is
// rejected for its stale coordinator epoch, and retainOnce reports it so the
// loop stops. The current holder's pass trims.
func TestRetainOnceStaleEpoch(t *testing.T) {
	ctx := context.Background()
	cat, _ := memCatalog(t)
	old := t0.Add(-time.Hour)
	for _, r := range []catalog.Record{
		catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2},
		catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		catalog.CreateTable{Spec: catalog.TableSpec{Name: "raw", Columns: []catalog.Column{{Name: "a", Type: "bigint"}}, Buckets: 1,
			Options: map[string]string{"log_retention": "1m", "tiering": "off"}}},
		catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1},
		catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1},
		catalog.CommitStreamObjects{Stream: 2, Epoch: 1, Objects: objects(2, 0, 10, old, old)},
		catalog.RegisterCoordinator{Node: 2, NodeEpoch: 1, ExpectEpoch: 1},
	} {
		if _, err := cat.Propose(ctx, r); err != nil {
			t.Fatalf("%T: %v", r, err)
		}
	}
	s := &Server{cat: cat, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	live := func(catalog.NodeID) bool { return true }
	start := func() uint64 {
		var st uint64
		cat.Read(func(v *catalog.View) { st = v.Streams[2].Start })
		return st
	}
	if stale := s.retainOnce(ctx, 1, live, t0); !stale {
		t.Fatal("a pass at coordinator epoch 1, after epoch 2 registered, did not report a stale epoch")
	}
	if got := start(); got != 0 {
		t.Fatalf("the stale pass trimmed the stream to %d", got)
	}
	if stale := s.retainOnce(ctx, 2, live, t0); stale {
		t.Fatal("the current holder's pass reported a stale epoch")
	}
	if got := start(); got != 20 {
		t.Fatalf("after the current holder's pass the stream starts at %d, want 20", got)
	}
}

// The retention pass of the lease holder trims a primary-key stream through
// the metadata log, and a trim planned against an older view that a newer
// plan passed is harmless; a deposed holder trims nothing.
func TestRetainOncePrimaryKey(t *testing.T) {
	ctx := context.Background()
	cat, _ := memCatalog(t)
	old := t0.Add(-time.Hour)
	for _, r := range []catalog.Record{
		catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2},
		catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		catalog.CreateTable{Spec: catalog.TableSpec{Name: "kv", Columns: []catalog.Column{{Name: "a", Type: "bigint"}}, PrimaryKey: []string{"a"},
			Buckets: 1, Options: map[string]string{"tiering": "off"}}},
		catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1},
		catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1},
		catalog.CommitStreamObjects{Stream: 2, Epoch: 1, Objects: objects(2, 0, 10, old, old, old)},
		catalog.CommitKVSnapshot{Bucket: 2, LeaderEpoch: 1, SnapshotID: 1, LogOffset: 25, Manifest: "kv/2/1"},
	} {
		if _, err := cat.Propose(ctx, r); err != nil {
			t.Fatalf("%T: %v", r, err)
		}
	}
	s := &Server{cat: cat, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	live := func(catalog.NodeID) bool { return true }
	start := func() uint64 {
		var st uint64
		cat.Read(func(v *catalog.View) { st = v.Streams[2].Start })
		return st
	}
	if stale := s.retainOnce(ctx, 1, live, t0); stale {
		t.Fatal("the holder's pass reported a stale epoch")
	}
	if got := start(); got != 20 {
		t.Fatalf("after the pass the stream starts at %d, want 20 (the boundary below snapshot offset 25)", got)
	}
	// A snapshot at 30 makes 30 the bound once the one at 25 leaves
	// retention (after two newer snapshots).
	for _, r := range []catalog.Record{
		catalog.CommitKVSnapshot{Bucket: 2, LeaderEpoch: 1, SnapshotID: 2, LogOffset: 30, Manifest: "kv/2/2"},
		catalog.CommitKVSnapshot{Bucket: 2, LeaderEpoch: 1, SnapshotID: 3, LogOffset: 30, Manifest: "kv/2/3"},
	} {
		if _, err := cat.Propose(ctx, r); err != nil {
			t.Fatalf("%T: %v", r, err)
		}
	}
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 2, NodeEpoch: 1, ExpectEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if stale := s.retainOnce(ctx, 1, live, t0); !stale {
		t.Fatal("a pass at coordinator epoch 1, after epoch 2 registered, did not report a stale epoch")
	}
	if got := start(); got != 20 {
		t.Fatalf("the stale pass trimmed the stream to %d", got)
	}
	if stale := s.retainOnce(ctx, 2, live, t0); stale {
		t.Fatal("the current holder's pass reported a stale epoch")
	}
	if got := start(); got != 30 {
		t.Fatalf("after the current holder's pass the stream starts at %d, want 30", got)
	}
	// A late proposal of the first plan (trim to 20) is a no-op rejection,
	// never a move backwards.
	if _, err := cat.Propose(ctx, catalog.TrimStream{Stream: 2, Start: 20, CoordinatorEpoch: 2}); !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("a late trim to 20 after the start reached 30: %v, want ErrInvalid", err)
	}
	if got := start(); got != 30 {
		t.Fatalf("after a late trim the stream starts at %d, want 30", got)
	}
}
