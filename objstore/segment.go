package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// SegmentStore is a Store that can also hold segments: objects of a fixed
// size, created zero-filled, that their one writer then fills in place with
// durable writes. A write-ahead log on a local disk keeps its records in
// segments, so that committing a group costs one data sync instead of a new
// file and two syncs (docs/format/s3stream.md).
//
// Readers see a published segment through Get and GetRange like any other
// object, but unlike other objects it changes: a reader may see bytes that
// are not durable yet, and part of a write still under way. The format kept
// in a segment must tell its end (zeros) and a torn write apart by itself.
type SegmentStore interface {
	Store
	// NewSegment makes a durable, zero-filled segment of size bytes that no
	// key names yet. The caller names it with Publish and must Close it.
	NewSegment(ctx context.Context, size int64) (Segment, error)
}

// Segment is one segment, open for writing. Its methods are not safe for
// concurrent use.
type Segment interface {
	// Publish names the segment key, create-only like PutIfAbsent: exactly
	// one of any number of concurrent puts and publishes of key succeeds,
	// and the others return ErrExists. When it returns nil the name is
	// durable. Publishing again under the same key after an error is
	// success if the first attempt took effect.
	Publish(ctx context.Context, key string) error
	// WriteAt writes p at off and returns once the bytes are durable.
	// off+len(p) must not pass Size.
	WriteAt(p []byte, off int64) error
	// Size is the segment's size, fixed at NewSegment.
	Size() int64
	// Close releases the segment. One never published is removed.
	Close() error
}

// segTempPrefix names the staging files of unpublished segments.
const segTempPrefix = "seg-"

var _ SegmentStore = (*Dir)(nil)

// NewSegment implements SegmentStore. The segment is staged in
// .objstore-tmp, zero-filled by writing (so that a later write to it
// changes no file-system metadata and needs only a data sync) and fsynced.
// It holds a shared flock while open, so that a store opened later by
// another process can tell a crashed writer's leftovers from live ones.
func (d *Dir) NewSegment(ctx context.Context, size int64) (Segment, error) {
	if size <= 0 {
		return nil, fmt.Errorf("objstore: new segment: size %d", size)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("objstore: new segment: %w", err)
	}
	f, err := os.CreateTemp(d.tempDir, segTempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("objstore: new segment: %w", err)
	}
	s := &dirSegment{d: d, f: f, tmp: f.Name(), size: size}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		s.Close()
		return nil, fmt.Errorf("objstore: new segment: lock: %w", err)
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if err := ctx.Err(); err != nil {
			s.Close()
			return nil, fmt.Errorf("objstore: new segment: %w", err)
		}
		if _, err := f.Write(zeros[:min(int64(len(zeros)), size-off)]); err != nil {
			s.Close()
			return nil, fmt.Errorf("objstore: new segment: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		s.Close()
		return nil, fmt.Errorf("objstore: new segment: %w", err)
	}
	return s, nil
}

// removeOrphanSegments removes staged segments that no process has open:
// those of a writer that crashed before publishing them.
func (d *Dir) removeOrphanSegments() {
	entries, err := os.ReadDir(d.tempDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), segTempPrefix) {
			continue
		}
		name := filepath.Join(d.tempDir, e.Name())
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.Remove(name)
		}
		f.Close()
	}
}

type dirSegment struct {
	d    *Dir
	f    *os.File
	tmp  string // staging name; "" once published and unlinked
	size int64

	mu        sync.Mutex
	published string
}

func (s *dirSegment) Size() int64 { return s.size }

func (s *dirSegment) Publish(ctx context.Context, key string) error {
	if err := s.d.checkKey(key); err != nil {
		return fmt.Errorf("objstore: publish segment %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: publish segment %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	final := s.d.path(key)
	switch s.published {
	case key:
		// An earlier attempt linked it; make sure the name is durable.
		if err := syncDir(filepath.Dir(final)); err != nil {
			return fmt.Errorf("objstore: publish segment %s: %w", key, err)
		}
		return nil
	case "":
	default:
		return fmt.Errorf("objstore: publish segment %s: already published as %s", key, s.published)
	}
	if _, err := os.Lstat(final); err == nil {
		return fmt.Errorf("objstore: publish segment %s: %w", key, s.d.existsErr(final))
	}
	err := s.d.link(s.tmp, final)
	if err != nil && !errors.Is(err, ErrExists) {
		// The link may have been made before the error (the directory
		// sync failed): remember it, so that a retry can finish.
		if info, serr := os.Lstat(final); serr == nil {
			if mine, terr := os.Stat(s.tmp); terr == nil && os.SameFile(info, mine) {
				s.published = key
			}
		}
	}
	if err != nil {
		return fmt.Errorf("objstore: publish segment %s: %w", key, err)
	}
	s.published = key
	os.Remove(s.tmp)
	s.tmp = ""
	return nil
}

func (s *dirSegment) WriteAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > s.size {
		return fmt.Errorf("objstore: segment write [%d,+%d) outside its %d bytes: %w", off, len(p), s.size, ErrInvalidRange)
	}
	if _, err := s.f.WriteAt(p, off); err != nil {
		return fmt.Errorf("objstore: segment write: %w", err)
	}
	if err := datasync(s.f); err != nil {
		return fmt.Errorf("objstore: segment write: %w", err)
	}
	return nil
}

func (s *dirSegment) Close() error {
	err := s.f.Close()
	if s.tmp != "" {
		if rerr := os.Remove(s.tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
		s.tmp = ""
	}
	return err
}
