package buckets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
)

// A primary-key bucket reopened on the node that led it last reuses the
// tablet it left in its data directory instead of restoring a snapshot
// (docs/format/kv.md, "Reusing the local tablet"). The tablet applies a
// record only once the stream has acknowledged it, so it always holds a
// prefix [0, AppliedOffset) of the durable changelog, on disk too: without
// a WAL, a crash leaves it at the applied offset of an earlier flush. What
// must be proven is that the changelog is still the one the tablet counted
// in: its History names the leader epoch it was last opened at, and the
// view must show that the stream was last opened at that same epoch — no
// other leader opened it since, so nobody else wrote to it — and is
// closed (a crashed holder's WAL recovered into it).

// priorStream is the state of a bucket's stream in the view just before
// this node opens it at a new leader epoch.
type priorStream struct {
	known bool // the view has the stream
	// epoch is the leader epoch the stream was last opened at.
	epoch uint64
	open  bool
	node  catalog.NodeID
}

// readPriorStream reads bucket id's stream from the view, if the view
// still has this node leading the bucket at leaderEpoch. Leader epochs only
// grow and a stream is opened only by its bucket's leader at the leader
// epoch (catalog's OpenStream), so once the leader epoch is leaderEpoch
// nobody can open the stream at an epoch between the one read here and
// leaderEpoch: if this node's open at leaderEpoch then succeeds, the stream
// had no holder in between.
func (m *Manager) readPriorStream(id catalog.BucketID, leaderEpoch uint64) priorStream {
	var p priorStream
	m.cfg.Meta.Read(func(v *catalog.View) {
		b, ok := v.Buckets[id]
		if !ok || b.Leader != m.cfg.Node || b.LeaderEpoch != leaderEpoch {
			return
		}
		if st, ok := v.Streams[catalog.StreamID(id)]; ok {
			p = priorStream{known: true, epoch: st.Epoch, open: st.Open, node: st.Node}
		}
	})
	return p
}

// kvDirs lists the leader epochs of bucket id's tablet directories.
func (m *Manager) kvDirs(id catalog.BucketID) ([]uint64, error) {
	entries, err := os.ReadDir(filepath.Join(m.cfg.DataDir, "kv"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var epochs []uint64
	prefix := fmt.Sprintf("%d-", id)
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok {
			if epoch, err := strconv.ParseUint(rest, 10, 64); err == nil {
				epochs = append(epochs, epoch)
			}
		}
	}
	return epochs, nil
}

// errNoLocalTablet: there is no tablet directory to reuse, which is no news
// on a node that did not lead the bucket last.
var errNoLocalTablet = errors.New("no local tablet directory")

// reuseKV opens the tablet that bucket id left in this node's data
// directory, moved to the directory of leaderEpoch, if it provably holds a
// prefix of the stream's durable changelog that can be replayed from; end
// is the stream's acknowledged end, opened at leaderEpoch. Otherwise it
// returns why not, and the caller restores from the object store.
//
// Two directories qualify: the one of leaderEpoch itself whose History is
// leaderEpoch (an earlier attempt of this open wrote it), and the one of
// the epoch the stream was last opened at, by this node, whose History is
// that epoch. A directory written by a restore that did not finish cannot
// have either: a restore writes the History of the epoch it opens at only
// once the snapshot is whole, and a snapshot's own History is of an epoch
// before the directory's.
func (m *Manager) reuseKV(id catalog.BucketID, leaderEpoch uint64, codec *kvcodec.Codec, prior priorStream, end uint64) (*kv.Tablet, error) {
	epochs, err := m.kvDirs(id)
	if err != nil {
		return nil, fmt.Errorf("list tablet directories: %w", err)
	}
	dirEpoch := uint64(0)
	for _, e := range epochs {
		if e == leaderEpoch || (e == prior.epoch && dirEpoch != leaderEpoch) {
			dirEpoch = e
		}
	}
	switch {
	case dirEpoch == 0 && len(epochs) == 0:
		return nil, errNoLocalTablet
	case dirEpoch == 0:
		return nil, fmt.Errorf("the local tablet directories are of leader epochs %v, the stream was last opened at leader epoch %d", epochs, prior.epoch)
	case dirEpoch != leaderEpoch && !prior.known:
		return nil, errors.New("the view has no stream")
	case dirEpoch != leaderEpoch && prior.open:
		return nil, fmt.Errorf("the stream is still open at leader epoch %d", prior.epoch)
	case dirEpoch != leaderEpoch && prior.node != m.cfg.Node:
		return nil, fmt.Errorf("the stream was last opened by node %d", prior.node)
	}
	dir := m.kvDir(id, leaderEpoch)
	if dirEpoch != leaderEpoch {
		if err := os.Rename(m.kvDir(id, dirEpoch), dir); err != nil {
			return nil, fmt.Errorf("move the tablet directory of leader epoch %d: %w", dirEpoch, err)
		}
	}
	t, err := kv.Open(dir, kv.Options{Cache: m.kvCache, Logger: m.cfg.Logger})
	if err != nil {
		return nil, err
	}
	h, ok, err := t.History()
	if err == nil && !ok {
		err = errors.New("the tablet records no history")
	}
	if err == nil {
		// The start now, not prior's: a retry must not reuse a tablet whose
		// replay a trim has made impossible since.
		err = checkHistory(h, id, dirEpoch, codec, t.AppliedOffset(), changelogStart(m.cfg.Meta, id), end)
	}
	if err == nil {
		err = t.CheckFiles()
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// checkHistory checks the History of a tablet found in bucket id's
// directory of dirEpoch, at applied offset applied, against the stream:
// offsets [start, end) of it are readable.
func checkHistory(h kv.History, id catalog.BucketID, dirEpoch uint64, codec *kvcodec.Codec, applied, start, end uint64) error {
	switch {
	case h.Bucket != id:
		return fmt.Errorf("the tablet is of bucket %d", h.Bucket)
	case h.LeaderEpoch != dirEpoch:
		return fmt.Errorf("the tablet was last opened at leader epoch %d, its directory is of leader epoch %d", h.LeaderEpoch, dirEpoch)
	case h.Columns > codec.NumColumns():
		return fmt.Errorf("the tablet was written with %d columns, the table has %d", h.Columns, codec.NumColumns())
	case applied > end:
		return fmt.Errorf("the tablet is at offset %d, past the changelog's end %d", applied, end)
	case applied < start:
		return fmt.Errorf("the tablet is at offset %d, below the changelog's start %d (trimmed)", applied, start)
	}
	return nil
}

// sweepKVDirs removes the tablet directories of buckets this node does not
// lead (they moved, or were dropped, while it was down): only the leader
// reuses a tablet. Called once, before the sync task opens anything.
func (m *Manager) sweepKVDirs() {
	root := filepath.Join(m.cfg.DataDir, "kv")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	var stale []string
	m.cfg.Meta.Read(func(v *catalog.View) {
		for _, e := range entries {
			idText, _, _ := strings.Cut(e.Name(), "-")
			id, err := strconv.ParseUint(idText, 10, 64)
			if err != nil {
				continue
			}
			if b, ok := v.Buckets[catalog.BucketID(id)]; !ok || b.Leader != m.cfg.Node {
				stale = append(stale, e.Name())
			}
		}
	})
	for _, name := range stale {
		if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
			m.cfg.Logger.Warn("removing a stale KV tablet directory failed", "dir", name, "err", err)
		}
	}
}
