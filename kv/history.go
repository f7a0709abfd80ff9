package kv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/minkdb/mink/catalog"
)

// metaHistory holds the tablet's History (docs/format/kv.md), written by
// SetHistory.
var metaHistory = []byte{metaPrefix, 'h', 'i', 's', 't', 'o', 'r', 'y'}

// historyFormatV1 is the first byte of an encoded History.
const historyFormatV1 = 1

// historyLen is the length of an encoded History: format, bucket, leader
// epoch, columns.
const historyLen = 1 + 8 + 8 + 4

// History names the changelog that a tablet's applied offset counts in:
// the bucket whose stream it is, and the leader epoch of the leader that
// opened the tablet last and applies to it. The bucket's owner records it
// (SetHistory) when it opens the tablet at a leader epoch, before it
// applies anything at that epoch; so every record applied after it was
// acknowledged by the stream at LeaderEpoch or earlier, and a tablet whose
// History names the epoch the stream was last opened at holds a prefix of
// the stream's durable changelog, [0, AppliedOffset).
type History struct {
	Bucket      catalog.BucketID
	LeaderEpoch uint64
	// Columns is the number of table columns the opener's codec had.
	Columns int
}

func (h History) encode() []byte {
	b := make([]byte, historyLen)
	b[0] = historyFormatV1
	binary.BigEndian.PutUint64(b[1:], uint64(h.Bucket))
	binary.BigEndian.PutUint64(b[9:], h.LeaderEpoch)
	binary.BigEndian.PutUint32(b[17:], uint32(h.Columns))
	return b
}

func decodeHistory(b []byte) (History, error) {
	if len(b) != historyLen || b[0] != historyFormatV1 {
		return History{}, fmt.Errorf("history record of %d bytes, format %d: want %d bytes, format %d", len(b), firstByte(b), historyLen, historyFormatV1)
	}
	return History{
		Bucket:      catalog.BucketID(binary.BigEndian.Uint64(b[1:])),
		LeaderEpoch: binary.BigEndian.Uint64(b[9:]),
		Columns:     int(binary.BigEndian.Uint32(b[17:])),
	}, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// History returns the tablet's History; false if it has none (a tablet
// never opened by a bucket, or written by a build before History).
func (t *Tablet) History() (History, bool, error) {
	if t.closed.Load() {
		return History{}, false, ErrClosed
	}
	v, closer, err := t.db.Get(metaHistory)
	if errors.Is(err, pebble.ErrNotFound) {
		return History{}, false, nil
	}
	if err != nil {
		return History{}, false, fmt.Errorf("kv: read history: %w", err)
	}
	defer closer.Close()
	h, err := decodeHistory(v)
	if err != nil {
		return History{}, false, fmt.Errorf("kv: tablet %s: %w", t.dir, err)
	}
	return h, true, nil
}

// SetHistory records h and makes it durable (a flush: the tablet has no
// WAL) before it returns. What reaches disk is always a prefix of the
// tablet's batches in the order they were applied, so a tablet found on
// disk with History h holds nothing applied after a later SetHistory.
func (t *Tablet) SetHistory(h History) error {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	if err := t.db.Set(metaHistory, h.encode(), pebble.NoSync); err != nil {
		return fmt.Errorf("kv: set history: %w", err)
	}
	if err := t.db.Flush(); err != nil {
		return fmt.Errorf("kv: set history: flush: %w", err)
	}
	return nil
}

// CheckFiles checks that every sstable of the tablet's current version is
// on disk at its recorded size: a tablet directory found after a restart
// whose files were removed or truncated is refused rather than served.
// (A flipped bit inside a file is caught by pebble's block checksums when
// the block is read: an error, never a wrong row.)
func (t *Tablet) CheckFiles() error {
	if t.closed.Load() {
		return ErrClosed
	}
	tables, err := t.db.SSTables()
	if err != nil {
		return fmt.Errorf("kv: tablet %s: list sstables: %w", t.dir, err)
	}
	for _, level := range tables {
		for _, tab := range level {
			name := filepath.Join(t.dir, dbDir, fmt.Sprintf("%06d.sst", uint64(tab.BackingSSTNum)))
			info, err := os.Stat(name)
			if err != nil {
				return fmt.Errorf("kv: tablet %s: sstable %s: %w", t.dir, filepath.Base(name), err)
			}
			// A virtual sstable is part of its backing file.
			if !tab.Virtual && info.Size() != int64(tab.Size) {
				return fmt.Errorf("kv: tablet %s: sstable %s has %d bytes, the database records %d", t.dir, filepath.Base(name), info.Size(), tab.Size)
			}
		}
	}
	return nil
}

// Crash closes the tablet as a crash of the process would leave it: what
// was applied since the last flush is lost (there is no WAL), and the
// directory reopens at an earlier applied offset. It is a fault-injection
// seam for tests of reopening after a crash.
//
// REQUIRES: as Close.
func (t *Tablet) Crash() error {
	t.snapGate <- struct{}{}
	defer func() { <-t.snapGate }()
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	if t.closed.Swap(true) {
		return nil
	}
	return t.closeDB()
}

// metaSnapFiles holds the tablet's known snapshot files (Tablet.snap.files)
// as JSON, so that a tablet reopened in place (reused after a restart)
// does not upload its sstables again at its next snapshot.
var metaSnapFiles = []byte{metaPrefix, 's', 'n', 'a', 'p', 'f', 'i', 'l', 'e', 's'}

// snapFileJSON is one entry of metaSnapFiles.
type snapFileJSON struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// saveSnapFiles records t.snap.files in the tablet. It reaches disk with
// the next flush; a tablet reopened without it uploads its files again.
// Every entry names an immutable file of this database's lineage (pebble
// never reuses a file number), stored at key, so any version of the record
// that reaches disk is true.
//
// REQUIRES: snapGate held (or Restore, before it returns the tablet).
func (t *Tablet) saveSnapFiles() {
	out := make(map[string]snapFileJSON, len(t.snap.files))
	for name, f := range t.snap.files {
		out[name] = snapFileJSON{Key: f.key, Size: f.size, CRC32C: f.crc}
	}
	body, err := json.Marshal(out)
	if err == nil {
		err = t.db.Set(metaSnapFiles, body, pebble.NoSync)
	}
	if err != nil {
		t.opts.Logger.Warn("kv: recording the tablet's snapshot files failed; a reopened tablet uploads them again", "dir", t.dir, "err", err)
	}
}

// loadSnapFiles reads what saveSnapFiles recorded into t.snap.files,
// keeping the entries whose file is in the database directory at the
// recorded size.
func (t *Tablet) loadSnapFiles() {
	v, closer, err := t.db.Get(metaSnapFiles)
	if err != nil {
		return
	}
	var in map[string]snapFileJSON
	err = json.Unmarshal(v, &in)
	closer.Close()
	if err != nil {
		t.opts.Logger.Warn("kv: the tablet's record of its snapshot files is unreadable; its next snapshot uploads them again", "dir", t.dir, "err", err)
		return
	}
	for name, f := range in {
		if !isImmutable(name) || strings.ContainsAny(name, `/\`) {
			continue
		}
		if info, err := os.Stat(filepath.Join(t.dir, dbDir, name)); err == nil && info.Size() == f.Size {
			t.snap.files[name] = snapshotFile{key: f.Key, size: f.Size, crc: f.CRC32C}
		}
	}
}
