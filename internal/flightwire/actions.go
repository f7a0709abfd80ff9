package flightwire

import (
	"fmt"
	"hash/fnv"
	"strconv"
)

// Action types. Bodies and results are JSON.
const (
	// ActionDescribeTable: DescribeTableRequest → TableInfo.
	ActionDescribeTable = "describe-table"
	// ActionCreatePartition: CreatePartitionRequest → TableInfo (after
	// the partition exists; creating an existing partition is not an error).
	ActionCreatePartition = "create-partition"
	// ActionClusterStatus: empty body → ClusterStatus.
	ActionClusterStatus = "cluster-status"
	// ActionBucketEnds: BucketEndsRequest → BucketEnds, for the buckets the
	// answering node leads and has open.
	ActionBucketEnds = "bucket-ends"
	// ActionLookup: KVLookupRequest → KVLookupResult: encoded primary keys
	// to encoded rows of one primary-key bucket, from its leader's
	// acknowledged state.
	ActionLookup = "lookup"
	// ActionKVWrite: KVWriteRequest → KVWriteResult: writes to one
	// primary-key bucket, run by its leader (docs/flight.md).
	ActionKVWrite = "kv-write"
)

// KVLookupRequest is the body of lookup. Keys are encoded primary keys
// (docs/format/kv.md).
type KVLookupRequest struct {
	Bucket uint64   `json:"bucket"`
	Keys   [][]byte `json:"keys"`
}

// KVLookupResult has one entry per key: the encoded row, or null.
type KVLookupResult struct {
	Rows [][]byte `json:"rows"`
	// Offset is the changelog offset the answer reflects.
	Offset uint64 `json:"offset"`
	// SchemaTag is the table's TableInfo.SchemaTag when the node answered.
	// A client whose cached one differs describes the table again before
	// it decodes the rows: a column was dropped or renamed meanwhile,
	// which the rows' bytes do not show.
	SchemaTag string `json:"schema_tag,omitempty"`
}

// KVWrite is one write of a kv-write: Op is the kvcodec.WriteOp number
// (0 insert, 1 insert-if-absent, 2 upsert, 3 update, 4 delete); Key and
// Row are encoded (docs/format/kv.md).
type KVWrite struct {
	Op       uint8  `json:"op"`
	Key      []byte `json:"key"`
	Row      []byte `json:"row,omitempty"`
	CheckRow bool   `json:"check_row,omitempty"`
	IfRow    []byte `json:"if_row,omitempty"`
}

// KVWriteRequest is the body of kv-write: one atomic batch.
type KVWriteRequest struct {
	Bucket uint64    `json:"bucket"`
	Writes []KVWrite `json:"writes"`
}

// KVChange is one changelog record a kv-write produced: Type is
// 0 (+I), 1 (-U), 2 (+U) or 3 (-D); Write is the index of the write that
// produced it.
type KVChange struct {
	Type  int8   `json:"type"`
	Key   []byte `json:"key"`
	Row   []byte `json:"row"`
	Write int    `json:"write"`
}

// KVWriteResult is the result of kv-write: the records, in changelog
// order, and the offset of the first (the acknowledged end when none).
type KVWriteResult struct {
	Records []KVChange `json:"records"`
	First   uint64     `json:"first"`
}

// Reasons of a kv-write that failed without appending anything (the status
// metadata carries "write", the index of the failing write, and "key", the
// encoded key in base64).
const (
	// ReasonDuplicateKey: an insert found its key (SQLSTATE 23505).
	ReasonDuplicateKey = "DUPLICATE_KEY"
	// ReasonConflict: a conditional write found another row.
	ReasonConflict = "WRITE_CONFLICT"
)

// DescribeTableRequest is the body of describe-table.
type DescribeTableRequest struct {
	Table string `json:"table"`
}

// CreatePartitionRequest is the body of create-partition.
type CreatePartitionRequest struct {
	Table string `json:"table"`
	Value string `json:"value"`
}

