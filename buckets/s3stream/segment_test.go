package s3stream

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// segmentFiles lists the WAL segments of (node, epoch) as file paths.
func segmentFiles(t *testing.T, h *harness, node catalog.NodeID, epoch uint64) []string {
	t.Helper()
	f, err := listWAL(context.Background(), h.store, node, epoch)
	if err != nil {
		t.Fatal(err)
	}
	root := h.store.Inner().(*objstore.Dir).Root()
	var out []string
	for _, first := range f.segments {
		out = append(out, filepath.Join(root, walSegmentKey(node, epoch, first)))
	}
	return out
}

// recoverAfterCrash starts node 2, fences node 1's epoch and fails it over.
func recoverAfterCrash(t *testing.T, h *harness, epoch uint64) (*testNode, error) {
	t.Helper()
	b := h.start(2)
	h.register(b.meta, 1)
	h.waitCatchUp(b.meta)
	_, err := Failover(context.Background(), h.store, b.meta, 1, epoch, failoverBy(b.meta, 2))
	return b, err
}

// On a local directory the WAL is kept in segments: acknowledged appends
// spread over several segments survive a crash, the failover seals the WAL
// with its fence and a seal object, and garbage collection then removes
// every segment but keeps both.
func TestSegmentWALCrashRecovery(t *testing.T) {
	h := newSegmentHarness(t)
	a := h.start(1, func(c *Config) { c.WALSegmentBytes = 1024 })
	s := mustOpen(t, a, sid, 1)
	var want []uint64
	for id := uint64(1); id <= 60; id++ {
		mustAppend(t, s, id)
		want = append(want, id)
	}
	segs := segmentFiles(t, h, 1, a.cfg.NodeEpoch)
	if len(segs) < 3 {
		t.Fatalf("60 appends in 1 KiB segments made %d segments, want several", len(segs))
	}
	a.Close() // crash: nothing was flushed to stream objects

	b, err := recoverAfterCrash(t, h, a.cfg.NodeEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, h.store, b.meta, sid); !slices.Equal(got, want) {
		t.Fatalf("after failover the stream holds %v, want 1..60", got)
	}
	if _, err := NewCollector(h.store, b.meta, 0).Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	left, err := h.store.List(context.Background(), walPrefix(1, a.cfg.NodeEpoch))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range left {
		keys = append(keys, strings.TrimPrefix(o.Key, walPrefix(1, a.cfg.NodeEpoch)))
	}
	if len(keys) != 2 || keys[0] != "00000000000000000060" || keys[1] != walFenceName {
		t.Fatalf("after GC the sealed WAL holds %v, want the seal at seq 60 and the fence", keys)
	}
	// A failover run again changes nothing.
	if _, err := Failover(context.Background(), h.store, b.meta, 1, a.cfg.NodeEpoch, failoverBy(b.meta, 2)); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, h.store, b.meta, sid); !slices.Equal(got, want) {
		t.Fatalf("after a second failover the stream holds %v", got)
	}
}

