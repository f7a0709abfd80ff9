package metalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func TestMemLiveness(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLiveness()
	cache, _ := l.Watch(ctx)
	defer cache.Close()
	s1, _ := l.KeepAlive(ctx, 1, metalog.LiveInfo{Epoch: 1}, 0)
	s2, _ := l.KeepAlive(ctx, 2, metalog.LiveInfo{Epoch: 1}, 0)
	if live, _ := l.LiveNodes(ctx); len(live) != 2 || !cache.IsLive(1) || !cache.IsLive(2) {
		t.Fatalf("live = %+v, cache = %+v", live, cache.Nodes())
	}
	changed := cache.Changed()
	if !l.Expire(1) {
		t.Fatal("Expire(1) found no lease")
	}
	select {
	case <-s1.Lost():
	default:
		t.Fatal("expired session not lost")
	}
	select {
	case <-changed:
	default:
		t.Fatal("cache not notified")
	}
	if cache.IsLive(1) || !cache.IsLive(2) {
		t.Fatalf("cache = %+v after expiring 1", cache.Nodes())
	}
	if err := s1.Update(ctx, metalog.LiveInfo{Epoch: 2}); err == nil {
		t.Fatal("update of an expired session succeeded")
	}
	// A restarted node takes its key over; the old session's revoke does not
	// remove the new one.
	old, _ := l.KeepAlive(ctx, 3, metalog.LiveInfo{Epoch: 1}, 0)
	if _, err := l.KeepAlive(ctx, 3, metalog.LiveInfo{Epoch: 2}, 0); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if live, _ := l.LiveNodes(ctx); live[3].Epoch != 2 {
		t.Fatalf("node 3 = %+v, want the new session's epoch 2", live[3])
	}
	s2.Revoke(context.Background())
	if cache.IsLive(2) {
		t.Fatal("revoked node still live")
	}
}
