package catalog

import (
	"fmt"
	"time"
)

// NodeID identifies a mink node. It is chosen by the operator (--node-id) and
// never reused for a different machine.
type NodeID uint32

// TableID, PartitionID and BucketID are assigned by the state machine when the
// records that create them are applied, so every node computes the same ids.
type (
	TableID     uint64
	PartitionID uint64
	BucketID    uint64
	// StreamID names an s3stream stream. A bucket's stream has the bucket's id.
	StreamID uint64
)

// Kind is the type tag of a record in the metadata log. Values are part of the
// on-disk format (docs/format/metadata-log.md): never renumber them.
type Kind uint16

const (
	KindRegisterNode         Kind = 1
	KindRegisterCoordinator  Kind = 2
	KindCreateTable          Kind = 3
	KindDropTable            Kind = 4
	KindCreatePartition      Kind = 5
	KindDropPartition        Kind = 6
	KindLeadBucket           Kind = 7
	KindOpenStream           Kind = 8
	KindCloseStream          Kind = 9
	KindCommitStreamObjects  Kind = 10
	KindCommitWALTrim        Kind = 11
	KindCommitKVSnapshot     Kind = 12
	KindCommitTieringRound   Kind = 13
	KindCompactStreamObjects Kind = 14
	KindTrimStream           Kind = 15
	KindAllocateSequence     Kind = 16
	KindAddColumn            Kind = 17
	KindTruncateTable        Kind = 18
	KindSetColumnDefault     Kind = 19
	KindCommitGroupOffsets   Kind = 20
	KindDeleteGroupOffsets   Kind = 21
	KindCreateRole           Kind = 22
	KindAlterRole            Kind = 23
	KindDropRole             Kind = 24
	KindGrantRole            Kind = 25
	KindGrantTable           Kind = 26
	KindSetTableOwner        Kind = 27
	KindSetClusterKey        Kind = 28
	KindRenameTable          Kind = 29
	KindCreateView           Kind = 30
	KindDropView             Kind = 31
	KindRenameView           Kind = 32
	KindRenameColumn         Kind = 33
	KindSetColumnNotNull     Kind = 34
	KindSetColumnType        Kind = 35
	KindDropColumn           Kind = 36
	KindRestoreColumn        Kind = 37
	KindSetSequence          Kind = 38
	KindCreateSchema         Kind = 39
	KindDropSchema           Kind = 40
	KindRenameSchema         Kind = 41
	KindSetRelationSchema    Kind = 42
)

// Record is one entry of the metadata log. Every record that acts for a node,
// a bucket or the coordinator carries the epoch it acts under; the state
// machine rejects it when that epoch is not current.
type Record interface {
	Kind() Kind
}

// Addrs are the addresses a node advertises to clients and peers.
type Addrs struct {
	PG     string `json:"pg,omitempty"`
	Flight string `json:"flight,omitempty"`
	Admin  string `json:"admin,omitempty"`
	// Kafka is the advertised Kafka listener; empty when the node runs
	// none.
	Kafka string `json:"kafka,omitempty"`
}

// RegisterNode gives Node the node epoch ExpectEpoch+1. It is rejected unless
// ExpectEpoch equals the node's current epoch in the view (0 for a node never
// seen), so two registrations racing for the same node cannot both win. A node
// registers itself on every start; a node taking over a dead node's buckets
// registers the dead node (same Addrs) to fence its old epoch.
type RegisterNode struct {
	Node        NodeID `json:"node"`
	ExpectEpoch uint64 `json:"expect_epoch"`
	Addrs       Addrs  `json:"addrs"`
}

// RegisterCoordinator makes Node, at node epoch NodeEpoch, the coordinator with
// coordinator epoch ExpectEpoch+1. Rejected when NodeEpoch is not Node's
// current epoch or ExpectEpoch is not the current coordinator epoch.
type RegisterCoordinator struct {
	Node        NodeID `json:"node"`
	NodeEpoch   uint64 `json:"node_epoch"`
	ExpectEpoch uint64 `json:"expect_epoch"`
}