// A crash during the last write leaves a torn record followed by zeros: the
// records end there and the failover recovers everything before it. Bytes
// that do not decode with data after them are damage: the stream stays open
// and the failover says which segment.
func TestSegmentTornAndDamaged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damaged bool
	}{{"torn last write", false}, {"damaged middle", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSegmentHarness(t)
			a := h.start(1)
			s := mustOpen(t, a, sid, 1)
			for id := uint64(1); id <= 10; id++ {
				mustAppend(t, s, id)
			}
			a.Close()
			segs := segmentFiles(t, h, 1, a.cfg.NodeEpoch)
			if len(segs) != 1 {
				t.Fatalf("%d segments, want 1", len(segs))
			}
			data, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			// Find the end of the records and the start of the fifth.
			off, fifth := 0, 0
			for i := 0; ; i++ {
				n := int(binary.LittleEndian.Uint32(data[off:]))
				if n == 0 {
					break
				}
				if i == 4 {
					fifth = off
				}
				off += segRecordHdr + n
			}
			f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
			if tc.damaged {
				// A flipped bit in the fifth record's payload.
				_, err = f.WriteAt([]byte{data[fifth+segRecordHdr+walHeader+walEntryHdr] ^ 1}, int64(fifth+segRecordHdr+walHeader+walEntryHdr))
			} else {
				// The first half of an eleventh record.
				torn := binary.LittleEndian.AppendUint32(nil, uint32(fifth-0)) // a length
				torn = append(torn, data[segRecordHdr:segRecordHdr+20]...)
				_, err = f.WriteAt(torn, int64(off))
			}
			f.Close()
			if err != nil {
				t.Fatal(err)
			}

			b, err := recoverAfterCrash(t, h, a.cfg.NodeEpoch)
			if tc.damaged {
				var wc *WALCorruptError
				if !errors.As(err, &wc) || !strings.Contains(err.Error(), walSegmentKey(1, a.cfg.NodeEpoch, 0)) || wc.Streams[sid] == nil {
					t.Fatalf("failover over a damaged record: %v, want a WALCorruptError naming the segment and leaving stream %d open", err, sid)
				}
				var open bool
				b.meta.Read(func(v *catalog.View) { open = v.Streams[sid].Open })
				if !open {
					t.Fatal("the stream was closed without the records after the damage")
				}
				return
			}
			if err != nil {
				t.Fatalf("failover after a torn last write: %v", err)
			}
			if got := readAll(t, h.store, b.meta, sid); !slices.Equal(got, want) {
				t.Fatalf("after a torn last write the stream holds %v, want %v", got, want)
			}
		})
	}
}

// A writer paused around its write while another node takes its WAL over:
// a record written before the fence is replayed (the append is not
// acknowledged, its outcome unknown); one written after it is not. Either
// way the writer is fenced and acknowledges nothing after the fence.
func TestSegmentFenceRace(t *testing.T) {
	for _, pauseAfter := range []bool{false, true} {
		name := map[bool]string{false: "paused before its write", true: "paused after its write"}[pauseAfter]
		t.Run(name, func(t *testing.T) {
			h := newSegmentHarness(t)
			a := h.start(1)
			s := mustOpen(t, a, sid, 1)
			mustAppend(t, s, 1)
			mustAppend(t, s, 2)

			paused, resume := make(chan struct{}), make(chan struct{})
			hook := func(ctx context.Context, op objstore.Op, key string, err error) error {
				if op == objstore.OpWrite {
					close(paused)
					<-resume
				}
				return err
			}
			if pauseAfter {
				h.store.SetHooks(objstore.Hooks{After: hook})
			} else {
				h.store.SetHooks(objstore.Hooks{Before: func(ctx context.Context, op objstore.Op, key string) error { return hook(ctx, op, key, nil) }})
			}
			res := make(chan error, 1)
			go func() {
				_, err := s.Append(context.Background(), payload(3), 1)
				res <- err
			}()
			<-paused
			h.store.SetHooks(objstore.Hooks{})

			b, err := recoverAfterCrash(t, h, a.cfg.NodeEpoch)
			if err != nil {
				t.Fatal(err)
			}
			close(resume)
			if err := <-res; !errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("the paused append returned %v, want ErrUnknownOutcome", err)
			}
			if _, err := s.Append(context.Background(), payload(4), 1); !errors.Is(err, ErrFenced) {
				t.Fatalf("an append after the takeover returned %v, want ErrFenced", err)
			}
			want := []uint64{1, 2}
			if pauseAfter {
				want = append(want, 3)
			}
			if got := readAll(t, h.store, b.meta, sid); !slices.Equal(got, want) {
				t.Fatalf("the stream holds %v, want %v", got, want)
			}
		})
	}
}

