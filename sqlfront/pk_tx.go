package sqlfront

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Primary-key writes in a transaction block (docs/sql.md, "Transactions").
//
// Inside a block, every statement reaches a primary-key bucket through a
// txBucket: the block's own writes overlaid on the bucket's acknowledged
// state. A write is checked (23505 for a duplicate key, ON CONFLICT,
// UPDATE and DELETE conditions) at the statement, against the committed
// state plus the block's earlier writes, and only changes the overlay;
// reads (SELECT, the scans of UPDATE and DELETE, ON CONFLICT's lookups)
// see the overlay. COMMIT writes each bucket's net change in one atomic
// bucket write, conditional on the rows the block read being unchanged.

// txBucket is a primary-key bucket as a transaction block sees it.
type txBucket struct {
	base kvBucket
	id   catalog.BucketID

	mu sync.Mutex
	// overlay is the block's current row of each key it wrote; nil: the
	// block deleted it.
	overlay map[string][]byte
	// read is the acknowledged row of each key the block wrote, when it
	// first wrote it (nil: absent).
	read map[string][]byte
	// inserted marks keys the block created with a plain INSERT over an
	// absent key: COMMIT inserts them (23505 if another session did first).
	inserted map[string]bool
	// order is the keys in the order the block first wrote them.
	order []string
}

var _ kvBucket = (*txBucket)(nil)

func (t *txBucket) Codec() *kvcodec.Codec { return t.base.Codec() }

func (t *txBucket) Changelog(ctx context.Context) ([]buckets.Batch, error) {
	return t.base.Changelog(ctx)
}

// Get returns the key's row with the block's writes applied.
func (t *txBucket) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	t.mu.Lock()
	row, ok := t.overlay[string(key)]
	t.mu.Unlock()
	if ok {
		return row, row != nil, nil
	}
	return t.base.Get(ctx, key)
}