// ColumnType is a column's SQL type, as written in DESIGN.md §3 (for example
// "bigint", "numeric(12,2)", "varchar(20)", "timestamptz").
type Column struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	NotNull bool   `json:"not_null,omitempty"`
	// Default is the constant default in SQL literal form, or "" for none.
	Default string `json:"default,omitempty"`
	// Sequence makes the column take its values from the table's sequence
	// of it (AllocateSequence) when a write leaves it out: SequenceSerial
	// (PostgreSQL's serial types), SequenceAlways or SequenceByDefault
	// (GENERATED … AS IDENTITY); "" for none. Only integer columns
	// (smallint, integer, bigint) have one.
	Sequence string `json:"sequence,omitempty"`
	// Added marks a column that AddColumn added after the table was
	// created. Added columns follow the created ones, in the order added.
	Added bool `json:"added,omitempty"`
	// Missing, for an added column, is the value of the rows stored
	// without the column (before it was added, or by a node that had not
	// applied AddColumn yet): its PostgreSQL text form, or nil for NULL.
	Missing *string `json:"missing,omitempty"`
	// LakeOptional marks a column whose NOT NULL was set or dropped after
	// the table was created (SetColumnNotNull): its lake field is
	// optional whatever NotNull says, since Iceberg can make a required
	// field optional but not the reverse.
	LakeOptional bool `json:"lake_optional,omitempty"`
	// Dropped marks a column of TableSpec.StoredColumns that ALTER TABLE …
	// DROP COLUMN dropped: stored rows still hold it at its position, but
	// no one reads it, and new rows hold NULL there. It is set only in
	// StoredColumns' result, never in a record or in Spec.Columns.
	Dropped bool `json:"-"`
}

// DroppedColumn is a column ALTER TABLE … DROP COLUMN took from a table
// (DropColumn): gone from TableSpec.Columns, but still where the stored
// rows hold it.
type DroppedColumn struct {
	// Position is the column's index among the table's stored columns
	// (TableSpec.StoredColumns).
	Position int `json:"position"`
	// Column is the column as it was when dropped (RestoreColumn puts it
	// back).
	Column Column `json:"column"`
	// SequenceLast is the last value the column's sequence had handed out
	// (Table.Sequences), kept for RestoreColumn; 0 for none.
	SequenceLast int64 `json:"sequence_last,omitempty"`
}

// DroppedName is the name StoredColumns gives the dropped column at stored
// position pos: PostgreSQL's name for it (pg_attribute.attname of a dropped
// column), which no column a user names can have.
func DroppedName(pos int) string {
	return fmt.Sprintf("........pg.dropped.%d........", pos+1)
}

// Column.Sequence values.
const (
	SequenceSerial    = "serial"
	SequenceAlways    = "always"
	SequenceByDefault = "by default"
)

// SequenceMax is the largest value of a sequence of a column of the given
// type; 0 for a type that cannot have a sequence.
func SequenceMax(typ string) int64 {
	switch typ {
	case "smallint":
		return 1<<15 - 1
	case "integer":
		return 1<<31 - 1
	case "bigint":
		return 1<<63 - 1
	}
	return 0
}

// TableSpec is everything CREATE TABLE says about a table.
type TableSpec struct {
	Name string `json:"name"`
	// Schema is the schema the table is in (schemas.go).
	Schema     SchemaID `json:"schema,omitempty"`
	Columns    []Column `json:"columns"`
	PrimaryKey []string `json:"primary_key,omitempty"` // empty: a log table
	// PartitionBy is the LIST partition column, or "" for an unpartitioned table.
	PartitionBy string            `json:"partition_by,omitempty"`
	Buckets     int               `json:"buckets"`
	BucketKey   []string          `json:"bucket_key,omitempty"`
	Options     map[string]string `json:"options,omitempty"`
	// Dropped are the columns DropColumn dropped, in Position order. Stored
	// batches, KV rows and the lake keep a place for each (StoredColumns);
	// Columns holds the others, the ones users see.
	Dropped []DroppedColumn `json:"dropped,omitempty"`
}

