package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/minkdb/mink/kv/kvcodec"
)

// The tablet's pebble keyspace (docs/format/kv.md): rows under rowPrefix,
// tablet metadata under metaPrefix.
const (
	metaPrefix = 0x00
	rowPrefix  = 0x01
)

var (
	// metaApplied holds the changelog offset applied up to (exclusive),
	// as a big-endian uint64. It is written in the same pebble batch as the
	// rows it covers.
	metaApplied = []byte{metaPrefix, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}
	// metaFormat holds the tablet format version, one byte.
	metaFormat = []byte{metaPrefix, 'f', 'o', 'r', 'm', 'a', 't'}
)

const tabletFormatV1 = 1

// dbDir is the pebble directory inside a tablet directory.
const dbDir = "db"

// maxFileSize caps pebble's target sstable size.
const maxFileSize = 32 << 20

var (
	// ErrOffsetGap: Apply was given records that do not continue the
	// tablet's applied offset. Records are applied exactly once, in log
	// order; a gap means the caller skipped part of the changelog.
	ErrOffsetGap = errors.New("changelog records do not continue the applied offset")
	// ErrClosed: the tablet is closed.
	ErrClosed = errors.New("tablet closed")
)

// Cache is a block cache that tablets share, so that a node sizes one
// cache for all its buckets. It is safe for concurrent use.
type Cache struct{ c *pebble.Cache }

// NewCache returns a cache of size bytes (allocated as it fills). Release it
// when no tablet will be opened with it any more; open tablets keep their
// own reference until Close.
func NewCache(size int64) *Cache { return &Cache{c: pebble.NewCache(size)} }

// Release drops the creator's reference.
func (c *Cache) Release() { c.c.Unref() }

// Options configures a tablet. Zero values mean "use the default".
type Options struct {
	// Cache is the block cache to use. If nil, the tablet has its own of
	// CacheSize bytes (default 64 MiB).
	Cache     *Cache
	CacheSize int64
	// MemTableSize is pebble's memtable size in bytes (default 32 MiB).
	MemTableSize uint64
	// Logger receives the tablet's log lines, including every corrupt
	// snapshot a restore skips. Default slog.Default().
	Logger *slog.Logger
	// UploadConcurrency bounds the object-store transfers of one snapshot
	// or restore (default 4).
	UploadConcurrency int

	// noCompactions turns pebble's automatic compactions off, for tests
	// that count the files snapshots share.
	noCompactions bool
}

func (o Options) withDefaults() Options {
	if o.CacheSize <= 0 {
		o.CacheSize = 64 << 20
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = 32 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.UploadConcurrency <= 0 {
		o.UploadConcurrency = 4
	}
	return o
}

// Tablet is the KV tablet of a primary-key bucket: the current row of every
// key, as of a changelog offset. It is a cache that can always be rebuilt
// from a snapshot and the changelog; it is never the only copy of anything,
// so it writes without a WAL: after a crash its directory holds the state of
// some earlier applied offset, which Open reopens (the changelog is replayed
// from there), or Restore rebuilds it.
//
// Reads (Get, NewReader) are safe concurrently with each other and with
// Apply and Snapshot. Apply calls are serialized; Snapshot calls are
// serialized.
type Tablet struct {
	dir  string
	opts Options
	db   *pebble.DB
	// fsCloser stops the disk-health checks of db's file system.
	fsCloser io.Closer

	// applyMu serializes Apply, and lets Snapshot checkpoint the database
	// at a known applied offset.
	applyMu sync.Mutex
	// applied is the offset applied up to; written under applyMu.
	applied atomic.Uint64
	closed  atomic.Bool
	// readers counts the Readers not yet closed (OpenReaders).
	readers atomic.Int64

	// snapGate makes snapshots one at a time. A snapshot holds it across
	// its uploads, so it is a channel, acquired with a context, and not a
	// mutex guarding data.
	snapGate chan struct{}
	// snap is the snapshot state, owned by the holder of snapGate (and by
	// Restore before it returns the tablet).
	snap struct {
		// files are the immutable files of this database known to be in the
		// object store, by local file name: uploaded by a snapshot of this
		// tablet or downloaded by its restore.
		files map[string]snapshotFile
		// lastID is the highest snapshot id this tablet has used.
		lastID uint64
		// manifests caches retained manifests by object key (they are
		// immutable).
		manifests map[string]*Manifest
	}
}

// Open opens the tablet in dir, creating an empty one (applied offset 0) if
// dir holds none. The directory belongs to the tablet: Snapshot uses it for
// temporary checkpoints. A tablet reopened after a crash is at the applied
// offset of its last flush; the caller replays the changelog from
// AppliedOffset.
func Open(dir string, opts Options) (*Tablet, error) {
	opts = opts.withDefaults()
	if err := checkTabletDir(dir); err != nil {
		return nil, fmt.Errorf("kv: open tablet: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kv: open tablet %s: %w", dir, err)
	}
	// Checkpoints of snapshots a crash interrupted.
	stale, _ := filepath.Glob(filepath.Join(dir, "checkpoint-*"))
	for _, d := range stale {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("kv: open tablet %s: %w", dir, err)
		}
	}
	t, err := openDB(dir, opts)
	if err != nil {
		return nil, err
	}
	t.loadSnapFiles()
	return t, nil
}

