package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/minkdb/mink/objstore"
)

// storeIO is iceberg-go's file system over mink's object store. Iceberg
// metadata records absolute locations (base + "/" + key, base being the
// store's URL such as "file:///var/mink/objects" or "s3://bucket/prefix"),
// so that other engines can read the lake; storeIO maps them back to keys.
//
// Writes are create-only, as everything in the store: an Iceberg writer
// never overwrites a file (every manifest, manifest list and data file has
// a fresh name, and metadata versions are committed create-only by Lake).
// Remove does nothing: the lake's garbage collector (Lake.CollectGarbage,
// run by the lifecycle loop) is the only delete path.
type storeIO struct {
	ctx   context.Context
	store objstore.Store
	base  string
}

var _ iceio.WriteFileIO = (*storeIO)(nil)

func (s *storeIO) key(name string) (string, error) {
	k, ok := strings.CutPrefix(name, s.base+"/")
	if !ok {
		return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: location is outside the object store %s", fs.ErrNotExist, s.base)}
	}
	return k, nil
}

func (s *storeIO) Open(name string) (iceio.File, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	// Find the size first: a small object (metadata, manifests) is read
	// whole, a large one (a data file, of which readers want the footer
	// and some column chunks) by ranges as it is read.
	objs, err := s.store.List(s.ctx, key)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	size := int64(-1)
	for _, o := range objs {
		if o.Key == key {
			size = o.Size
		}
	}
	if size < 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if size > wholeReadBytes {
		return &rangeFile{io: s, key: key, size: size}, nil
	}
	data, err := s.store.Get(s.ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &memFile{Reader: bytes.NewReader(data), name: key, size: int64(len(data))}, nil
}

// wholeReadBytes: objects up to this size are read with one Get (a
// variable for tests).
var wholeReadBytes int64 = 4 << 20

// rangeFile reads a large object by ranges. Sequential Reads go through a
// 1 MiB window so that a reader's small reads do not each cost a request.
type rangeFile struct {
	io   *storeIO
	key  string
	size int64
	pos  int64
	// window holds the bytes [winOff, winOff+len(window)).
	window []byte
	winOff int64
}

func (f *rangeFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.key, Err: fs.ErrInvalid}
	}
	if off >= f.size {
		return 0, io.EOF
	}
	data, err := f.io.store.GetRange(f.io.ctx, f.key, off, int64(len(p)))
	if err != nil {
		return 0, &fs.PathError{Op: "read", Path: f.key, Err: err}
	}
	n := copy(p, data)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *rangeFile) Read(p []byte) (int, error) {
	if f.pos >= f.size {
		return 0, io.EOF
	}
	if f.pos < f.winOff || f.pos >= f.winOff+int64(len(f.window)) {
		data, err := f.io.store.GetRange(f.io.ctx, f.key, f.pos, max(int64(len(p)), 1<<20))
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.key, Err: err}
		}
		f.window, f.winOff = data, f.pos
	}
	n := copy(p, f.window[f.pos-f.winOff:])
	f.pos += int64(n)
	return n, nil
}

func (f *rangeFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	default:
		return 0, fmt.Errorf("seek %s: bad whence %d", f.key, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek %s: negative position %d", f.key, offset)
	}
	f.pos = offset
	return offset, nil
}

func (f *rangeFile) Close() error               { return nil }
func (f *rangeFile) Stat() (fs.FileInfo, error) { return fileInfo{name: f.key, size: f.size}, nil }

func (s *storeIO) Remove(name string) error { return nil }

func (s *storeIO) WriteFile(name string, p []byte) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	if err := s.store.PutIfAbsent(s.ctx, key, p); err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

func (s *storeIO) Create(name string) (iceio.FileWriter, error) {
	if _, err := s.key(name); err != nil {
		return nil, err
	}
	return &memWriter{io: s, name: name}, nil
}

// memWriter buffers a file and puts it on Close.
type memWriter struct {
	bytes.Buffer
	io   *storeIO
	name string
}

func (w *memWriter) Close() error { return w.io.WriteFile(w.name, w.Bytes()) }

// memFile is a whole object read into memory.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Close() error               { return nil }
func (f *memFile) Stat() (fs.FileInfo, error) { return fileInfo{name: f.name, size: f.size}, nil }

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return i.name[strings.LastIndexByte(i.name, '/')+1:] }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }

var _ io.ReaderAt = (*memFile)(nil)