// StoredColumns returns the columns as stored rows hold them: Columns with
// the dropped columns back at their positions, each marked Dropped, named
// DroppedName, nullable (its lake field optional) and without a default
// or sequence. Without dropped columns it is Columns itself: do not
// modify the result.
func (s TableSpec) StoredColumns() []Column {
	if len(s.Dropped) == 0 {
		return s.Columns
	}
	out := make([]Column, 0, len(s.Columns)+len(s.Dropped))
	visible := s.Columns
	for _, d := range s.Dropped {
		for len(out) < d.Position && len(visible) > 0 {
			out = append(out, visible[0])
			visible = visible[1:]
		}
		c := d.Column
		c.Name = DroppedName(d.Position)
		c.Dropped, c.LakeOptional = true, c.LakeOptional || c.NotNull
		c.NotNull, c.Default, c.Sequence = false, "", ""
		out = append(out, c)
	}
	return append(out, visible...)
}

// CreateTable creates a table named Spec.Name. Rejected when a table or a
// view has the name.
// The outcome carries the new TableID; an unpartitioned table also gets
// Spec.Buckets buckets (ids in the outcome), with no leader until LeadBucket.
type CreateTable struct {
	Spec TableSpec `json:"spec"`
	// Owner is the role creating the table; 0 (no owner: a superuser's)
	// for tables created before roles existed.
	Owner RoleID `json:"owner,omitempty"`
}

// DropTable drops the table and all its partitions and buckets. It is
// rejected with ErrInUse while a view reads the table (DropView first). Their streams
// are retired: a closed stream leaves the view at once, an open one is marked
// Retired and leaves the view when it is closed (its holder, or the node
// taking over from a dead holder, flushes and closes it as for any bucket it
// no longer leads). The objects of a stream no longer in the view are garbage
// (s3stream.Collector).
type DropTable struct {
	Table TableID `json:"table"`
}

// CreatePartition creates the partition of Table holding rows whose partition
// column equals Value (its text form). Rejected when it exists already; the
// outcome carries the PartitionID and the new bucket ids.
type CreatePartition struct {
	Table TableID `json:"table"`
	Value string  `json:"value"`
}

// DropPartition drops one partition and its buckets; their streams are
// retired as for DropTable. The lifecycle loop proposes it for partitions
// expired by partition_retention.
type DropPartition struct {
	Table     TableID     `json:"table"`
	Partition PartitionID `json:"partition"`
}

// LeadBucket makes Node the leader of Bucket with a new leader epoch (the
// bucket's previous leader epoch + 1, returned in the outcome). It is proposed
// either by the coordinator, carrying CoordinatorEpoch (rejected when stale),
// or by the bucket's current leader renewing its own epoch after a restart
// (CoordinatorEpoch 0, ExpectLeaderEpoch = the current leader epoch, NodeEpoch
// = the proposer's current node epoch). The coordinator form leaves
// ExpectLeaderEpoch and NodeEpoch 0.
type LeadBucket struct {
	Bucket            BucketID `json:"bucket"`
	Node              NodeID   `json:"node"`
	CoordinatorEpoch  uint64   `json:"coordinator_epoch,omitempty"`
	ExpectLeaderEpoch uint64   `json:"expect_leader_epoch,omitempty"`
	NodeEpoch         uint64   `json:"node_epoch,omitempty"`
}

// OpenStream opens Stream on Node at Epoch (the bucket's leader epoch). It is
// rejected when Epoch is lower than the stream's epoch or is the epoch the
// stream was closed at (fenced: an epoch is used once), when Node is not the
// bucket's leader at Epoch, when the stream is open (held by its holder), or
// when NodeEpoch is not Node's current epoch. The same open again is
// accepted. A stream that does not exist yet is created empty.
type OpenStream struct {
	Stream    StreamID `json:"stream"`
	Epoch     uint64   `json:"epoch"`
	Node      NodeID   `json:"node"`
	NodeEpoch uint64   `json:"node_epoch"`
}

// CloseStream closes Stream; Epoch must be the epoch it is open at.
type CloseStream struct {
	Stream StreamID `json:"stream"`
	Epoch  uint64   `json:"epoch"`
}