// checkTabletDir refuses a directory that holds anything but a tablet's
// files, so that a wrong path never gets a tablet written (or, by Restore,
// removed) into it.
func checkTabletDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != dbDir && !strings.HasPrefix(e.Name(), "checkpoint-") {
			return fmt.Errorf("%s is not a tablet directory: it holds %s", dir, e.Name())
		}
	}
	return nil
}

func openDB(dir string, opts Options) (*Tablet, error) {
	var cache *pebble.Cache
	if opts.Cache != nil {
		cache = opts.Cache.c
	} else {
		cache = pebble.NewCache(opts.CacheSize)
		defer cache.Unref()
	}
	// The disk-health-checking FS pebble would wrap by itself, made here so
	// that a failed open (a tablet directory refused after a restart) stops
	// its goroutine too.
	fs, fsCloser := vfs.WithDiskHealthChecks(vfs.Default, 5*time.Second, nil, func(info vfs.DiskSlowInfo) {
		opts.Logger.Warn("kv: slow disk", "path", info.Path, "op", info.OpType.String(), "duration", info.Duration)
	})
	popts := &pebble.Options{
		FS:           fs,
		Cache:        cache,
		MemTableSize: opts.MemTableSize,
		// No WAL: the tablet is a cache, rebuilt from a snapshot and the
		// changelog after a crash. A memtable flush is atomic, so what
		// reaches disk is always whole batches with their applied offset.
		// Without a WAL, a checkpoint is flushed sstables only, and pebble's
		// recycled WAL files (old bytes included) are never uploaded.
		DisableWAL:                  true,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{opts.Logger},
		DisableAutomaticCompactions: opts.noCompactions,
	}
	for i := range popts.Levels {
		// Bloom filters: a point lookup skips the sstables that cannot
		// hold its key.
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		// Snapshots and restores hold whole files in memory (the object
		// store reads and writes whole objects), UploadConcurrency at a
		// time: cap the sstable size (pebble's default reaches 128 MiB).
		popts.TargetFileSizes[i] = min(int64(2<<20)<<i, maxFileSize)
	}
	db, err := pebble.Open(filepath.Join(dir, dbDir), popts)
	if err != nil {
		fsCloser.Close()
		return nil, fmt.Errorf("kv: open tablet %s: %w", dir, err)
	}
	t := &Tablet{dir: dir, opts: opts, db: db, fsCloser: fsCloser, snapGate: make(chan struct{}, 1)}
	t.snap.files = map[string]snapshotFile{}
	t.snap.manifests = map[string]*Manifest{}
	applied, format, err := readMeta(db)
	if err != nil {
		t.closeDB()
		return nil, fmt.Errorf("kv: open tablet %s: %w", dir, err)
	}
	if format == 0 {
		// A new tablet: record the format so that a future version can tell.
		if err := db.Set(metaFormat, []byte{tabletFormatV1}, pebble.NoSync); err != nil {
			t.closeDB()
			return nil, fmt.Errorf("kv: open tablet %s: %w", dir, err)
		}
	} else if format != tabletFormatV1 {
		t.closeDB()
		return nil, fmt.Errorf("kv: open tablet %s: tablet format %d, this build reads %d", dir, format, tabletFormatV1)
	}
	t.applied.Store(applied)
	return t, nil
}

