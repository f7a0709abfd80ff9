package kvcodec

import "fmt"

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
	// Write is the index, in the writes passed to kv.Changes, of the write
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
	// with a *kv.DuplicateKeyError (SQLSTATE 23505). Plain INSERT and COPY.
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
	// fails with a *kv.ConflictError unless the key's current row — after the
	// batch's earlier writes — is byte-equal to IfRow, a nil IfRow meaning
	// that the key has no row. The caller then reads again and retries.
	CheckRow bool
	IfRow    []byte
}
