package buckets

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// oldPayload is an entry as mink wrote it before the entry header: the
// IPC stream alone, the append time and producer mark (if any) in the
// schema's metadata.
func oldPayload(t *testing.T, rec arrow.RecordBatch, appendMs int64, mark ProducerMark) []byte {
	t.Helper()
	keys := []string{metaAppendTime}
	vals := []string{strconv.FormatInt(appendMs, 10)}
	if mark.ID != 0 {
		keys = append(keys, metaProducerID, metaProducerEpoch, metaProducerSequence)
		vals = append(vals, strconv.FormatInt(mark.ID, 10), strconv.Itoa(int(mark.Epoch)), strconv.Itoa(int(mark.Sequence)))
	}
	md := arrow.NewMetadata(keys, vals)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(arrow.NewSchema(rec.Schema().Fields(), &md)))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A bucket reads entries of both formats, before and after they are
// flushed to stream objects, with their rows, append times and producer
// marks; a new entry whose batch is damaged is ErrCorrupt.
func TestLogEntryFormats(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	self := func(catalog.NodeID) bool { return true }
	m, cat := env.startNode(1, self)
	ctx := context.Background()
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b := waitBucket(t, m, id)

	old := time.UnixMilli(1_700_000_000_123).UTC()
	oldMark := ProducerMark{ID: 77, Epoch: 3, Sequence: 41}
	newMark := ProducerMark{ID: 1 << 40, Epoch: -2, Sequence: 1 << 30}
	appendRaw := func(payload []byte, rows uint32) {
		t.Helper()
		if _, err := b.stream.Append(ctx, payload, rows); err != nil {
			t.Fatal(err)
		}
	}
	rec := rowsRecord(1, 2)
	appendRaw(oldPayload(t, rec, old.UnixMilli(), ProducerMark{}), 2)
	rec.Release()
	rec = rowsRecord(3)
	appendRaw(oldPayload(t, rec, old.UnixMilli(), oldMark), 1)
	rec.Release()
	before := time.Now().Truncate(time.Millisecond)
	rec = rowsRecord(4, 5, 6)
	if _, err := b.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	rec = rowsRecord(7)
	p, err := b.AppendProduced(ctx, rec, newMark)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	check := func(when string) {
		t.Helper()
		batches, err := b.Read(ctx, 0, b.End())
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer ReleaseBatches(batches)
		var ids []int64
		for _, bt := range batches {
			if bt.Record.Schema().HasMetadata() {
				t.Errorf("%s: batch at %d has schema metadata %v", when, bt.Offset, bt.Record.Schema().Metadata())
			}
			ids = append(ids, bt.Record.Column(0).(*array.Int64).Int64Values()...)
		}
		if want := []int64{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(ids, want) || len(batches) != 4 {
			t.Fatalf("%s: %d batches of ids %v, want 4 of %v", when, len(batches), ids, want)
		}
		for i, want := range []ProducerMark{{}, oldMark, {}, newMark} {
			if batches[i].Producer != want {
				t.Errorf("%s: batch %d producer %+v, want %+v", when, i, batches[i].Producer, want)
			}
		}
		for i := range 2 {
			if !batches[i].AppendTime.Equal(old) {
				t.Errorf("%s: old batch %d appended at %v, want %v", when, i, batches[i].AppendTime, old)
			}
		}
		for i := 2; i < 4; i++ {
			if at := batches[i].AppendTime; at.Before(before) || at.After(after) {
				t.Errorf("%s: new batch %d appended at %v, not within [%v, %v]", when, i, at, before, after)
			}
		}
	}
	check("in the WAL")
	if err := b.stream.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m.batches.clear()
	check("in stream objects")

	// A new entry whose batch is damaged.
	rec = rowsRecord(8)
	payload, err := encodeBatch(rec, ProducerMark{})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeBatch(payload[:len(payload)-20]); !errors.Is(err, s3stream.ErrCorrupt) {
		t.Fatalf("truncated entry: %v, want ErrCorrupt", err)
	}
}
