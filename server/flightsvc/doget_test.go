package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets"
)

// fakeBucket serves batches of a given number of rows each from offset 0,
// as a readFunc, counting the references it hands out.
type fakeBucket struct {
	sizes  []int64
	failAt uint64 // a read from this offset fails (0: none)

	mu   sync.Mutex
	live int // records handed out and not released
}

type countedRecord struct {
	arrow.RecordBatch
	b *fakeBucket
}

func (r countedRecord) Release() {
	r.b.mu.Lock()
	r.b.live--
	r.b.mu.Unlock()
	r.RecordBatch.Release()
}

func (f *fakeBucket) read(ctx context.Context, from, to uint64) ([]buckets.Batch, error) {
	if f.failAt != 0 && from == f.failAt {
		return nil, errors.New("object store down")
	}
	var out []buckets.Batch
	var off uint64
	for _, n := range f.sizes {
		if off+uint64(n) > from && off < to {
			f.mu.Lock()
			f.live++
			f.mu.Unlock()
			rec := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, n)
			out = append(out, buckets.Batch{Offset: off, Record: countedRecord{rec, f}})
		}
		off += uint64(n)
	}
	return out, nil
}

// TestSendChunks: every batch of [from, end) is sent once, in offset
// order, while the chunks after the first are read ahead; a failing read,
// or a failing send with a read ahead in flight, ends it with an error,
// and every batch read is released.
func TestSendChunks(t *testing.T) {
	sizes := []int64{700_000, 700_000, 300_000, 900_000, 500_000, 1}
	var total uint64
	for _, n := range sizes {
		total += uint64(n)
	}
	for _, tc := range []struct {
		name       string
		from, end  uint64
		failAt     uint64
		failSendAt uint64
		wantSent   []uint64 // batch offsets
		wantCode   codes.Code
	}{
		{name: "all", from: 0, end: total, wantSent: []uint64{0, 700_000, 1_400_000, 1_700_000, 2_600_000, 3_100_000}},
		{name: "from inside a batch", from: 800_000, end: 2_000_000, wantSent: []uint64{700_000, 1_400_000, 1_700_000}},
		{name: "empty", from: 5, end: 5},
		{name: "read fails", from: 0, end: total, failAt: 1_400_000, wantSent: []uint64{0, 700_000}, wantCode: codes.Internal},
		{name: "send fails", from: 0, end: total, failSendAt: 700_000, wantSent: []uint64{0, 700_000}, wantCode: codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBucket{sizes: sizes, failAt: tc.failAt}
			var sent []uint64
			err := sendChunks(context.Background(), 7, f.read, tc.from, tc.end, func(b buckets.Batch, from uint64) error {
				if b.Offset+uint64(b.Record.NumRows()) <= from {
					t.Errorf("batch at %d sent for a chunk from %d", b.Offset, from)
				}
				sent = append(sent, b.Offset)
				if tc.failSendAt != 0 && b.Offset == tc.failSendAt {
					return errors.New("client gone")
				}
				return nil
			})
			if fmt.Sprint(sent) != fmt.Sprint(tc.wantSent) {
				t.Errorf("sent batches at %v, want %v", sent, tc.wantSent)
			}
			if tc.wantCode == codes.OK && err != nil || tc.wantCode != codes.OK && (err == nil || status.Code(err) != tc.wantCode) {
				t.Errorf("err %v, want code %v", err, tc.wantCode)
			}
			if f.live != 0 {
				t.Errorf("%d batches not released", f.live)
			}
		})
	}
}
