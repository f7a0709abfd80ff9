package kv

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// ManifestFormat is the version of the snapshot manifest layout.
const ManifestFormat = 1

// manifestName is the manifest's object name inside its snapshot's prefix.
// No pebble file has this name.
const manifestName = "snapshot.json"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest describes one snapshot: the files of a pebble checkpoint of the
// tablet taken at LogOffset, and where each is stored. It is stored as JSON
// at ManifestKey (docs/format/kv.md).
type Manifest struct {
	Format      int              `json:"format"`
	Bucket      catalog.BucketID `json:"bucket"`
	LeaderEpoch uint64           `json:"leader_epoch"`
	SnapshotID  uint64           `json:"snapshot_id"`
	// LogOffset: the snapshot holds the effect of changelog records
	// [0, LogOffset); a restore replays from LogOffset.
	LogOffset uint64         `json:"log_offset"`
	CreatedAt time.Time      `json:"created_at"`
	Files     []ManifestFile `json:"files"`
}

// ManifestFile is one file of a snapshot.
type ManifestFile struct {
	// Name is the file's name in the pebble directory.
	Name string `json:"name"`
	// Key is the object holding the file's bytes; "" for an empty file,
	// which is not stored.
	Key  string `json:"key,omitempty"`
	Size int64  `json:"size"`
	// CRC32C is the Castagnoli CRC-32 of the file's bytes.
	CRC32C uint32 `json:"crc32c"`
}

// BucketPrefix is the object-key prefix of every snapshot object of bucket.
func BucketPrefix(bucket catalog.BucketID) string { return fmt.Sprintf("kv/%d/", bucket) }

// snapshotPrefix is the prefix of the objects that the snapshot attempt
// (leaderEpoch, id) of bucket uploads.
func snapshotPrefix(bucket catalog.BucketID, leaderEpoch, id uint64) string {
	return fmt.Sprintf("kv/%d/%020d-%020d/", bucket, leaderEpoch, id)
}

// ManifestKey is the object key of the manifest of snapshot attempt
// (leaderEpoch, id) of bucket; CommitKVSnapshot records it.
func ManifestKey(bucket catalog.BucketID, leaderEpoch, id uint64) string {
	return snapshotPrefix(bucket, leaderEpoch, id) + manifestName
}

// attempt identifies a snapshot attempt; attempts are ordered by leader
// epoch, then id.
type attempt struct{ epoch, id uint64 }

func (a attempt) less(b attempt) bool {
	return a.epoch < b.epoch || (a.epoch == b.epoch && a.id < b.id)
}

// parseAttempt returns the attempt an object key of bucket belongs to.
func parseAttempt(bucket catalog.BucketID, key string) (attempt, bool) {
	rest, ok := strings.CutPrefix(key, BucketPrefix(bucket))
	if !ok {
		return attempt{}, false
	}
	dir, _, ok := strings.Cut(rest, "/")
	if !ok {
		return attempt{}, false
	}
	e, i, ok := strings.Cut(dir, "-")
	if !ok || len(e) != 20 || len(i) != 20 {
		return attempt{}, false
	}
	epoch, err1 := strconv.ParseUint(e, 10, 64)
	id, err2 := strconv.ParseUint(i, 10, 64)
	if err1 != nil || err2 != nil {
		return attempt{}, false
	}
	return attempt{epoch, id}, true
}

// snapshotFile is an immutable tablet file stored in the object store.
type snapshotFile struct {
	key  string
	size int64
	crc  uint32
}

// isImmutable reports whether a pebble file never changes once written:
// sstables and blob files. Everything else (MANIFEST, OPTIONS, WAL) is
// copied into every snapshot.
func isImmutable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// SnapshotOptions says which snapshot to take.
type SnapshotOptions struct {
	Bucket catalog.BucketID
	// LeaderEpoch is the epoch the bucket is led at; the commit is rejected
	// if it is stale.
	LeaderEpoch uint64
	// Retained are the bucket's retained snapshots in the view
	// (catalog.Bucket.Snapshots) when the snapshot starts. Files they
	// reference are reused, not uploaded again.
	Retained []catalog.KVSnapshot
}

// SnapshotResult is a snapshot that is uploaded and ready to commit.
type SnapshotResult struct {
	// Record is what the caller proposes to record the snapshot.
	Record   catalog.CommitKVSnapshot
	Manifest *Manifest
	// Uploaded counts the files (and bytes) this snapshot uploaded; Reused
	// the immutable files it references from earlier snapshots.
	UploadedFiles, ReusedFiles int
	UploadedBytes, ReusedBytes int64
}

