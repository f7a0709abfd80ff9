package kv

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cockroachdb/pebble/v2"

	"github.com/minkdb/mink/kv/kvcodec"
)

// LoadRows writes rows (in the codec's schema, one per key) into a tablet
// that has applied nothing yet, as part of a base state loaded from
// somewhere other than a snapshot or the changelog: the lake, whose files
// hold a tiered primary-key bucket's rows at its tiered offset. The applied
// offset stays 0 until FinishLoad sets it; a tablet whose load was
// interrupted holds partial state at offset 0 and must be discarded (the
// buckets package rebuilds a tablet's directory at every open).
func (t *Tablet) LoadRows(c *kvcodec.Codec, rec arrow.RecordBatch) error {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	if a := t.applied.Load(); a != 0 {
		return fmt.Errorf("kv: load rows into a tablet that has applied up to offset %d", a)
	}
	b := t.db.NewBatch()
	defer b.Close()
	var key, row, buf []byte
	for i := range int(rec.NumRows()) {
		var err error
		if key, err = c.AppendKey(key[:0], rec, i); err != nil {
			return fmt.Errorf("kv: load row %d: %w", i, err)
		}
		if row, err = c.AppendRow(row[:0], rec, i); err != nil {
			return fmt.Errorf("kv: load row %d: %w", i, err)
		}
		buf = rowKey(buf, key)
		if err := b.Set(buf, row, nil); err != nil {
			return fmt.Errorf("kv: load: %w", err)
		}
	}
	if err := t.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("kv: load: %w", err)
	}
	return nil
}

// FinishLoad ends a load (LoadRows): the tablet now holds the state at
// changelog offset at, and replay continues from there.
func (t *Tablet) FinishLoad(at uint64) error {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	if a := t.applied.Load(); a != 0 {
		return fmt.Errorf("kv: finish a load at offset %d on a tablet that has applied up to offset %d", at, a)
	}
	var off [8]byte
	binary.BigEndian.PutUint64(off[:], at)
	if err := t.db.Set(metaApplied, off[:], pebble.NoSync); err != nil {
		return fmt.Errorf("kv: finish load: %w", err)
	}
	t.applied.Store(at)
	return nil
}
