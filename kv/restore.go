package kv

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// ErrCorruptSnapshot: a snapshot's manifest or one of its files is missing,
// malformed, has the wrong size or checksum, or the database it holds does
// not open at the manifest's offset. The error names the object.
var ErrCorruptSnapshot = errors.New("corrupt KV snapshot")

// RestoreOptions says what to restore.
type RestoreOptions struct {
	Bucket catalog.BucketID
	// Snapshots are the bucket's retained snapshots in the view
	// (catalog.Bucket.Snapshots), in any order. The newest (highest log
	// offset) is tried first.
	Snapshots []catalog.KVSnapshot
	// OnCorrupt, if set, is called for every snapshot that is skipped as
	// corrupt, with an error wrapping ErrCorruptSnapshot that names the
	// object. Skipped snapshots are also logged at error level.
	OnCorrupt func(snap catalog.KVSnapshot, err error)
	// Tablet configures the restored tablet.
	Tablet Options
}

// RestoreResult says what a restore produced.
type RestoreResult struct {
	// Snapshot is the snapshot restored, or nil when the tablet is empty
	// (no snapshot, or none usable): the changelog is then replayed from 0.
	Snapshot *catalog.KVSnapshot
	// LogOffset is the tablet's applied offset: the caller replays the
	// changelog from here before serving.
	LogOffset uint64
	// Skipped has one error per corrupt snapshot skipped, newest first.
	Skipped []error
	// Files and Bytes were downloaded for the restored snapshot.
	Files int
	Bytes int64
}

// Restore builds a tablet in dir from the newest usable snapshot and returns
// it with its applied offset; the caller replays the changelog from
// RestoreResult.LogOffset, then serves. dir must not exist or be a tablet
// directory (of a closed tablet); its previous tablet is removed.
//
// Every file is checked against the manifest's size and CRC-32C, and the
// opened database must be at the manifest's offset. A snapshot that fails a
// check (ErrCorruptSnapshot) is reported loudly — logged, passed to
// OnCorrupt, listed in Skipped — and the next older one is tried; when none
// is left the tablet is empty (full replay). A restore never yields partial
// state. Any other error (the object store is unreachable, the local disk
// fails, ctx ends) aborts the restore and is returned: the caller retries
// later rather than fall back to an older snapshot needlessly.
func Restore(ctx context.Context, store objstore.Store, dir string, opts RestoreOptions) (*Tablet, RestoreResult, error) {
	tabletOpts := opts.Tablet.withDefaults()
	if err := checkTabletDir(dir); err != nil {
		return nil, RestoreResult{}, fmt.Errorf("kv: restore bucket %d: %w", opts.Bucket, err)
	}
	snaps := slices.Clone(opts.Snapshots)
	slices.SortFunc(snaps, func(a, b catalog.KVSnapshot) int {
		return cmp.Or(cmp.Compare(b.LogOffset, a.LogOffset), cmp.Compare(b.LeaderEpoch, a.LeaderEpoch), cmp.Compare(b.ID, a.ID))
	})
	var res RestoreResult
	var lastID uint64
	for _, s := range snaps {
		lastID = max(lastID, s.ID)
	}
	for _, s := range snaps {
		t, files, bytes, err := restoreSnapshot(ctx, store, dir, opts.Bucket, s, tabletOpts)
		if err == nil {
			t.snap.lastID = lastID
			res.Snapshot = &s
			res.LogOffset, res.Files, res.Bytes = t.AppliedOffset(), files, bytes
			return t, res, nil
		}
		if !errors.Is(err, ErrCorruptSnapshot) {
			return nil, res, fmt.Errorf("kv: restore bucket %d from snapshot %d: %w", opts.Bucket, s.ID, err)
		}
		tabletOpts.Logger.Error("kv: restore: skipping a corrupt snapshot",
			"bucket", opts.Bucket, "snapshot", s.ID, "log_offset", s.LogOffset, "manifest", s.Manifest, "err", err)
		if opts.OnCorrupt != nil {
			opts.OnCorrupt(s, err)
		}
		res.Skipped = append(res.Skipped, err)
	}
	if len(snaps) > 0 {
		tabletOpts.Logger.Error("kv: restore: no usable snapshot; starting empty, the whole changelog is replayed",
			"bucket", opts.Bucket, "skipped", len(res.Skipped))
	}
	if err := resetDir(dir); err != nil {
		return nil, res, fmt.Errorf("kv: restore bucket %d: %w", opts.Bucket, err)
	}
	t, err := openDB(dir, tabletOpts)
	if err != nil {
		return nil, res, err
	}
	t.snap.lastID = lastID
	return t, res, nil
}

func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