// Snapshot uploads a snapshot of the tablet and returns the record that
// commits it. The caller proposes Record (catalog.CommitKVSnapshot); until
// that is accepted the snapshot does not exist, and its objects are garbage
// once a later snapshot is committed (Garbage). Snapshot never deletes
// anything.
//
// The snapshot is a pebble checkpoint taken while Apply is held off (for a
// memtable flush of what was applied since the snapshot began), so it holds
// exactly the records [0, LogOffset). Writes continue during the upload.
// Immutable files (sstables) already stored by an earlier snapshot that is
// retained, or by an uncommitted attempt newer than every retained snapshot,
// are referenced instead of uploaded; docs/format/kv.md says why that is safe
// against garbage collection. Every other file is uploaded create-only under
// this attempt's prefix, then the manifest.
//
// A failed Snapshot may be retried; the retry reuses what the failed attempt
// uploaded.
//
// REQUIRES: one tablet per leader epoch of the bucket (an epoch opens the
// stream once). Snapshot objects are keyed by (leader epoch, snapshot id);
// a second tablet at the same epoch could pick an id the first used, and its
// create-only puts would then fail (safely: nothing is overwritten).
// Snapshot calls are serialized (a second one waits, or gives up when ctx
// ends); they run concurrently with Apply and reads.
func (t *Tablet) Snapshot(ctx context.Context, store objstore.Store, opts SnapshotOptions) (SnapshotResult, error) {
	select {
	case t.snapGate <- struct{}{}:
	case <-ctx.Done():
		return SnapshotResult{}, fmt.Errorf("kv: snapshot of bucket %d: %w", opts.Bucket, ctx.Err())
	}
	defer func() { <-t.snapGate }()
	if t.closed.Load() {
		return SnapshotResult{}, ErrClosed
	}
	if opts.LeaderEpoch == 0 {
		return SnapshotResult{}, fmt.Errorf("kv: snapshot of bucket %d: leader epoch 0", opts.Bucket)
	}
	var watermark attempt
	id := t.snap.lastID
	for _, s := range opts.Retained {
		id = max(id, s.ID)
		if a := (attempt{s.LeaderEpoch, s.ID}); watermark.less(a) {
			watermark = a
		}
	}
	id++
	t.snap.lastID = id
	this := attempt{opts.LeaderEpoch, id}
	what := fmt.Sprintf("kv: snapshot %d of bucket %d (leader epoch %d)", id, opts.Bucket, opts.LeaderEpoch)

	referenced := map[string]bool{}
	for _, s := range opts.Retained {
		m, err := t.retainedManifest(ctx, store, opts.Bucket, s)
		if err != nil {
			// Nothing it references is reused; the files are uploaded again.
			t.opts.Logger.Warn("kv: snapshot: cannot read a retained manifest; not reusing its files",
				"bucket", opts.Bucket, "manifest", s.Manifest, "err", err)
			continue
		}
		for _, f := range m.Files {
			if f.Key != "" {
				referenced[f.Key] = true
			}
		}
	}
	reusable := func(key string) bool {
		if referenced[key] {
			return true
		}
		a, ok := parseAttempt(opts.Bucket, key)
		return ok && watermark.less(a)
	}

	// The tablet has no WAL (see openDB): a checkpoint holds what is
	// flushed. Flush the bulk first without holding Apply off, then, with
	// Apply held off so that the checkpoint is at a known offset, flush what
	// was applied meanwhile and checkpoint.
	if err := t.db.Flush(); err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: flush: %w", what, err)
	}
	ckDir := filepath.Join(t.dir, fmt.Sprintf("checkpoint-%d", id))
	if err := os.RemoveAll(ckDir); err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: %w", what, err)
	}
	defer os.RemoveAll(ckDir)
	t.applyMu.Lock()
	offset := t.applied.Load()
	err := t.db.Flush()
	if err == nil {
		err = t.db.Checkpoint(ckDir)
	}
	t.applyMu.Unlock()
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: checkpoint: %w", what, err)
	}

	entries, err := os.ReadDir(ckDir)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: %w", what, err)
	}
	m := &Manifest{
		Format: ManifestFormat, Bucket: opts.Bucket, LeaderEpoch: opts.LeaderEpoch, SnapshotID: id,
		LogOffset: offset, CreatedAt: time.Now().UTC(),
	}
	res := SnapshotResult{Manifest: m}
	var uploads []int // indexes into m.Files
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return SnapshotResult{}, fmt.Errorf("%s: checkpoint holds %s, which is not a regular file", what, e.Name())
		}
		info, err := e.Info()
		if err != nil {
			return SnapshotResult{}, fmt.Errorf("%s: %w", what, err)
		}
		f := ManifestFile{Name: e.Name(), Size: info.Size(), CRC32C: crc32.Checksum(nil, castagnoli)}
		if f.Size > 0 {
			if known, ok := t.snap.files[f.Name]; ok && isImmutable(f.Name) && known.size == f.Size && reusable(known.key) {
				f.Key, f.CRC32C = known.key, known.crc
				res.ReusedFiles++
				res.ReusedBytes += f.Size
			} else {
				f.Key = snapshotPrefix(opts.Bucket, this.epoch, this.id) + f.Name
				uploads = append(uploads, len(m.Files))
			}
		}
		m.Files = append(m.Files, f)
	}

	// Sstables first, largest first: they are most of the bytes, and a retry
	// reuses those that made it.
	slices.SortStableFunc(uploads, func(a, b int) int {
		fa, fb := m.Files[a], m.Files[b]
		if ia, ib := isImmutable(fa.Name), isImmutable(fb.Name); ia != ib {
			if ia {
				return -1
			}
			return 1
		}
		return cmp.Compare(fb.Size, fa.Size)
	})
	var mu sync.Mutex // guards res and t.snap.files among the uploads
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.opts.UploadConcurrency)
	for _, i := range uploads {
		f := &m.Files[i]
		g.Go(func() error {
			data, err := os.ReadFile(filepath.Join(ckDir, f.Name))
			if err != nil {
				return err
			}
			if int64(len(data)) != f.Size {
				return fmt.Errorf("checkpoint file %s changed size from %d to %d", f.Name, f.Size, len(data))
			}
			f.CRC32C = crc32.Checksum(data, castagnoli)
			if err := putVerified(gctx, store, f.Key, data); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			res.UploadedFiles++
			res.UploadedBytes += f.Size
			if isImmutable(f.Name) {
				// Reusable by the next attempt even if this one fails: it is
				// newer than every retained snapshot (see reusable).
				t.snap.files[f.Name] = snapshotFile{key: f.Key, size: f.Size, crc: f.CRC32C}
			}
			return nil
		})
	}
	err = g.Wait()
	t.saveSnapFiles()
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: upload: %w", what, err)
	}

	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: %w", what, err)
	}
	key := ManifestKey(opts.Bucket, this.epoch, this.id)
	if err := putVerified(ctx, store, key, append(body, '\n')); err != nil {
		return SnapshotResult{}, fmt.Errorf("%s: manifest: %w", what, err)
	}
	res.UploadedFiles++
	res.UploadedBytes += int64(len(body) + 1)
	res.Record = catalog.CommitKVSnapshot{
		Bucket: opts.Bucket, LeaderEpoch: opts.LeaderEpoch, SnapshotID: id, LogOffset: offset, Manifest: key,
	}
	return res, nil
}

