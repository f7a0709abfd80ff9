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

	"github.com/minkdb/mink/buckets/objstore"
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
	data, err := s.store.Get(s.ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &memFile{Reader: bytes.NewReader(data), name: key, size: int64(len(data))}, nil
}

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