// StreamObject is one object holding offsets [Start, End) of a stream.
//
// At is when the object was written, by the writer's clock (UTC), or zero
// when unknown (objects committed before it was recorded). log_retention
// ages a stream's data by it: At is no earlier than the append of any entry
// in the object, so age by At never overstates an entry's age. A compaction
// output carries the latest At of the objects it replaces.
type StreamObject struct {
	Key   string    `json:"key"`
	Start uint64    `json:"start"`
	End   uint64    `json:"end"`
	Size  int64     `json:"size"`
	At    time.Time `json:"at,omitzero"`
}

// CommitStreamObjects adds Objects to Stream. Accepted only at the stream's
// current Epoch (open or closed: a node taking over commits a dead holder's
// data at the holder's epoch) and only when the objects are contiguous and the
// first starts at the stream's committed end offset (no gap, no overlap). The
// same commit again is accepted.
type CommitStreamObjects struct {
	Stream  StreamID       `json:"stream"`
	Epoch   uint64         `json:"epoch"`
	Objects []StreamObject `json:"objects"`
}

// CompactStreamObjects replaces a run of Stream's committed objects with one
// object holding the same entries. It is accepted only at the stream's
// current Epoch while the stream is open (the leader compacts), and only when
// Replaces is exactly a contiguous run of the stream's objects (keys and
// offsets) and With covers exactly their offsets. Readers see the same
// entries before and after; the replaced objects become garbage.
type CompactStreamObjects struct {
	Stream   StreamID       `json:"stream"`
	Epoch    uint64         `json:"epoch"`
	Replaces []StreamObject `json:"replaces"`
	With     StreamObject   `json:"with"`
}

// TrimStream moves Stream's start offset forward to Start: offsets below it
// are no longer readable, and the stream's objects that end at or below it
// leave the view (they become garbage for s3stream.Collector, which deletes
// them after its reader grace delay). It is proposed by the coordinator lease
// holder's lifecycle loop (log_retention) and carries its CoordinatorEpoch;
// it is rejected when that epoch is stale, so a deposed lease holder cannot
// trim. The stream's leader is not involved: a trim never touches the
// stream's end, and the leader's appends and commits are unaffected.
//
// Rejected (ErrInvalid) when Start is below the stream's start (start
// offsets never move backwards; the same trim again is accepted and changes
// nothing), beyond its committed end, or not an object boundary (the Start
// of one of its objects, or its committed end): a trim removes whole
// objects. For a bucket's stream it is also rejected when the table's
// tiering is on and Start is past the bucket's tiered offset (untiered data
// is never trimmed), and, for a bucket of a primary-key table, when the
// bucket has no retained KV snapshot or Start is past the log offset of the
// oldest retained one: the KV tablet restores from a retained snapshot plus
// the changelog after it. Retained snapshots only move forward, so a trim
// accepted once stays safe when newer snapshots push older ones out of
// retention. A retired stream is not trimmed (ErrNotFound).
type TrimStream struct {
	Stream           StreamID `json:"stream"`
	Start            uint64   `json:"start"`
	CoordinatorEpoch uint64   `json:"coordinator_epoch"`
}

// CommitWALTrim records that WAL objects of Node's WAL at NodeEpoch with a
// sequence number below TrimSeq are no longer needed. Trim points only move
// forward; a lower TrimSeq is rejected.
//
// By and ByEpoch name the node proposing the trim and its node epoch, which
// must be current: a writer trims its own WAL at its own epoch, a node that
// took over trims the dead epoch's WAL at its own. A fenced writer's late
// trim is rejected (ErrStaleEpoch), so it cannot move a trim point past WAL
// objects that the taker still has to replay.
type CommitWALTrim struct {
	Node      NodeID `json:"node"`
	NodeEpoch uint64 `json:"node_epoch"`
	TrimSeq   uint64 `json:"trim_seq"`
	By        NodeID `json:"by"`
	ByEpoch   uint64 `json:"by_epoch"`
}

// CommitKVSnapshot records a KV tablet snapshot of Bucket taken at LogOffset,
// under the bucket's LeaderEpoch (rejected when stale). Manifest is the object
// key of the snapshot manifest.
type CommitKVSnapshot struct {
	Bucket      BucketID `json:"bucket"`
	LeaderEpoch uint64   `json:"leader_epoch"`
	SnapshotID  uint64   `json:"snapshot_id"`
	LogOffset   uint64   `json:"log_offset"`
	Manifest    string   `json:"manifest"`
}