// retainedManifest reads the manifest of a retained snapshot, cached.
// REQUIRES: snapGate held.
func (t *Tablet) retainedManifest(ctx context.Context, store objstore.Store, bucket catalog.BucketID, s catalog.KVSnapshot) (*Manifest, error) {
	if m, ok := t.snap.manifests[s.Manifest]; ok {
		return m, nil
	}
	m, err := readManifest(ctx, store, bucket, s)
	if err != nil {
		return nil, err
	}
	if len(t.snap.manifests) > 4*catalog.KVSnapshotsRetained {
		clear(t.snap.manifests)
	}
	t.snap.manifests[s.Manifest] = m
	return m, nil
}

// putRetries is how many times a snapshot tries one object put.
const putRetries = 3

// putVerified creates key with data. An ErrExists is success when the
// object holds exactly data: an earlier try of ours whose response was lost.
func putVerified(ctx context.Context, store objstore.Store, key string, data []byte) error {
	var err error
	for range putRetries {
		err = store.PutIfAbsent(ctx, key, data)
		if err == nil {
			return nil
		}
		if errors.Is(err, objstore.ErrExists) {
			got, gerr := store.Get(ctx, key)
			if gerr != nil {
				return fmt.Errorf("put %s: it exists, and reading it back failed: %w", key, gerr)
			}
			if !bytes.Equal(got, data) {
				return fmt.Errorf("put %s: the object exists with other content", key)
			}
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("put %s: %w", key, err)
}
