package s3stream

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/minkdb/mink/objstore"
)

// Cache keeps immutable objects on local disk, evicting the least recently
// used beyond MaxBytes. Objects are immutable once created, so a cached copy
// is never stale. Safe for concurrent use.
type Cache struct {
	dir      string
	maxBytes int64

	mu struct {
		sync.Mutex
		lru   *list.List // of *cacheItem, most recent at the front
		items map[string]*list.Element
		bytes int64
	}
}

type cacheItem struct {
	key  string
	size int64
}

// NewCache returns a cache in dir (created if needed, emptied of earlier
// contents).
func NewCache(dir string, maxBytes int64) (*Cache, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("reset cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cache %s: %w", dir, err)
	}
	c := &Cache{dir: dir, maxBytes: maxBytes}
	c.mu.lru = list.New()
	c.mu.items = make(map[string]*list.Element)
	return c, nil
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, strings.ReplaceAll(key, "/", "%"))
}

// Get returns the object from the cache, fetching it from store on a miss.
func (c *Cache) Get(ctx context.Context, store objstore.Store, key string) ([]byte, error) {
	c.mu.Lock()
	if el, ok := c.mu.items[key]; ok {
		c.mu.lru.MoveToFront(el)
		c.mu.Unlock()
		data, err := os.ReadFile(c.path(key))
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cache read %s: %w", key, err)
		}
		// Evicted between the lookup and the read: fetch again.
	} else {
		c.mu.Unlock()
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	c.put(key, data)
	return data, nil
}

// remove drops key's cached copy: an object found corrupt is fetched again
// by the next read, so that restoring it in the store mends the reads.
func (c *Cache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.items[key]; ok {
		c.mu.lru.Remove(el)
		delete(c.mu.items, key)
		c.mu.bytes -= el.Value.(*cacheItem).size
		os.Remove(c.path(key))
	}
}

// put stores data best-effort: a full disk makes the cache a pass-through.
func (c *Cache) put(key string, data []byte) {
	if int64(len(data)) > c.maxBytes {
		return
	}
	path := c.path(key)
	tmp, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.items[key]; ok {
		c.mu.lru.MoveToFront(el)
		return
	}
	c.mu.items[key] = c.mu.lru.PushFront(&cacheItem{key: key, size: int64(len(data))})
	c.mu.bytes += int64(len(data))
	for c.mu.bytes > c.maxBytes {
		el := c.mu.lru.Back()
		it := el.Value.(*cacheItem)
		c.mu.lru.Remove(el)
		delete(c.mu.items, it.key)
		c.mu.bytes -= it.size
		os.Remove(c.path(it.key))
	}
}
