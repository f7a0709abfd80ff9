// Package sweep deletes garbage objects after a grace delay. Its owner, a
// collector, decides in each pass which objects are garbage (nothing in
// the metadata references them, and no writer can still commit them); a
// Sweeper deletes an object only once it has been found garbage in every
// pass for the whole delay, so that a reader holding an older view, or a
// writer of an old lease holder that has not noticed yet, can finish with
// it. It is the one delete mechanism of s3stream's Collector, buckets'
// KVCollector and tiering's LakeCollector.
//
// A Sweeper starts no goroutines and is not safe for concurrent use: its
// owner serializes passes.
package sweep

import (
	"context"
	"iter"
	"time"

	"github.com/minkdb/mink/objstore"
)

// Sweeper remembers when each garbage object was first found garbage, and
// deletes it from its store once that is the delay ago.
type Sweeper struct {
	store objstore.Store
	delay time.Duration
	// firstSeen is when each pending key (found garbage, not yet
	// deleted) was first found garbage.
	firstSeen map[string]time.Time
}

// New returns a sweeper of objects in store with the given grace delay.
func New(store objstore.Store, delay time.Duration) *Sweeper {
	return &Sweeper{store: store, delay: delay, firstSeen: map[string]time.Time{}}
}

// Stats counts what passes did.
type Stats struct {
	// Deleted objects; Waiting are garbage but within the delay.
	Deleted, Waiting int
}

// Sweep handles the objects a pass found garbage as of now, in garbage's
// order: one not pending becomes pending from now; one pending for the
// delay or longer is deleted. It adds to st what it did, and stops at
// the first delete that fails, returning that object's key and the
// store's error: the object stays pending, so the next pass that finds
// it garbage deletes it at once. A pass whose ctx ends stops there too
// (the store's Delete fails with ctx's error).
func (s *Sweeper) Sweep(ctx context.Context, now time.Time, garbage iter.Seq[string], st *Stats) (failed string, err error) {
	for key := range garbage {
		first, ok := s.firstSeen[key]
		if !ok {
			s.firstSeen[key], first = now, now
		}
		if now.Sub(first) < s.delay {
			st.Waiting++
			continue
		}
		if err := s.store.Delete(ctx, key); err != nil {
			return key, err
		}
		delete(s.firstSeen, key)
		st.Deleted++
	}
	return "", nil
}

// Forget drops the pending keys for which drop is true: objects a pass
// found referenced again or gone. A key found garbage again later starts
// its delay anew.
func (s *Sweeper) Forget(drop func(key string) bool) {
	for key := range s.firstSeen {
		if drop(key) {
			delete(s.firstSeen, key)
		}
	}
}