// AllocateSequence hands out the next Count values of the sequence of
// Table's column Column (a column with Column.Sequence set); the outcome's
// SequenceStart is the first. Values are never handed out twice, also to
// different nodes; a node caches what it allocated, so values are unique
// and increase per node but are not gap-free (as PostgreSQL sequences with
// a cache). Rejected with ErrSequenceExhausted when fewer than Count values
// are left below the column type's maximum, and with ErrNotFound or
// ErrInvalid for an unknown table or a column without a sequence.
//
// Epoch must be the table's SequenceEpoch (ErrStaleEpoch otherwise): a
// node that cached values before TRUNCATE … RESTART IDENTITY learns of the
// restart instead of allocating after it as if it had not happened.
type AllocateSequence struct {
	Table  TableID `json:"table"`
	Column string  `json:"column"`
	Count  uint64  `json:"count"`
	Epoch  uint64  `json:"epoch,omitempty"`
}

// SetSequence sets the last value the sequence of Table's column Column
// has handed out to Last (setval): the next value allocated is Last + 1;
// 0 starts it again at 1. The table's SequenceEpoch grows by one, so that
// nodes drop the values they cached (AllocateSequence). Rejected with
// ErrNotFound for an unknown table and ErrInvalid for a column without a
// sequence or a Last outside 0..SequenceMax of its type.
type SetSequence struct {
	Table  TableID `json:"table"`
	Column string  `json:"column"`
	Last   int64   `json:"last"`
}

// AddColumn appends Column to Table's columns (ALTER TABLE … ADD COLUMN);
// the view marks it Added. Stored rows are not rewritten: a row stored
// without the column reads as Column.Missing. Rejected with ErrNotFound for
// an unknown table and ErrInvalid for a name the table has, a column with a
// sequence, or a column without a name or type.
type AddColumn struct {
	Table  TableID `json:"table"`
	Column Column  `json:"column"`
}

// TruncateTable empties Table (TRUNCATE). Its buckets, an unpartitioned
// table's or every partition's, leave the view and their streams are
// retired, as DropTable does; an unpartitioned table gets Spec.Buckets new
// buckets (ids in the outcome, no leader until LeadBucket), a partitioned
// one has no partitions left (writes create them again). The table's id,
// columns, options and sequences stay; its tiered offsets go, so readers
// read no lake rows until the next tiering round, which first deletes the
// lake rows of buckets the table no longer has. Rejected with ErrNotFound
// for an unknown table.
//
// With RestartSequences (TRUNCATE … RESTART IDENTITY) the table's
// sequences start again at 1: Sequences is emptied and SequenceEpoch
// grows by one.
type TruncateTable struct {
	Table            TableID `json:"table"`
	RestartSequences bool    `json:"restart_sequences,omitempty"`
}

// SetColumnDefault sets the DEFAULT of Table's column Column (ALTER TABLE
// … ALTER COLUMN … SET DEFAULT) to Default, the SQL expression as
// Column.Default holds it, or drops it when Default is "". Only later
// writes use it: stored rows and an added column's missing value do not
// change. Rejected with ErrNotFound for an unknown table or column and
// ErrInvalid for a column with a sequence.
type SetColumnDefault struct {
	Table   TableID `json:"table"`
	Column  string  `json:"column"`
	Default string  `json:"default,omitempty"`
}

// RenameTable renames Table to Name (ALTER TABLE … RENAME TO). What names
// the table by its name follows it: its relation, its Kafka topic, and the
// consumer groups' committed offsets of that topic, which move to the new
// name. Buckets, streams, sequences, privileges and the lake belong to the
// table's ID and do not change, and views that read it follow it
// (ViewRelation.ID). Renaming a table to its own name changes nothing.
// Rejected with ErrNotFound for an unknown table, ErrExists when another
// table or a view has the name, and ErrInvalid for an empty name.
type RenameTable struct {
	Table TableID `json:"table"`
	Name  string  `json:"name"`
}

