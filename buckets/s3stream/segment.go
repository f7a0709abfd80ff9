package s3stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// WAL segments: the WAL on a store that holds segments (a local directory,
// objstore.SegmentStore).
//
// There a WAL object is not a file of its own but a record in a segment: a
// zero-filled file the node epoch's writer fills in place, so that a group
// commit costs one write and one data sync instead of a new file, two fsyncs
// and a link. A segment is named by the seq of its first record,
// wal/<node>/<epoch>/<first seq, 20 digits>.seg, and holds records
// [u32 length][WAL object] back to back, then zeros. Records have
// consecutive seqs across the epoch's segments.
//
// Fencing keeps the create-only rule on a fixed name: a node taking over
// creates wal/<node>/<epoch>/sealed before it reads the segments, and the
// writer acknowledges a record only after it is durable and the fence was
// still absent. An acknowledged record was therefore written before the
// fence existed, and the taker, reading after creating it, sees it whole.
// The taker then records what it replays as a seal object at the first seq
// it did not replay (the same object the WAL on S3 seals with), which later
// runs of the failover reuse, and which is the WAL's trim point once done.
//
// The writer writes one record at a time and rewrites a failed write in
// place, so a segment's records end at its first zero length, or at a torn
// record (a crash during the last write) followed by zeros. An undecodable
// record followed by anything but zeros is damage, not a torn write.

const (
	walSegmentSuffix = ".seg"
	walFenceName     = "sealed"
	segRecordHdr     = 4
	// DefaultWALSegmentBytes is the size of a WAL segment.
	DefaultWALSegmentBytes = 16 << 20
	// firstSegmentBytes is the size of a node epoch's first segment.
	firstSegmentBytes = 1 << 20
)

func walSegmentKey(node catalog.NodeID, epoch, first uint64) string {
	return fmt.Sprintf("%s%020d%s", walPrefix(node, epoch), first, walSegmentSuffix)
}

func walFenceKey(node catalog.NodeID, epoch uint64) string {
	return walPrefix(node, epoch) + walFenceName
}

// errSealed: the writer found its WAL's fence.
var errSealed = errors.New("WAL sealed by a node taking over")

// segmentWriter appends a node epoch's WAL records to its segments. Only
// the WAL's single upload in flight uses it.
type segmentWriter struct {
	store objstore.SegmentStore
	node  catalog.NodeID
	epoch uint64
	size  int64 // the largest segment made ahead of need
	// nextSize is the size of the next segment: the first is small, and
	// each one after doubles up to size, so that a node that writes
	// little zero-fills little.
	nextSize int64
	fence    string

	cur objstore.Segment
	off int64 // where the next record goes in cur
	// publishing is a segment whose Publish failed, kept for the retry.
	publishing objstore.Segment
	pubKey     string

	ctx  context.Context // the node's; cancelled at Close
	wg   *sync.WaitGroup
	next chan preparedSegment // the next segment, made in the background
	// preparing: a goroutine will send on next.
	preparing bool
}

type preparedSegment struct {
	seg objstore.Segment
	err error
}

func newSegmentWriter(ctx context.Context, wg *sync.WaitGroup, store objstore.SegmentStore, node catalog.NodeID, epoch uint64, size int64) *segmentWriter {
	return &segmentWriter{
		store: store, node: node, epoch: epoch, size: size, nextSize: min(size, firstSegmentBytes),
		fence: walFenceKey(node, epoch),
		ctx:   ctx, wg: wg, next: make(chan preparedSegment, 1),
	}
}

// append makes the record of WAL object seq (data) durable and returns nil
// if the WAL was not sealed once it was. errSealed means it was: the record
// may or may not be replayed. Any other error leaves the record's outcome
// unknown, and the caller calls append again with the same record.
func (w *segmentWriter) append(ctx context.Context, seq uint64, data []byte) error {
	rec := make([]byte, segRecordHdr+len(data))
	binary.LittleEndian.PutUint32(rec, uint32(len(data)))
	copy(rec[segRecordHdr:], data)
	if w.cur == nil || w.off+int64(len(rec)) > w.cur.Size() {
		if err := w.rotate(ctx, seq, int64(len(rec))); err != nil {
			return err
		}
	}
	if err := w.cur.WriteAt(rec, w.off); err != nil {
		return err
	}
	if _, err := w.store.GetRange(ctx, w.fence, 0, 0); err == nil {
		return errSealed
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("look for the WAL's fence: %w", err)
	}
	w.off += int64(len(rec))
	if w.off >= w.cur.Size()/2 {
		w.prepare() // the next segment, ready before this one is full
	}
	return nil
}

