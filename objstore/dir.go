package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// dirTempName is the directory, directly under a Dir's root, in which puts
// stage their data. It is on the same file system as every object, so a
// staged file can be hard-linked into place. Keys under it are reserved.
const dirTempName = ".objstore-tmp"

// Dir is a Store on a local directory. Object "a/b/c" is the file
// <root>/a/b/c.
//
// A put writes the data to a fresh file in <root>/.objstore-tmp, fsyncs it,
// hard-links it to its final name (link(2) fails with EEXIST if the name is
// taken, which is what makes the put create-only and atomic), removes the
// temp name and fsyncs the parent directory. A reader therefore sees either
// no object or the whole of it, and a returned put survives a crash.
//
// Limits of the file-system mapping: a key cannot also be a directory of
// other keys ("a" and "a/b" cannot both exist), and every segment must fit
// the file system's name limit (255 bytes on most). A crash during a put may
// leave a file in .objstore-tmp; it is never listed or read and may be
// removed while no process has the store open.
type Dir struct {
	root    string
	tempDir string
	// dirs orders this Dir's making of parent directories (put, shared)
	// against its removal of the ones a delete left empty (exclusive):
	// without it, enough deletes racing one put could remove its parent
	// every time between its mkdir and its link. Another process on the
	// same directory is still met by link's retry.
	dirs sync.RWMutex
}

var _ Store = (*Dir)(nil)

// NewDir opens (creating if needed) a local directory store at root.
func NewDir(root string) (*Dir, error) {
	if !filepath.IsAbs(root) {
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, fmt.Errorf("objstore: open dir %s: %w", root, err)
		}
		root = abs
	}
	root = filepath.Clean(root)
	tempDir := filepath.Join(root, dirTempName)
	if err := os.MkdirAll(tempDir, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: open dir %s: %w", root, err)
	}
	d := &Dir{root: root, tempDir: tempDir}
	d.removeOrphanSegments()
	return d, nil
}

// Root returns the store's directory.
func (d *Dir) Root() string { return d.root }

func (d *Dir) checkKey(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if key == dirTempName || strings.HasPrefix(key, dirTempName+"/") {
		return fmt.Errorf("%w: %q is reserved by the local directory store", ErrInvalidKey, key)
	}
	return nil
}

func (d *Dir) path(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

// Get implements Store.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := d.checkKey(key); err != nil {
		return nil, fmt.Errorf("objstore: get %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("objstore: get %s: %w", key, err)
	}
	data, err := os.ReadFile(d.path(key))
	if err != nil {
		return nil, fmt.Errorf("objstore: get %s: %w", key, dirReadErr(err))
	}
	return data, nil
}

// GetRange implements Store.
func (d *Dir) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := d.checkKey(key); err != nil {
		return nil, fmt.Errorf("objstore: get range %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, err)
	}
	f, err := os.Open(d.path(key))
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, dirReadErr(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, ErrNotFound)
	}
	end, err := clipRange(off, n, info.Size())
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w", key, off, n, err)
	}
	buf := make([]byte, end-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("objstore: get range %s: %w", key, err)
	}
	return buf, nil
}

// clipRange validates a range request against an object of the given size
// and returns the exclusive end of the bytes to return.
func clipRange(off, n, size int64) (end int64, err error) {
	if off < 0 || off > size {
		return 0, fmt.Errorf("%w: offset %d, object size %d", ErrInvalidRange, off, size)
	}
	if n < 0 || n > size-off {
		return size, nil
	}
	return off + n, nil
}

// dirReadErr maps the errors of opening an object for reading: a missing
// file, a path through a non-directory ("a/b" when "a" is an object) and a
// directory ("a" when only "a/b" exists) all mean the object does not exist.
func dirReadErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%w (%v)", ErrNotFound, err)
	}
	return err
}

// PutIfAbsent implements Store.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := d.checkKey(key); err != nil {
		return fmt.Errorf("objstore: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if err := d.put(key, data); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return nil
}

func (d *Dir) put(key string, data []byte) error {
	final := d.path(key)
	// Fail fast without writing data if the key is taken; the link below is
	// still what decides.
	if _, err := os.Lstat(final); err == nil {
		return d.existsErr(final)
	}

	tmp, err := os.CreateTemp(d.tempDir, "put-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // after the link, this drops only the temp name
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}

	return d.link(tmpName, final)
}