// RenameColumn renames Table's column From to To (ALTER TABLE … RENAME
// COLUMN). Everything that names the column follows it in the one record:
// the column, the primary key, the bucket key, the partition column and
// the column's sequence. Stored rows are untouched: stream batches and KV
// rows hold columns by position, and the lake maps its files' columns to
// the table's by Iceberg field id. Renaming a column to its own name
// changes nothing. Rejected with ErrNotFound for an unknown table or
// column, ErrExists when the table has another column named To, and
// ErrInvalid for an empty name.
type RenameColumn struct {
	Table TableID `json:"table"`
	From  string  `json:"from"`
	To    string  `json:"to"`
}

// SetColumnNotNull sets (NotNull) or drops the NOT NULL of Table's column
// Column (ALTER TABLE … ALTER COLUMN … SET/DROP NOT NULL). Only later
// writes are checked against it: whoever proposes SET NOT NULL has checked
// that no stored row holds NULL there. The column's lake field is optional
// from then on (Column.LakeOptional). Rejected with ErrNotFound for an
// unknown table or column and ErrInvalid for dropping the NOT NULL of a
// primary-key column.
type SetColumnNotNull struct {
	Table   TableID `json:"table"`
	Column  string  `json:"column"`
	NotNull bool    `json:"not_null,omitempty"`
}

// SetColumnType changes the SQL type of Table's column Column (ALTER TABLE
// … ALTER COLUMN … TYPE) to Type. Stored rows are not rewritten: the
// proposer allows only a type stored as the old one is (text and
// varchar(n): strings in stream batches, KV rows and the lake alike), and
// has checked that every stored value fits the new type. Rejected with
// ErrNotFound for an unknown table or column and ErrInvalid for an empty
// type or a column with a sequence.
type SetColumnType struct {
	Table  TableID `json:"table"`
	Column string  `json:"column"`
	Type   string  `json:"type"`
}

// DropColumn drops Table's column Column (ALTER TABLE … DROP COLUMN). The
// column leaves Spec.Columns for Spec.Dropped, at its stored position:
// stored rows are not rewritten and keep its values, which no one reads;
// rows written later hold NULL there (TableSpec.StoredColumns). Its
// sequence goes. Rejected with ErrNotFound for an unknown table or column,
// and ErrInvalid for a primary-key, bucket-key or partition column, or the
// table's last column.
type DropColumn struct {
	Table  TableID `json:"table"`
	Column string  `json:"column"`
}

// RestoreColumn takes back the DropColumn of the dropped column at stored
// position Position of Table (ROLLBACK of a block that dropped it): the
// column is back in Spec.Columns with its name, type, constraints,
// default and sequence; the rows written since hold NULL in it. Rejected with
// ErrNotFound for an unknown table or no dropped column there, and
// ErrExists when another column has taken the name.
type RestoreColumn struct {
	Table    TableID `json:"table"`
	Position int     `json:"position"`
}

// CommitGroupOffsets records the committed offsets of a Kafka consumer group
// (OffsetCommit). A topic is a log table, by name; a partition is the index
// of a bucket in View.TopicBuckets. Each offset replaces the group's offset of
// its partition; the group's other offsets stay.
//
// It is proposed by the group coordinator, the coordinator lease holder, and
// carries its CoordinatorEpoch: a deposed coordinator's late commit is
// rejected (ErrStaleEpoch) and cannot overwrite what its successor's members
// committed. Rejected with ErrInvalid for an empty group, no offsets, a
// negative partition or offset, metadata longer than MaxGroupOffsetMetadata,
// or a partition named twice; with ErrNotFound when a topic is not a log
// table or a partition is not below its partition count (the table was
// dropped or truncated after the coordinator checked). All or nothing: a
// rejected record commits none of its offsets.
type CommitGroupOffsets struct {
	Group            string        `json:"group"`
	CoordinatorEpoch uint64        `json:"coordinator_epoch"`
	Offsets          []GroupOffset `json:"offsets"`
}

// GroupOffset is one committed offset of a CommitGroupOffsets.
type GroupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the next offset the group will consume (Kafka's committed
	// offset).
	Offset int64 `json:"offset"`
	// LeaderEpoch is the client's leader epoch of the partition at Offset,
	// -1 when unknown; stored and returned, not checked.
	LeaderEpoch int32 `json:"leader_epoch"`
	// Metadata is the client's commit metadata ("" for none or null).
	Metadata string `json:"metadata,omitempty"`
}