func readMeta(db pebble.Reader) (applied uint64, format byte, err error) {
	v, closer, err := db.Get(metaApplied)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, 0, fmt.Errorf("read applied offset: %w", err)
	default:
		if len(v) != 8 {
			closer.Close()
			return 0, 0, fmt.Errorf("applied offset has %d bytes, want 8", len(v))
		}
		applied = binary.BigEndian.Uint64(v)
		closer.Close()
	}
	v, closer, err = db.Get(metaFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, 0, fmt.Errorf("read tablet format: %w", err)
	default:
		if len(v) == 1 {
			format = v[0]
		}
		closer.Close()
		if format == 0 {
			return 0, 0, fmt.Errorf("tablet format is malformed")
		}
	}
	return applied, format, nil
}

// Dir is the tablet's directory.
func (t *Tablet) Dir() string { return t.dir }

// AppliedOffset is the changelog offset the tablet has applied up to
// (exclusive): it holds the effect of records [0, AppliedOffset).
func (t *Tablet) AppliedOffset() uint64 { return t.applied.Load() }

func rowKey(buf, key []byte) []byte {
	buf = append(buf[:0], rowPrefix)
	return append(buf, key...)
}

// Get returns a copy of the current row of key. It never sees a record that
// has not been applied, that is, one that might not be acknowledged.
func (t *Tablet) Get(key []byte) ([]byte, bool, error) {
	if t.closed.Load() {
		return nil, false, ErrClosed
	}
	return get(t.db, key)
}

func get(r pebble.Reader, key []byte) ([]byte, bool, error) {
	var buf [64]byte
	v, closer, err := r.Get(rowKey(buf[:], key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kv: get %x: %w", key, err)
	}
	row := append([]byte(nil), v...)
	closer.Close()
	return row, true, nil
}

// Apply applies changelog records to the tablet. endOffset is the stream
// offset just past the last record; record i has offset
// endOffset - len(records) + i.
//
// Contract: the caller applies a record only after the stream append holding
// it is acknowledged (durable), and applies every acknowledged record
// exactly once, in offset order. The tablet therefore never holds a value
// that could still be lost, and a reader of the tablet never sees one.
// Records the tablet has already applied (an overlap while replaying) are
// skipped; a gap returns ErrOffsetGap and changes nothing.
//
// The records and the new applied offset are written in one pebble batch, so
// the tablet on disk is always at some applied offset, never in between.
func (t *Tablet) Apply(records []kvcodec.ChangeRecord, endOffset uint64) error {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	n := uint64(len(records))
	if endOffset < n {
		return fmt.Errorf("kv: apply %d records ending at offset %d: they would start before offset 0", n, endOffset)
	}
	applied := t.applied.Load()
	start := endOffset - n
	if endOffset <= applied {
		return nil
	}
	if start > applied {
		return fmt.Errorf("kv: apply records [%d, %d): %w (applied up to %d)", start, endOffset, ErrOffsetGap, applied)
	}
	records = records[applied-start:]
	b := t.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, r := range records {
		buf = rowKey(buf, r.Key)
		var err error
		switch r.Type {
		case kvcodec.Insert, kvcodec.UpdateAfter:
			err = b.Set(buf, r.Row, nil)
		case kvcodec.Delete:
			err = b.Delete(buf, nil)
		case kvcodec.UpdateBefore:
			// The +U that follows carries the new row.
		default:
			return fmt.Errorf("kv: apply: record %s has an unknown change type", r)
		}
		if err != nil {
			return fmt.Errorf("kv: apply: %w", err)
		}
	}
	var off [8]byte
	binary.BigEndian.PutUint64(off[:], endOffset)
	if err := b.Set(metaApplied, off[:], nil); err != nil {
		return fmt.Errorf("kv: apply: %w", err)
	}
	if err := t.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("kv: apply records [%d, %d): %w", applied, endOffset, err)
	}
	t.applied.Store(endOffset)
	return nil
}

