package kv

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/minkdb/mink/kv/kvcodec"
)

// ErrDuplicateKey is wrapped by *DuplicateKeyError.
var ErrDuplicateKey = errors.New("duplicate key value violates unique constraint")

// DuplicateKeyError is returned by Changes when an OpInsert finds its key
// present (in the tablet, or written earlier in the same batch). It maps to
// SQLSTATE 23505.
type DuplicateKeyError struct {
	// Write is the index of the failing write in the batch.
	Write int
	// Key is its encoded key.
	Key []byte
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("%v: write %d, key %x already exists", ErrDuplicateKey, e.Write, e.Key)
}

func (e *DuplicateKeyError) Unwrap() error { return ErrDuplicateKey }

// ErrConflict is wrapped by *ConflictError.
var ErrConflict = errors.New("the row changed since it was read")

// ConflictError is returned by Changes when a conditional write (CheckRow)
// finds a row other than the one it expects.
type ConflictError struct {
	// Write is the index of the failing write in the batch.
	Write int
	// Key is its encoded key.
	Key []byte
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: write %d, key %x", ErrConflict, e.Write, e.Key)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// RowReader reads the current row of a key. *Tablet, *Reader and *Pending
// implement it.
type RowReader interface {
	// Get returns the row of key and true, or false if there is none. The
	// returned slice is the caller's.
	Get(key []byte) (row []byte, ok bool, err error)
}

// Changes turns a batch of writes into changelog records by reading the
// current row of each key from r. Writes to one key take effect in batch
// order: a later write sees the row an earlier one left. The batch is
// atomic: on error (a duplicate key, a conflict, a read error) no records
// are returned.
//
// Changes does not modify r. The records become the bucket's state only
// once they are appended to its stream and applied (Tablet.Apply).
//
// A conditional write (CheckRow) compares rows bytewise, which is right
// only while every row of the table has one encoding; ChangesWith compares
// them as a codec reads them.
func Changes(r RowReader, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, error) {
	return ChangesWith(nil, r, writes)
}

// ChangesWith is Changes with conditional writes (CheckRow) comparing the
// current row and IfRow as c reads them (Codec.EqualRows): a row stored
// before columns were added matches the same row re-encoded with the
// columns' missing values. A nil c compares bytewise. A row c cannot read
// fails the batch (kv.ErrBadRow, kv.ErrNewerColumns).
func ChangesWith(c *kvcodec.Codec, r RowReader, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, error) {
	// batch holds the rows written earlier in this batch: nil means deleted.
	var batch map[string][]byte
	if len(writes) > 1 {
		batch = make(map[string][]byte, len(writes))
	}
	current := func(key []byte) ([]byte, bool, error) {
		if row, ok := batch[string(key)]; ok {
			return row, row != nil, nil
		}
		return r.Get(key)
	}
	records := make([]kvcodec.ChangeRecord, 0, len(writes))
	for i, w := range writes {
		if w.Op != kvcodec.OpDelete && w.Row == nil {
			return nil, fmt.Errorf("kv: write %d (%s) has no row", i, w.Op)
		}
		old, exists, err := current(w.Key)
		if err != nil {
			return nil, fmt.Errorf("kv: write %d: read key %x: %w", i, w.Key, err)
		}
		if w.CheckRow {
			same := exists == (w.IfRow != nil)
			if same && exists {
				if c == nil {
					same = bytes.Equal(old, w.IfRow)
				} else if same, err = c.EqualRows(old, w.IfRow); err != nil {
					return nil, fmt.Errorf("kv: write %d: compare the row of key %x: %w", i, w.Key, err)
				}
			}
			if !same {
				return nil, &ConflictError{Write: i, Key: bytes.Clone(w.Key)}
			}
		}
		var after []byte // the row after this write; nil: deleted
		switch w.Op {
		case kvcodec.OpInsert:
			if exists {
				return nil, &DuplicateKeyError{Write: i, Key: bytes.Clone(w.Key)}
			}
			records = append(records, kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: w.Key, Row: w.Row, Write: i})
			after = w.Row
		case kvcodec.OpInsertIfAbsent:
			if exists {
				continue
			}
			records = append(records, kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: w.Key, Row: w.Row, Write: i})
			after = w.Row
		case kvcodec.OpUpsert, kvcodec.OpUpdate:
			if !exists {
				if w.Op == kvcodec.OpUpdate {
					continue
				}
				records = append(records, kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: w.Key, Row: w.Row, Write: i})
			} else {
				records = append(records,
					kvcodec.ChangeRecord{Type: kvcodec.UpdateBefore, Key: w.Key, Row: old, Write: i},
					kvcodec.ChangeRecord{Type: kvcodec.UpdateAfter, Key: w.Key, Row: w.Row, Write: i})
			}
			after = w.Row
		case kvcodec.OpDelete:
			if !exists {
				continue
			}
			records = append(records, kvcodec.ChangeRecord{Type: kvcodec.Delete, Key: w.Key, Row: old, Write: i})
		default:
			return nil, fmt.Errorf("kv: write %d: unknown op %s", i, w.Op)
		}
		if batch != nil {
			batch[string(w.Key)] = after
		}
	}
	return records, nil
}
