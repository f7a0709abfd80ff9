package server

import (
	"fmt"
	"path/filepath"

	"github.com/minkdb/mink/tiering"
)

// newLakeReader returns the reader of tiered rows that SQL queries use (the
// union read), with its local cache of lake files in LakeCacheDir (default
// <data-dir>/lake-cache) bounded by LakeCacheBytes.
func (s *Server) newLakeReader() (*tiering.LakeReader, error) {
	storeURL := s.cfg.ObjectStore
	if storeURL == "" {
		abs, err := filepath.Abs(filepath.Join(s.cfg.DataDir, "objects"))
		if err != nil {
			return nil, err
		}
		storeURL = "file://" + abs
	}
	dir := s.cfg.LakeCacheDir
	if dir == "" {
		dir = filepath.Join(s.cfg.DataDir, "lake-cache")
	}
	size := s.cfg.LakeCacheBytes
	if size <= 0 {
		size = DefaultLakeCacheBytes
	}
	cache, err := tiering.NewFileCache(dir, size)
	if err != nil {
		return nil, fmt.Errorf("--lake-cache-dir: %w", err)
	}
	return tiering.NewLakeReader(s.store, storeURL, cache), nil
}

// DefaultLakeCacheBytes is the default of --lake-cache-bytes.
const DefaultLakeCacheBytes = 1 << 30