// ApplyEntry applies a changelog stream entry (see Apply): count records
// at offsets [offset, offset+count), encoded in payload by EncodeChanges.
// Replay calls it for every entry from the restored offset on.
func (t *Tablet) ApplyEntry(c *kvcodec.Codec, offset uint64, count uint32, payload []byte) error {
	if offset+uint64(count) <= t.AppliedOffset() {
		return nil
	}
	records, err := c.DecodeChanges(payload)
	if err != nil {
		return fmt.Errorf("kv: entry at offset %d: %w", offset, err)
	}
	if len(records) != int(count) {
		return fmt.Errorf("kv: entry at offset %d: %w: %d records, the entry says %d", offset, kvcodec.ErrBadRow, len(records), count)
	}
	return t.Apply(records, offset+uint64(count))
}

// Close flushes and closes the tablet, after the Snapshot in progress if
// any (cancel its context to hurry it). Its
// directory stays; Open reopens it at its applied offset.
//
// REQUIRES: no Reader or RecordReader of the tablet is open, and no other
// call is running or will be made.
func (t *Tablet) Close() error {
	// Wait for a snapshot in progress (cancel its context to hurry it).
	t.snapGate <- struct{}{}
	defer func() { <-t.snapGate }()
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	if t.closed.Swap(true) {
		return nil
	}
	// Without a WAL, the memtable is lost unless flushed.
	if err := t.db.Flush(); err != nil {
		t.closeDB()
		return fmt.Errorf("kv: close tablet %s: flush: %w", t.dir, err)
	}
	if err := t.closeDB(); err != nil {
		return fmt.Errorf("kv: close tablet %s: %w", t.dir, err)
	}
	return nil
}

// closeDB closes the database and its file system.
func (t *Tablet) closeDB() error {
	err := t.db.Close()
	t.fsCloser.Close()
	return err
}

// Reader is a consistent, point-in-time view of a tablet: every read sees
// the rows as of Offset. Close it when done; an open Reader pins the files
// of its state.
type Reader struct {
	snap   *pebble.Snapshot
	offset uint64
	t      *Tablet
	done   atomic.Bool
}

// NewReader returns a Reader of the tablet's current state.
func (t *Tablet) NewReader() (*Reader, error) {
	if t.closed.Load() {
		return nil, ErrClosed
	}
	snap := t.db.NewSnapshot()
	applied, _, err := readMeta(snap)
	if err != nil {
		snap.Close()
		return nil, fmt.Errorf("kv: new reader: %w", err)
	}
	t.readers.Add(1)
	return &Reader{snap: snap, offset: applied, t: t}, nil
}

// Offset is the changelog offset the reader's state is at: it holds the
// effect of records [0, Offset).
func (r *Reader) Offset() uint64 { return r.offset }

// Get returns a copy of the row of key.
func (r *Reader) Get(key []byte) ([]byte, bool, error) { return get(r.snap, key) }

// Scan calls fn for every row with lower <= key < upper, in key order; nil
// bounds are open. The slices passed to fn are valid only during the call.
// An error from fn stops the scan and is returned.
func (r *Reader) Scan(lower, upper []byte, fn func(key, row []byte) error) error {
	it, err := r.snap.NewIter(&pebble.IterOptions{
		LowerBound: rowKey(nil, lower),
		UpperBound: upperBound(upper),
	})
	if err != nil {
		return fmt.Errorf("kv: scan: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return fmt.Errorf("kv: scan: %w", err)
		}
		if err := fn(it.Key()[1:], v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("kv: scan: %w", err)
	}
	return nil
}

func upperBound(upper []byte) []byte {
	if upper == nil {
		return []byte{rowPrefix + 1}
	}
	return rowKey(nil, upper)
}

// Close releases the reader.
func (r *Reader) Close() error {
	if r.done.Swap(true) {
		return nil
	}
	defer r.t.readers.Add(-1)
	return r.snap.Close()
}

// OpenReaders is the number of Readers of the tablet not yet closed. The
// owner of a tablet that hands Readers out waits for it to reach 0 before
// Close.
func (t *Tablet) OpenReaders() int { return int(t.readers.Load()) }

// pebbleLogger sends pebble's log lines to slog: info at debug level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf("pebble: "+format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf("pebble: "+format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