// corrupt wraps an error as ErrCorruptSnapshot.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
}

// restoreSnapshot downloads and opens one snapshot in dir.
func restoreSnapshot(ctx context.Context, store objstore.Store, dir string, bucket catalog.BucketID, s catalog.KVSnapshot, opts Options) (*Tablet, int, int64, error) {
	m, err := readManifest(ctx, store, bucket, s)
	if err != nil {
		return nil, 0, 0, err
	}
	if err := resetDir(dir); err != nil {
		return nil, 0, 0, err
	}
	dbPath := filepath.Join(dir, dbDir)
	if err := os.MkdirAll(dbPath, 0o755); err != nil {
		return nil, 0, 0, err
	}
	var (
		mu    sync.Mutex
		files int
		bytes int64
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.UploadConcurrency)
	for _, f := range m.Files {
		g.Go(func() error {
			var data []byte
			if f.Key != "" {
				var err error
				data, err = store.Get(gctx, f.Key)
				if errors.Is(err, objstore.ErrNotFound) {
					return corrupt("snapshot %d: file %s: object %s is missing", s.ID, f.Name, f.Key)
				}
				if err != nil {
					return fmt.Errorf("snapshot %d: file %s: %w", s.ID, f.Name, err)
				}
			}
			if int64(len(data)) != f.Size {
				return corrupt("snapshot %d: file %s: object %s has %d bytes, the manifest says %d", s.ID, f.Name, f.Key, len(data), f.Size)
			}
			if sum := crc32.Checksum(data, castagnoli); sum != f.CRC32C {
				return corrupt("snapshot %d: file %s: object %s has CRC-32C %08x, the manifest says %08x", s.ID, f.Name, f.Key, sum, f.CRC32C)
			}
			if err := os.WriteFile(filepath.Join(dbPath, f.Name), data, 0o644); err != nil {
				return err
			}
			mu.Lock()
			files++
			bytes += f.Size
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, 0, err
	}
	t, err := openDB(dir, opts)
	if err != nil {
		return nil, 0, 0, corrupt("snapshot %d (%s): the restored database does not open: %v", s.ID, s.Manifest, err)
	}
	if got := t.AppliedOffset(); got != m.LogOffset {
		t.Close()
		return nil, 0, 0, corrupt("snapshot %d (%s): the restored database is at offset %d, the manifest says %d", s.ID, s.Manifest, got, m.LogOffset)
	}
	for _, f := range m.Files {
		if f.Key != "" && isImmutable(f.Name) {
			t.snap.files[f.Name] = snapshotFile{key: f.Key, size: f.Size, crc: f.CRC32C}
		}
	}
	t.snap.manifests[s.Manifest] = m
	t.saveSnapFiles()
	return t, files, bytes, nil
}

// readManifest reads and checks the manifest of the committed snapshot s.
// Anything wrong with it is ErrCorruptSnapshot.
func readManifest(ctx context.Context, store objstore.Store, bucket catalog.BucketID, s catalog.KVSnapshot) (*Manifest, error) {
	data, err := store.Get(ctx, s.Manifest)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, corrupt("snapshot %d: manifest %s is missing", s.ID, s.Manifest)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: read manifest: %w", s.ID, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, corrupt("snapshot %d: manifest %s: %v", s.ID, s.Manifest, err)
	}
	if m.Format != ManifestFormat {
		return nil, corrupt("snapshot %d: manifest %s has format %d, this build reads %d", s.ID, s.Manifest, m.Format, ManifestFormat)
	}
	if m.Bucket != bucket || m.LeaderEpoch != s.LeaderEpoch || m.SnapshotID != s.ID || m.LogOffset != s.LogOffset {
		return nil, corrupt("snapshot %d: manifest %s is of bucket %d snapshot %d (leader epoch %d, offset %d), the view records bucket %d snapshot %d (leader epoch %d, offset %d)",
			s.ID, s.Manifest, m.Bucket, m.SnapshotID, m.LeaderEpoch, m.LogOffset, bucket, s.ID, s.LeaderEpoch, s.LogOffset)
	}
	names := map[string]bool{}
	for _, f := range m.Files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, `/\`) || names[f.Name] {
			return nil, corrupt("snapshot %d: manifest %s: bad or repeated file name %q", s.ID, s.Manifest, f.Name)
		}
		names[f.Name] = true
		if f.Size < 0 || (f.Key == "") != (f.Size == 0) || (f.Key != "" && !strings.HasPrefix(f.Key, BucketPrefix(bucket))) {
			return nil, corrupt("snapshot %d: manifest %s: file %q has key %q and size %d", s.ID, s.Manifest, f.Name, f.Key, f.Size)
		}
	}
	return &m, nil
}