// rotate moves to a new segment whose first record is seq, of at least need
// bytes.
func (w *segmentWriter) rotate(ctx context.Context, first uint64, need int64) error {
	key := walSegmentKey(w.node, w.epoch, first)
	seg := w.publishing
	if seg == nil || w.pubKey != key {
		if seg != nil {
			seg.Close()
			w.publishing = nil
		}
		var err error
		if seg, err = w.take(ctx, need); err != nil {
			return err
		}
	}
	if err := seg.Publish(ctx, key); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			// Publishing again what an earlier attempt published is
			// success; the name is someone else's.
			seg.Close()
			w.publishing = nil
			return fmt.Errorf("WAL segment %s was created by another node: %w", key, errSealed)
		}
		w.publishing, w.pubKey = seg, key
		return fmt.Errorf("create WAL segment: %w", err)
	}
	w.publishing = nil
	if w.cur != nil {
		w.cur.Close()
	}
	w.cur, w.off = seg, 0
	return nil
}

// take returns a new segment of at least need bytes: the one made in the
// background if it is big enough.
func (w *segmentWriter) take(ctx context.Context, need int64) (objstore.Segment, error) {
	if w.preparing {
		select {
		case p := <-w.next:
			w.preparing = false
			if p.err == nil && p.seg.Size() >= need {
				return p.seg, nil
			}
			if p.seg != nil {
				p.seg.Close()
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	seg, err := w.store.NewSegment(ctx, max(w.grow(), need))
	if err != nil {
		return nil, fmt.Errorf("create WAL segment: %w", err)
	}
	return seg, nil
}

// grow returns the size of the next segment and doubles the one after.
func (w *segmentWriter) grow() int64 {
	n := w.nextSize
	w.nextSize = min(w.size, 2*n)
	return n
}

// prepare makes the next segment in the background.
func (w *segmentWriter) prepare() {
	if w.preparing {
		return
	}
	w.preparing = true
	size := w.grow()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		seg, err := w.store.NewSegment(w.ctx, size)
		w.next <- preparedSegment{seg, err}
	}()
}

// close releases the segments. The node's goroutines have stopped.
func (w *segmentWriter) close() {
	if w.preparing {
		if p := <-w.next; p.seg != nil {
			p.seg.Close()
		}
		w.preparing = false
	}
	for _, s := range []objstore.Segment{w.cur, w.publishing} {
		if s != nil {
			s.Close()
		}
	}
	w.cur, w.publishing = nil, nil
}

// walFiles is what a node epoch's WAL holds on the store.
type walFiles struct {
	segments []uint64 // first seqs, ascending
	objects  []uint64 // seqs of WAL objects (on segments: seals), ascending
	fenced   bool
}

// listWAL lists the WAL of (node, epoch).
func listWAL(ctx context.Context, store objstore.Store, node catalog.NodeID, epoch uint64) (walFiles, error) {
	var f walFiles
	prefix := walPrefix(node, epoch)
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return f, fmt.Errorf("list WAL %s: %w", prefix, err)
	}
	for _, o := range objs {
		k, ok := parseWALKey(o.Key)
		switch {
		case strings.TrimPrefix(o.Key, prefix) == walFenceName:
			f.fenced = true
		case !ok:
		case k.segment:
			f.segments = append(f.segments, k.seq)
		default:
			f.objects = append(f.objects, k.seq)
		}
	}
	slices.Sort(f.segments)
	slices.Sort(f.objects)
	return f, nil
}

// onSegments reports whether the WAL of a node epoch is kept in segments:
// the store holds segments and the WAL has no objects of an older writer
// that put one object per WAL object.
func (f walFiles) onSegments(store objstore.Store) bool {
	if _, ok := store.(objstore.SegmentStore); !ok {
		return false
	}
	return f.fenced || len(f.segments) > 0 || len(f.objects) == 0
}

// sealAndReplaySegments is sealAndReplay for a WAL in segments: fence it,
// read its records from trim, and record the seal at the first seq not
// replayed (or reuse the seal an earlier run recorded).
func sealAndReplaySegments(ctx context.Context, store objstore.Store, node catalog.NodeID, epoch, trim uint64) (replay, error) {
	if err := store.PutIfAbsent(ctx, walFenceKey(node, epoch), nil); err != nil && !errors.Is(err, objstore.ErrExists) {
		return replay{}, fmt.Errorf("fence WAL: %w", err)
	}
	files, err := listWAL(ctx, store, node, epoch)
	if err != nil {
		return replay{}, err
	}
	sealSeq := uint64(math.MaxUint64)
	if len(files.objects) > 0 {
		sealSeq = files.objects[0]
	}
	var recs []walObject
	var damage segmentDamage
	// A writer racing with the fence finishes its one write at most a
	// moment later; damage that stays after a second look is real.
	for attempt := 0; ; attempt++ {
		recs, damage, err = readSegments(ctx, store, node, epoch, files.segments, trim, sealSeq)
		if err != nil {
			return replay{}, err
		}
		if len(damage.errs) == 0 || attempt == 2 {
			break
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return replay{}, ctx.Err()
		}
	}
	if sealSeq == math.MaxUint64 {
		sealSeq = damage.next
		if damage.unreadable {
			// Records may follow the damage: replay whatever a later
			// run can read once the segment is restored.
			sealSeq = math.MaxUint64 - 1
		}
		seal := encodeWAL(walObject{Node: node, Epoch: epoch, Seq: sealSeq, Sealed: true})
		if err := putCreateOnly(ctx, store, walKey(node, epoch, sealSeq), seal); err != nil {
			return replay{}, fmt.Errorf("seal WAL at seq %d: %w", sealSeq, err)
		}
		// Another failover running at the same time may have sealed
		// lower; every run replays below the lowest seal.
		if again, err := listWAL(ctx, store, node, epoch); err != nil {
			return replay{}, err
		} else if len(again.objects) > 0 && again.objects[0] < sealSeq {
			sealSeq = again.objects[0]
		}
	}
	r := replay{entries: make(map[catalog.StreamID][]replayedEntry), sealSeq: sealSeq}
	for _, w := range recs {
		if w.Seq >= sealSeq {
			break
		}
		for _, e := range w.Entries {
			r.entries[e.Stream] = append(r.entries[e.Stream], replayedEntry{walEntry: e, seq: w.Seq})
		}
		r.replayed++
	}
	if len(damage.errs) > 0 {
		r.damaged = damage.errs
		r.lastBad = damage.lastBad
	}
	return r, nil
}

// segmentDamage is what readSegments could not read.
type segmentDamage struct {
	errs    []error // the damaged records and regions, in seq order
	lastBad uint64  // the last seq that may be in a damaged region
	// next is the seq after the last record read (or trim); it is where
	// the seal goes, unless unreadable.
	next uint64
	// unreadable: a damaged region's end could not be told, so records
	// may follow it that were not read, at seqs past next.
	unreadable bool
}

// readSegments returns the records of the WAL's segments (first seqs
// firsts) from trim and below stop, in seq order. A record that does not
// decode but whose length is sound is skipped as damaged, and reading goes
// on after it; one whose length is not, makes the rest of its segment
// unreadable.
func readSegments(ctx context.Context, store objstore.Store, node catalog.NodeID, epoch uint64, firsts []uint64, trim, stop uint64) ([]walObject, segmentDamage, error) {
	var recs []walObject
	d := segmentDamage{next: trim}
	damaged := func(seq uint64, err error) {
		d.errs = append(d.errs, err)
		d.lastBad = max(d.lastBad, seq)
	}
	expect, started := uint64(0), false
	for i, first := range firsts {
		if i+1 < len(firsts) && firsts[i+1] <= trim {
			continue // wholly below the trim point (not collected yet)
		}
		if first >= stop {
			break
		}
		key := walSegmentKey(node, epoch, first)
		if started && first != expect && !d.unreadable {
			damaged(first-1, fmt.Errorf("WAL segment %s: %w: it starts at seq %d, but the segment before ends at %d", key, ErrCorrupt, first, expect))
		}
		started, d.unreadable = true, false
		data, err := store.Get(ctx, key)
		if err != nil {
			return nil, d, fmt.Errorf("read WAL segment %s: %w", key, err)
		}
		seq := first
		for off := 0; off+segRecordHdr <= len(data); {
			n := int(binary.LittleEndian.Uint32(data[off:]))
			if n == 0 {
				break
			}
			end := off + segRecordHdr + n
			if end > len(data) {
				d.unreadable = true
				damaged(seq, fmt.Errorf("WAL segment %s: %w: the record at byte %d (seq %d) has length %d, past the segment's end", key, ErrCorrupt, off, seq, n))
				break
			}
			w, err := decodeWAL(data[off+segRecordHdr : end])
			if err == nil && (w.Node != node || w.Epoch != epoch || w.Seq != seq || w.Sealed) {
				err = fmt.Errorf("%w: header says node %d epoch %d seq %d, want seq %d", ErrCorrupt, w.Node, w.Epoch, w.Seq, seq)
			}
			switch {
			case err != nil && allZero(data[end:]):
				// A torn last write: the records end here.
				off = len(data)
				continue
			case err != nil:
				damaged(seq, fmt.Errorf("WAL segment %s: the record at byte %d (seq %d): %w", key, off, seq, err))
			case seq >= trim && seq < stop:
				recs = append(recs, w)
			}
			seq++
			off = end
		}
		expect = seq
		if seq > d.next {
			d.next = seq
		}
	}
	if d.unreadable {
		d.lastBad = math.MaxUint64 - 1
	}
	return recs, d, nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walKeyInfo is a parsed key under wal/.
type walKeyInfo struct {
	node    catalog.NodeID
	epoch   uint64
	seq     uint64 // a WAL object's seq, or a segment's first
	segment bool
}

// parseWALKey parses wal/<node>/<epoch>/<seq> and
// wal/<node>/<epoch>/<first>.seg.
func parseWALKey(key string) (walKeyInfo, bool) {
	var k walKeyInfo
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "wal" {
		return k, false
	}
	last, seg := strings.CutSuffix(parts[3], walSegmentSuffix)
	node, err1 := strconv.ParseUint(parts[1], 10, 32)
	epoch, err2 := strconv.ParseUint(parts[2], 10, 64)
	seq, err3 := strconv.ParseUint(last, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return k, false
	}
	return walKeyInfo{node: catalog.NodeID(node), epoch: epoch, seq: seq, segment: seg}, true
}