// link gives the staged file tmpName the object name final, create-only,
// and makes the name durable.
func (d *Dir) link(tmpName, final string) error {
	parent := filepath.Dir(final)
	// A concurrent Delete may remove a parent directory that just became
	// empty between our mkdir and link; the link then fails with ENOENT
	// and we recreate the parents and try again.
	for attempt := 0; ; attempt++ {
		d.dirs.RLock()
		mkErr := d.mkdirAll(parent)
		var err error
		if mkErr == nil {
			err = os.Link(tmpName, final)
		}
		d.dirs.RUnlock()
		if mkErr != nil {
			if errors.Is(mkErr, syscall.ENOTDIR) {
				return fmt.Errorf("a parent of the key is an object: %w", mkErr)
			}
			if errors.Is(mkErr, fs.ErrNotExist) && attempt < 10 {
				continue
			}
			return mkErr
		}
		if err == nil {
			break
		}
		if errors.Is(err, fs.ErrExist) {
			return d.existsErr(final)
		}
		if errors.Is(err, fs.ErrNotExist) && attempt < 10 {
			continue
		}
		return err
	}
	return syncDir(parent)
}

// existsErr returns the error for a put whose final name is taken. A
// directory there means the key is a prefix of other keys, which a local
// directory cannot represent; that is not ErrExists, since no object has
// the key.
func (d *Dir) existsErr(final string) error {
	if info, err := os.Lstat(final); err == nil && info.IsDir() {
		return errors.New("key names a directory of other objects (the local directory store cannot hold both \"a\" and \"a/b\")")
	}
	return ErrExists
}

// mkdirAll creates dir and its missing parents below the root, fsyncing
// each parent whose entries changed so the new directories survive a crash.
func (d *Dir) mkdirAll(dir string) error {
	if info, err := os.Stat(dir); err == nil {
		if !info.IsDir() {
			return fmt.Errorf("mkdir %s: %w", dir, syscall.ENOTDIR)
		}
		return nil
	}
	rel, err := filepath.Rel(d.root, dir)
	if err != nil || rel == "." {
		return err
	}
	cur := d.root
	for seg := range strings.SplitSeq(rel, string(filepath.Separator)) {
		next := filepath.Join(cur, seg)
		err := os.Mkdir(next, 0o755)
		switch {
		case err == nil:
			if err := syncDir(cur); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			if info, statErr := os.Stat(next); statErr == nil && !info.IsDir() {
				return fmt.Errorf("mkdir %s: %w", next, syscall.ENOTDIR)
			}
		default:
			return err
		}
		cur = next
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// List implements Store.
func (d *Dir) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	// Walk the deepest directory that contains every match: the prefix up
	// to its last '/'.
	var start string
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	var out []ObjectInfo
	if err := d.walk(ctx, start, prefix, &out); err != nil {
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	// Directory order is not key order ("a-c" sorts before "a/b").
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// walk appends to out the objects under directory key dirKey ("" for the
// root) whose keys start with prefix. Entries that vanish during the walk
// (concurrent deletes) are skipped.
func (d *Dir) walk(ctx context.Context, dirKey, prefix string, out *[]ObjectInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(d.root, filepath.FromSlash(dirKey)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		key := e.Name()
		if dirKey != "" {
			key = dirKey + "/" + key
		} else if key == dirTempName {
			continue
		}
		// Descend only into directories that can hold matches: key+"/" and
		// prefix must agree on their common length.
		if e.IsDir() {
			sub := key + "/"
			n := min(len(sub), len(prefix))
			if sub[:n] == prefix[:n] {
				if err := d.walk(ctx, key, prefix, out); err != nil {
					return err
				}
			}
			continue
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		*out = append(*out, ObjectInfo{Key: key, Size: info.Size()})
	}
	return nil
}

// Delete implements Store. It also removes parent directories that the
// delete left empty, so deleted key ranges (old WAL epochs) do not leave
// directories behind.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := d.checkKey(key); err != nil {
		return fmt.Errorf("objstore: delete %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	final := d.path(key)
	info, err := os.Lstat(final)
	if err != nil || info.IsDir() {
		// Missing, below a non-directory, or only a directory of other
		// keys: no object has this key.
		return nil
	}
	if err := os.Remove(final); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	// Best effort: rmdir fails harmlessly on a non-empty directory, and a
	// put racing with us (of another process: d.dirs orders ours)
	// recreates what it needs (see link).
	d.dirs.Lock()
	defer d.dirs.Unlock()
	for dir := filepath.Dir(final); dir != d.root && strings.HasPrefix(dir, d.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// Close implements Store. A Dir holds no resources.
func (d *Dir) Close() error { return nil }