// MaxGroupOffsetMetadata bounds GroupOffset.Metadata, in bytes, as Kafka's
// offset.metadata.max.bytes does by default.
const MaxGroupOffsetMetadata = 4096

// DeleteGroupOffsets deletes committed offsets of Group: with All, every
// offset of the group (DeleteGroups), else those of Partitions
// (OffsetDelete). Offsets that are not committed are skipped, so a resend
// after a lost response is accepted. Carries CoordinatorEpoch like
// CommitGroupOffsets (ErrStaleEpoch). Rejected with ErrInvalid for an empty
// group, All together with Partitions, or neither.
type DeleteGroupOffsets struct {
	Group            string           `json:"group"`
	CoordinatorEpoch uint64           `json:"coordinator_epoch"`
	All              bool             `json:"all,omitempty"`
	Partitions       []GroupPartition `json:"partitions,omitempty"`
}

// GroupPartition names one partition of a topic.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// MaxSequenceAllocation bounds AllocateSequence.Count.
const MaxSequenceAllocation = 1 << 20

// CommitTieringRound records that Table's buckets are tiered up to Offsets (per
// bucket, exclusive end) in lake snapshot LakeSnapshotID, whose Iceberg
// sequence number is LakeSequence. Rejected when CoordinatorEpoch is stale, an
// offset moves backwards or LakeSequence does not increase. Iceberg snapshot
// ids are random, so only the sequence number orders rounds; a repeat of the
// round already recorded (same snapshot, same offsets) is accepted and changes
// nothing. Buckets not in Offsets keep their tiered offsets.
type CommitTieringRound struct {
	Table            TableID             `json:"table"`
	CoordinatorEpoch uint64              `json:"coordinator_epoch"`
	Offsets          map[BucketID]uint64 `json:"offsets"`
	LakeSnapshotID   int64               `json:"lake_snapshot_id"`
	LakeSequence     uint64              `json:"lake_sequence,omitempty"`
	At               time.Time           `json:"at"`
}

func (RegisterNode) Kind() Kind         { return KindRegisterNode }
func (RegisterCoordinator) Kind() Kind  { return KindRegisterCoordinator }
func (CreateTable) Kind() Kind          { return KindCreateTable }
func (DropTable) Kind() Kind            { return KindDropTable }
func (CreatePartition) Kind() Kind      { return KindCreatePartition }
func (DropPartition) Kind() Kind        { return KindDropPartition }
func (LeadBucket) Kind() Kind           { return KindLeadBucket }
func (OpenStream) Kind() Kind           { return KindOpenStream }
func (CloseStream) Kind() Kind          { return KindCloseStream }
func (CommitStreamObjects) Kind() Kind  { return KindCommitStreamObjects }
func (CommitWALTrim) Kind() Kind        { return KindCommitWALTrim }
func (CommitKVSnapshot) Kind() Kind     { return KindCommitKVSnapshot }
func (CommitTieringRound) Kind() Kind   { return KindCommitTieringRound }
func (CompactStreamObjects) Kind() Kind { return KindCompactStreamObjects }
func (TrimStream) Kind() Kind           { return KindTrimStream }
func (AllocateSequence) Kind() Kind     { return KindAllocateSequence }
func (AddColumn) Kind() Kind            { return KindAddColumn }
func (TruncateTable) Kind() Kind        { return KindTruncateTable }
func (SetColumnDefault) Kind() Kind     { return KindSetColumnDefault }
func (RenameTable) Kind() Kind          { return KindRenameTable }
func (RenameColumn) Kind() Kind         { return KindRenameColumn }
func (SetColumnNotNull) Kind() Kind     { return KindSetColumnNotNull }
func (SetColumnType) Kind() Kind        { return KindSetColumnType }
func (DropColumn) Kind() Kind           { return KindDropColumn }
func (RestoreColumn) Kind() Kind        { return KindRestoreColumn }
func (SetSequence) Kind() Kind          { return KindSetSequence }
func (CommitGroupOffsets) Kind() Kind   { return KindCommitGroupOffsets }
func (DeleteGroupOffsets) Kind() Kind   { return KindDeleteGroupOffsets }