// A segment write that fails, or whose success is not reported, is written
// again in place: the append is told its outcome is unknown, as for a WAL
// object put, and the record is read once. While segments cannot be made (a
// full disk), appends wait and fail; once they can, appends are
// acknowledged again.
func TestSegmentWriteFaults(t *testing.T) {
	h := newSegmentHarness(t)
	a := h.start(1, func(c *Config) { c.WALSegmentBytes = 512 })
	s := mustOpen(t, a, sid, 1)
	mustAppend(t, s, 1)
	appendUnknown := func(id uint64) {
		t.Helper()
		if _, err := s.Append(context.Background(), payload(id), 1); err != nil && !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("append %d: %v, want success or ErrUnknownOutcome", id, err)
		}
	}
	if st := a.WALStats(); st.Writes != 1 || st.Entries != 1 || st.Bytes == 0 || st.Failures != 0 || st.Latency[len(st.Latency)-1] != 0 {
		t.Fatalf("WAL stats after one append: %+v, want one durable write of one entry", st)
	}
	remove := h.store.Inject(objstore.Rule{Ops: objstore.OpWrite, Times: 1, Err: errors.New("EIO")})
	appendUnknown(2)
	remove()
	// The append was told its outcome is unknown at the failure; the retry
	// goes on behind it.
	for deadline := time.Now().Add(10 * time.Second); a.WALStats().Writes < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if st := a.WALStats(); st.Failures != 1 || st.Writes != 2 || st.Entries != 2 {
		t.Fatalf("WAL stats after a write that failed once and was retried: %+v, want 1 failure, 2 writes of 2 entries", st)
	}
	remove = h.store.Inject(objstore.Rule{Ops: objstore.OpWrite, Times: 1, LoseResponse: true})
	appendUnknown(3)
	remove()
	remove = h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Err: errors.New("ENOSPC")})
	for id := uint64(4); id <= 12; id++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := s.Append(ctx, payload(id), 1)
		cancel()
		if err == nil {
			continue // fitted in the segment still open
		}
		if !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("append %d while no segment can be made: %v", id, err)
		}
	}
	remove()
	for id := uint64(13); id <= 14; id++ {
		mustAppend(t, s, id)
	}
	a.Close()
	b, err := recoverAfterCrash(t, h, a.cfg.NodeEpoch)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, h.store, b.meta, sid)
	if len(got) < 5 || !slices.Equal(got[:3], []uint64{1, 2, 3}) || !slices.Equal(got[len(got)-2:], []uint64{13, 14}) {
		t.Fatalf("the stream holds %v, want 1, 2, 3, then what the full disk let through, then 13, 14", got)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("the stream holds %v, out of order", got)
	}
	if n := len(slices.Compact(slices.Clone(got))); n != len(got) {
		t.Fatalf("a record twice in %v", got)
	}
}

// A damaged record whose length is sound is skipped, and the records after
// it are read: a stream with entries after it is recovered (its gap check
// shows whether the damaged record held any of its writes), one without is
// left open, and once the segment is restored a failover recovers it too.
func TestSegmentDamagedRecordSkipped(t *testing.T) {
	h := newSegmentHarness(t)
	a := h.start(1)
	sa, sb := mustOpen(t, a, sid, 1), mustOpen(t, a, sid+1, 1)
	for id := uint64(1); id <= 3; id++ {
		mustAppend(t, sa, id)
	}
	for id := uint64(101); id <= 103; id++ {
		mustAppend(t, sb, id)
	}
	a.Close()
	segs := segmentFiles(t, h, 1, a.cfg.NodeEpoch)
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The third record (seq 2) holds stream sid's record 3.
	off := 0
	for range 2 {
		off += segRecordHdr + int(binary.LittleEndian.Uint32(data[off:]))
	}
	at := off + segRecordHdr + walHeader + walEntryHdr
	bad := slices.Clone(data)
	bad[at] ^= 1
	if err := os.WriteFile(segs[0], bad, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := recoverAfterCrash(t, h, a.cfg.NodeEpoch)
	var wc *WALCorruptError
	if !errors.As(err, &wc) || wc.Streams[sid] == nil || wc.Streams[sid+1] != nil {
		t.Fatalf("failover over a damaged record of stream %d: %v, want a WALCorruptError leaving only it open", sid, err)
	}
	if got := readAll(t, h.store, b.meta, sid+1); !slices.Equal(got, []uint64{101, 102, 103}) {
		t.Fatalf("stream %d after the failover: %v, want 101..103", sid+1, got)
	}
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Failover(context.Background(), h.store, b.meta, 1, a.cfg.NodeEpoch, failoverBy(b.meta, 2)); err != nil {
		t.Fatalf("failover once the segment is restored: %v", err)
	}
	if got := readAll(t, h.store, b.meta, sid); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("stream %d once the segment is restored: %v, want 1..3", sid, got)
	}
}