// Scan returns the bucket's rows with the block's writes applied: the
// acknowledged rows the block did not write, then the block's rows.
func (t *txBucket) Scan(ctx context.Context) ([]arrow.RecordBatch, error) {
	got, err := t.base.Scan(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.overlay) == 0 {
		return got, nil
	}
	codec := t.base.Codec()
	var out []arrow.RecordBatch
	var key []byte
	for _, b := range got {
		keep := make([]bool, b.NumRows())
		all := true
		for i := range int(b.NumRows()) {
			if key, err = codec.AppendKey(key[:0], b, i); err != nil {
				releaseAll(got)
				releaseAll(out)
				return nil, err
			}
			_, written := t.overlay[string(key)]
			keep[i] = !written
			all = all && keep[i]
		}
		if all {
			out = append(out, b)
			continue
		}
		// Runs of kept rows, as slices.
		for i := 0; i < len(keep); {
			if !keep[i] {
				i++
				continue
			}
			j := i
			for j < len(keep) && keep[j] {
				j++
			}
			out = append(out, b.NewSlice(int64(i), int64(j)))
			i = j
		}
		b.Release()
	}
	var rows [][]byte
	for _, k := range t.order {
		if row := t.overlay[k]; row != nil {
			rows = append(rows, row)
		}
	}
	if len(rows) > 0 {
		rec, err := codec.DecodeRows(memory.DefaultAllocator, rows)
		if err != nil {
			releaseAll(out)
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// overlayReader reads the overlay, then the acknowledged state, recording
// the acknowledged row of every key a write touches.
type overlayReader struct {
	ctx context.Context
	t   *txBucket
}

func (r overlayReader) Get(key []byte) ([]byte, bool, error) {
	if row, ok := r.t.overlay[string(key)]; ok {
		return row, row != nil, nil
	}
	if row, ok := r.t.read[string(key)]; ok {
		return row, row != nil, nil
	}
	row, ok, err := r.t.base.Get(r.ctx, key)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		row = nil
	}
	r.t.read[string(key)] = bytes.Clone(row)
	return row, ok, nil
}

// Write applies writes to the overlay as one atomic batch, with the
// errors and change records a bucket write would give.
func (t *txBucket) Write(ctx context.Context, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	records, err := kv.ChangesWith(t.base.Codec(), overlayReader{ctx: ctx, t: t}, writes)
	if err != nil {
		return nil, 0, err
	}
	for _, rec := range records {
		if rec.Type == kvcodec.UpdateBefore {
			continue // its UpdateAfter follows
		}
		k := string(rec.Key)
		if _, ok := t.overlay[k]; !ok {
			t.order = append(t.order, k)
			if w := writes[rec.Write]; rec.Type == kvcodec.Insert && w.Op == kvcodec.OpInsert && !w.CheckRow && t.read[k] == nil {
				t.inserted[k] = true
			}
		}
		switch rec.Type {
		case kvcodec.Insert, kvcodec.UpdateAfter:
			t.overlay[k] = bytes.Clone(rec.Row)
		case kvcodec.Delete:
			t.overlay[k] = nil
		}
	}
	return records, 0, nil
}

// commitWrites are the bucket's net writes for COMMIT: each key the block
// wrote, conditional on its acknowledged row being the one the block read.
func (t *txBucket) commitWrites() []kvcodec.Write {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []kvcodec.Write
	for _, k := range t.order {
		row, read := t.overlay[k], t.read[k]
		switch {
		case row == nil && read == nil:
			// Inserted and deleted again by the block.
		case t.inserted[k] && row != nil:
			out = append(out, kvcodec.Write{Op: kvcodec.OpInsert, Key: []byte(k), Row: row})
		case row == nil:
			out = append(out, kvcodec.Write{Op: kvcodec.OpDelete, Key: []byte(k), CheckRow: true, IfRow: read})
		case bytes.Equal(row, read):
			// Changed back to the row read: nothing to write, but the
			// row must still be the one read.
			out = append(out, kvcodec.Write{Op: kvcodec.OpUpdate, Key: []byte(k), Row: row, CheckRow: true, IfRow: read})
		default:
			out = append(out, kvcodec.Write{Op: kvcodec.OpUpsert, Key: []byte(k), Row: row, CheckRow: true, IfRow: read})
		}
	}
	return out
}

// txKV is a block's txBuckets and the tables they belong to.
type txKV struct {
	mu      sync.Mutex
	buckets map[catalog.BucketID]*txBucket
	tables  map[catalog.BucketID]*tableInfo
}

// kvBucket returns the primary-key bucket id as the session sees it: the
// acknowledged state, or inside a transaction block the state with the
// block's writes applied.
func (s *session) kvBucket(ctx context.Context, id catalog.BucketID, table *tableInfo) (kvBucket, error) {
	if s.tx.status != pgwire.TxInBlock {
		return s.f.kvBucket(ctx, id)
	}
	s.tx.kv.mu.Lock()
	t := s.tx.kv.buckets[id]
	s.tx.kv.mu.Unlock()
	if t != nil {
		return t, nil
	}
	base, err := s.f.kvBucket(ctx, id)
	if err != nil {
		return nil, err
	}
	s.tx.kv.mu.Lock()
	defer s.tx.kv.mu.Unlock()
	if t := s.tx.kv.buckets[id]; t != nil {
		return t, nil
	}
	if s.tx.kv.buckets == nil {
		s.tx.kv.buckets = map[catalog.BucketID]*txBucket{}
		s.tx.kv.tables = map[catalog.BucketID]*tableInfo{}
	}
	t = &txBucket{base: base, id: id, overlay: map[string][]byte{}, read: map[string][]byte{}, inserted: map[string]bool{}}
	s.tx.kv.buckets[id] = t
	s.tx.kv.tables[id] = table
	return t, nil
}

// writePK inserts rows into a primary-key table (inside a block, into
// the block's overlay). It returns the rows written (for RETURNING;
// release it) and their count.
func (s *session) writePK(ctx context.Context, table *tableInfo, batches []arrow.RecordBatch, plan *conflictPlan, args []any) (arrow.RecordBatch, int64, error) {
	return s.insertPK(ctx, table, batches, plan, args)
}

// commitPK applies a committed block's primary-key writes: each bucket's
// net writes in one atomic bucket write, buckets in id order. A row the
// block read and another session changed since fails the COMMIT with
// 40001; a key the block inserted that another session inserted first,
// with 23505. Buckets written before the failing one stay written.
func (s *session) commitPK(ctx context.Context, kvs map[catalog.BucketID]*txBucket, tables map[catalog.BucketID]*tableInfo) error {
	ids := make([]catalog.BucketID, 0, len(kvs))
	for id := range kvs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		t := kvs[id]
		writes := t.commitWrites()
		if len(writes) == 0 {
			continue
		}
		table := tables[id]
		_, _, err := t.base.Write(ctx, writes)
		var ce *kv.ConflictError
		if errors.As(err, &ce) {
			return &pgwire.Error{Code: pgwire.CodeSerializationFailure, Message: "could not serialize access due to concurrent update",
				Detail: fmt.Sprintf("A row of %q that this transaction read or wrote was changed by another session before COMMIT.", table.name),
				Hint:   "Retry the transaction."}
		}
		var de *kv.DuplicateKeyError
		if errors.As(err, &de) {
			return duplicateKeyRow(table, t.base.Codec(), writes[de.Write].Row, s.sessionLocation())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// duplicateKeyRow is duplicateKey for an encoded row.
func duplicateKeyRow(table *tableInfo, codec *kvcodec.Codec, row []byte, loc *time.Location) error {
	rec, err := codec.DecodeRows(memory.DefaultAllocator, [][]byte{row})
	if err != nil {
		return err
	}
	defer rec.Release()
	return duplicateKey(table, rec, 0, loc)
}
