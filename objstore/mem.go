package objstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Mem is an in-memory Store for unit tests. It copies data in and out, so
// callers may reuse their buffers.
type Mem struct {
	mu struct {
		sync.Mutex
		objects map[string][]byte // key -> content; guarded by mu
	}
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store.
func NewMem() *Mem {
	m := &Mem{}
	m.mu.objects = make(map[string][]byte)
	return m
}

// Get implements Store.
func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	return m.GetRange(ctx, key, 0, -1)
}

// GetRange implements Store.
func (m *Mem) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("objstore: get %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("objstore: get %s: %w", key, err)
	}
	m.mu.Lock()
	data, ok := m.mu.objects[key]
	m.mu.Unlock()
	// data is never modified after insertion, so it can be read unlocked.
	if !ok {
		return nil, fmt.Errorf("objstore: get %s: %w", key, ErrNotFound)
	}
	end, err := clipRange(off, n, int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("objstore: get range %s [%d,+%d): %w", key, off, n, err)
	}
	return slices.Clone(data[off:end:end]), nil
}

// PutIfAbsent implements Store.
func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("objstore: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	stored := make([]byte, len(data))
	copy(stored, data)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.objects[key]; ok {
		return fmt.Errorf("objstore: put %s: %w", key, ErrExists)
	}
	m.mu.objects[key] = stored
	return nil
}

// List implements Store.
func (m *Mem) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	var out []ObjectInfo
	m.mu.Lock()
	for key, data := range m.mu.objects {
		if strings.HasPrefix(key, prefix) {
			out = append(out, ObjectInfo{Key: key, Size: int64(len(data))})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements Store.
func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("objstore: delete %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	m.mu.Lock()
	delete(m.mu.objects, key)
	m.mu.Unlock()
	return nil
}

// Close implements Store.
func (m *Mem) Close() error { return nil }
