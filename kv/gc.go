package kv

import (
	"context"
	"fmt"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// Garbage returns the snapshot objects of bucket that can be deleted, given
// the bucket's retained snapshots in the view (catalog.Bucket.Snapshots). It
// deletes nothing: the caller (the lifecycle loop, the one delete path)
// deletes them, after its reader grace delay.
//
// An object is garbage when no retained manifest references it (nor is it a
// retained manifest) and its snapshot attempt is older than the newest
// retained snapshot: such an attempt either was committed and has left
// retention, or can never be committed (its id is taken or its epoch is
// stale), and no later snapshot reuses its files (Tablet.Snapshot reuses
// only files of retained snapshots and of attempts newer than all of them).
// Objects of newer attempts may belong to a snapshot in progress and are
// kept. With no retained snapshot nothing is garbage. If a retained manifest
// cannot be read, Garbage returns an error and no garbage: it never guesses
// what a snapshot references.
//
// A view older than the current one only makes Garbage keep more.
func Garbage(ctx context.Context, store objstore.Store, bucket catalog.BucketID, retained []catalog.KVSnapshot) ([]string, error) {
	if len(retained) == 0 {
		return nil, nil
	}
	keep := map[string]bool{}
	var watermark attempt
	for _, s := range retained {
		m, err := readManifest(ctx, store, bucket, s)
		if err != nil {
			return nil, fmt.Errorf("kv: garbage of bucket %d: retained %w", bucket, err)
		}
		keep[s.Manifest] = true
		for _, f := range m.Files {
			if f.Key != "" {
				keep[f.Key] = true
			}
		}
		if a := (attempt{s.LeaderEpoch, s.ID}); watermark.less(a) {
			watermark = a
		}
	}
	objects, err := store.List(ctx, BucketPrefix(bucket))
	if err != nil {
		return nil, fmt.Errorf("kv: garbage of bucket %d: %w", bucket, err)
	}
	var garbage []string
	for _, o := range objects {
		a, ok := parseAttempt(bucket, o.Key)
		if !ok || keep[o.Key] || !a.less(watermark) {
			continue
		}
		garbage = append(garbage, o.Key)
	}
	return garbage, nil
}