// TableInfo is what a client needs to route rows of a table to buckets.
type TableInfo struct {
	ID         uint64   `json:"id"`
	Name       string   `json:"name"`
	Columns    []Column `json:"columns"`
	PrimaryKey []string `json:"primary_key,omitempty"`
	// PartitionBy is the LIST partition column, "" if unpartitioned.
	PartitionBy string `json:"partition_by,omitempty"`
	// BucketKey are the columns hashed to pick a bucket; empty: batches go
	// round-robin over the buckets.
	BucketKey []string `json:"bucket_key,omitempty"`
	// BucketCount is the number of buckets of the table, or of each
	// partition.
	BucketCount int `json:"bucket_count"`
	// Buckets are the unpartitioned table's buckets, in index order.
	Buckets []BucketInfo `json:"buckets,omitempty"`
	// Partitions are the partitioned table's partitions.
	Partitions []PartitionInfo `json:"partitions,omitempty"`
	// Dropped are the columns ALTER TABLE … DROP COLUMN dropped, by
	// position: gone from Columns, but still in their places in the rows
	// of a primary-key table, which a client decoding them (Lookup) skips
	// (StoredColumns).
	Dropped []DroppedColumn `json:"dropped,omitempty"`
	// SchemaTag identifies Columns and Dropped (SchemaTag): it changes
	// with every ALTER TABLE that changes how rows read.
	SchemaTag string `json:"schema_tag,omitempty"`
}

// SchemaTag is a table's schema tag: a hash of its columns and dropped
// columns, as TableInfo carries them. Clients compare it, never parse it.
func SchemaTag(cols []Column, dropped []DroppedColumn) string {
	h := fnv.New64a()
	col := func(c Column) {
		missing := "\x00"
		if c.Missing != nil {
			missing = "v" + *c.Missing
		}
		fmt.Fprintf(h, "%q %q %t %t %q;", c.Name, c.Type, c.NotNull, c.Added, missing)
	}
	for _, c := range cols {
		col(c)
	}
	for _, d := range dropped {
		fmt.Fprintf(h, "drop %d ", d.Position)
		col(d.Column)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// DroppedColumn is a dropped column's place among a table's stored
// columns: Columns with the dropped ones back at their positions.
type DroppedColumn struct {
	Position int    `json:"position"`
	Column   Column `json:"column"`
}

// StoredColumns returns the columns rows hold: Columns with the dropped
// ones at their positions, marked Dropped. Without dropped columns it is
// Columns itself.
func (t *TableInfo) StoredColumns() []Column {
	if len(t.Dropped) == 0 {
		return t.Columns
	}
	out := make([]Column, 0, len(t.Columns)+len(t.Dropped))
	visible := t.Columns
	for _, d := range t.Dropped {
		for len(out) < d.Position && len(visible) > 0 {
			out = append(out, visible[0])
			visible = visible[1:]
		}
		c := d.Column
		c.Dropped = true
		out = append(out, c)
	}
	return append(out, visible...)
}

// Column is a table column and its SQL type.
type Column struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	NotNull bool   `json:"not_null,omitempty"`
	// Added marks a column ALTER TABLE … ADD COLUMN added; Missing is the
	// value rows stored without it read as (catalog.Column.Missing; nil:
	// NULL).
	Added   bool    `json:"added,omitempty"`
	Missing *string `json:"missing,omitempty"`
	// Dropped is set only in TableInfo.StoredColumns' result.
	Dropped bool `json:"-"`
}

// PartitionInfo is one partition and its buckets, in index order.
type PartitionInfo struct {
	Value   string       `json:"value"`
	Buckets []BucketInfo `json:"buckets"`
}

// BucketInfo is a bucket and its leader, as the answering node's view has
// it. Location is empty while the bucket has no leader.
type BucketInfo struct {
	ID       uint64 `json:"id"`
	Leader   uint32 `json:"leader,omitempty"`
	Location string `json:"location,omitempty"`
}

// ClusterStatus is the result of cluster-status.
type ClusterStatus struct {
	Nodes       []NodeStatus `json:"nodes"`
	Coordinator struct {
		Node  uint32 `json:"node"`
		Epoch uint64 `json:"epoch"`
	} `json:"coordinator"`
	AppliedIndex uint64 `json:"applied_index"`
	AnsweredBy   uint32 `json:"answered_by"`
}

// NodeStatus is one registered node.
type NodeStatus struct {
	ID         uint32 `json:"id"`
	Epoch      uint64 `json:"epoch"`
	Live       bool   `json:"live"`
	Location   string `json:"location,omitempty"`
	BucketsLed int    `json:"buckets_led"`
}

// BucketEndsRequest is the body of bucket-ends.
type BucketEndsRequest struct {
	Buckets []uint64 `json:"buckets"`
}

// BucketEnds maps bucket ids (decimal strings) to acknowledged end offsets.
type BucketEnds struct {
	Ends map[uint64]uint64 `json:"ends"`
}
