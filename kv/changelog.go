package kv

import (
	"bytes"
	"errors"
	"fmt"
)

// ChangeType is the kind of a changelog record.
type ChangeType int8

const (
	// Insert (+I): a row was inserted; Row is the new row.
	Insert ChangeType = iota
	// UpdateBefore (-U): a row is about to be updated; Row is the old row.
	// It is always followed by the UpdateAfter of the same key.
	UpdateBefore
	// UpdateAfter (+U): a row was updated; Row is the new row.
	UpdateAfter
	// Delete (-D): a row was deleted; Row is the old row.
	Delete
)

var changeTypeNames = [...]string{Insert: "+I", UpdateBefore: "-U", UpdateAfter: "+U", Delete: "-D"}

// String returns the changelog notation: "+I", "-U", "+U" or "-D".
func (t ChangeType) String() string {
	if t >= 0 && int(t) < len(changeTypeNames) {
		return changeTypeNames[t]
	}
	return fmt.Sprintf("ChangeType(%d)", int8(t))
}

// parseChangeType is the inverse of String.
func parseChangeType(s string) (ChangeType, bool) {
	for t, name := range changeTypeNames {
		if s == name {
			return ChangeType(t), true
		}
	}
	return 0, false
}

// ChangeRecord is one changelog record. Each record takes one offset of the
// bucket's stream.
type ChangeRecord struct {
	Type ChangeType
	// Key is the encoded primary key (Codec.AppendKey).
	Key []byte
	// Row is the encoded row (Codec.AppendRow): the new row for +I and +U,
	// the old row for -U and -D.
	Row []byte
	// Write is the index, in the writes passed to Changes, of the write
	// that produced the record, so that RETURNING and row counts can be
	// computed. It is not part of the changelog: decoded records have -1.
	Write int
}

func (r ChangeRecord) String() string {
	return fmt.Sprintf("%s %x", r.Type, r.Key)
}

// WriteOp says what a Write does to its key.
type WriteOp uint8

const (
	// OpInsert inserts the row; if the key exists, the whole batch fails
	// with a *DuplicateKeyError (SQLSTATE 23505). Plain INSERT and COPY.
	OpInsert WriteOp = iota
	// OpInsertIfAbsent inserts the row if the key does not exist and does
	// nothing otherwise. INSERT … ON CONFLICT DO NOTHING.
	OpInsertIfAbsent
	// OpUpsert inserts the row, or replaces the existing row (-U/+U).
	// INSERT … ON CONFLICT DO UPDATE once the new row is computed, and bulk
	// upserts.
	OpUpsert
	// OpUpdate replaces the existing row (-U/+U) and does nothing if the key
	// does not exist. UPDATE.
	OpUpdate
	// OpDelete deletes the existing row (-D) and does nothing if the key
	// does not exist. DELETE.
	OpDelete
)

func (op WriteOp) String() string {
	switch op {
	case OpInsert:
		return "insert"
	case OpInsertIfAbsent:
		return "insert-if-absent"
	case OpUpsert:
		return "upsert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("WriteOp(%d)", uint8(op))
}

// Write is one write to a primary-key bucket.
type Write struct {
	Op WriteOp
	// Key is the encoded primary key. REQUIRES: for every op but OpDelete,
	// Key is the key of Row.
	Key []byte
	// Row is the encoded new row; nil for OpDelete.
	Row []byte
	// CheckRow makes the write conditional, for optimistic read-modify-write
	// (UPDATE … SET v = v + 1 computed from a row read earlier): the batch
	// fails with a *ConflictError unless the key's current row — after the
	// batch's earlier writes — is byte-equal to IfRow, a nil IfRow meaning
	// that the key has no row. The caller then reads again and retries.
	CheckRow bool
	IfRow    []byte
}

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
func Changes(r RowReader, writes []Write) ([]ChangeRecord, error) {
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
	records := make([]ChangeRecord, 0, len(writes))
	for i, w := range writes {
		if w.Op != OpDelete && w.Row == nil {
			return nil, fmt.Errorf("kv: write %d (%s) has no row", i, w.Op)
		}
		old, exists, err := current(w.Key)
		if err != nil {
			return nil, fmt.Errorf("kv: write %d: read key %x: %w", i, w.Key, err)
		}
		if w.CheckRow && (exists != (w.IfRow != nil) || !bytes.Equal(old, w.IfRow)) {
			return nil, &ConflictError{Write: i, Key: bytes.Clone(w.Key)}
		}
		var after []byte // the row after this write; nil: deleted
		switch w.Op {
		case OpInsert:
			if exists {
				return nil, &DuplicateKeyError{Write: i, Key: bytes.Clone(w.Key)}
			}
			records = append(records, ChangeRecord{Type: Insert, Key: w.Key, Row: w.Row, Write: i})
			after = w.Row
		case OpInsertIfAbsent:
			if exists {
				continue
			}
			records = append(records, ChangeRecord{Type: Insert, Key: w.Key, Row: w.Row, Write: i})
			after = w.Row
		case OpUpsert, OpUpdate:
			if !exists {
				if w.Op == OpUpdate {
					continue
				}
				records = append(records, ChangeRecord{Type: Insert, Key: w.Key, Row: w.Row, Write: i})
			} else {
				records = append(records,
					ChangeRecord{Type: UpdateBefore, Key: w.Key, Row: old, Write: i},
					ChangeRecord{Type: UpdateAfter, Key: w.Key, Row: w.Row, Write: i})
			}
			after = w.Row
		case OpDelete:
			if !exists {
				continue
			}
			records = append(records, ChangeRecord{Type: Delete, Key: w.Key, Row: old, Write: i})
		default:
			return nil, fmt.Errorf("kv: write %d: unknown op %s", i, w.Op)
		}
		if batch != nil {
			batch[string(w.Key)] = after
		}
	}
	return records, nil
}
