package tiering

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minkdb/mink/objstore"
)

// FileCache is a bounded local directory of lake objects (data files and
// manifests), which never change once written (docs/format/lake.md), so a
// cached copy is valid for as long as it exists. The least recently used
// objects are removed when the total size exceeds the bound; a file removed
// while a query reads it stays readable by that query (it is open).
//
// NewFileCache removes the cache files a previous process left in the
// directory (and nothing else). Safe for concurrent use.
type FileCache struct {
	dir string
	max int64

	mu    sync.Mutex
	lru   *list.List // of *cacheEntry, most recently used first
	items map[string]*list.Element
	size  int64

	hits, misses atomic.Uint64
}

type cacheEntry struct {
	key  string
	path string
	size int64
}

// NewFileCache returns a cache of at most maxBytes (> 0) in dir, which it
// creates if needed; files of an earlier cache in dir are removed.
func NewFileCache(dir string, maxBytes int64) (*FileCache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("lake cache: size must be positive, got %d", maxBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lake cache: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("lake cache: %w", err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() && isCacheFile(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("lake cache: %w", err)
			}
		}
	}
	return &FileCache{dir: dir, max: maxBytes, lru: list.New(), items: map[string]*list.Element{}}, nil
}

// Stats returns the number of opens served from the cache and from the
// object store.
func (c *FileCache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }

// Size is the total size of the cached objects.
func (c *FileCache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// isCacheFile reports whether name is a cache file's name: 32 hex digits
// and the object's extension, or a temporary file.
func isCacheFile(name string) bool {
	if strings.HasPrefix(name, "tmp-") {
		return true
	}
	base := strings.TrimSuffix(name, path.Ext(name))
	if len(base) != 32 {
		return false
	}
	_, err := hex.DecodeString(base)
	return err == nil
}

func (c *FileCache) pathOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:16])+path.Ext(key))
}

// open returns the cached copy of key, fetching it from store if needed.
func (c *FileCache) open(ctx context.Context, store objstore.Store, key string) (*os.File, error) {
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.lru.MoveToFront(el)
		p := el.Value.(*cacheEntry).path
		f, err := os.Open(p)
		c.mu.Unlock()
		if err == nil {
			c.hits.Add(1)
			return f, nil
		}
		c.forget(key)
	} else {
		c.mu.Unlock()
	}
	c.misses.Add(1)
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(key, ".parquet") {
		// Checked once, as it enters the cache; never cached if damaged.
		if err := verifyParquet(data); err != nil {
			return nil, err
		}
	}
	p := c.pathOf(key)
	tmp, err := os.CreateTemp(c.dir, "tmp-*")
	if err != nil {
		return nil, fmt.Errorf("lake cache: %w", err)
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("lake cache: %w", werr)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("lake cache: %w", err)
	}
	c.mu.Lock()
	if _, ok := c.items[key]; !ok {
		c.items[key] = c.lru.PushFront(&cacheEntry{key: key, path: p, size: int64(len(data))})
		c.size += int64(len(data))
	}
	c.evictLocked()
	c.mu.Unlock()
	return f, nil
}

// forget removes key's cached copy (a file found corrupt, so that the next
// read fetches it again).
func (c *FileCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeLocked(el)
	}
}

func (c *FileCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.items, e.key)
	c.size -= e.size
	if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Left behind; NewFileCache empties the directory on the next start.
		_ = err
	}
}

func (c *FileCache) evictLocked() {
	for c.size > c.max && c.lru.Len() > 1 {
		c.removeLocked(c.lru.Back())
	}
}
