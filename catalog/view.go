package catalog

import (
	"maps"
	"slices"
	"time"
)

// View is the state computed by applying the metadata log, in order, from the
// empty view. Every node computes the same View for the same log prefix.
//
// A View is mutated only by Apply. Readers outside the state machine get a
// View that is never mutated again (see Catalog.View); they must not modify it.
//
// Apply keeps a View in one normal form, so that equal views are
// reflect.DeepEqual and encode to equal bytes: the View's own maps are never
// nil; every other empty map or slice in it is nil; times are in UTC.
type View struct {
	// Index is the log index of the last record applied (0: none).
	Index uint64 `json:"index"`

	Nodes       map[NodeID]*Node `json:"nodes"`
	Coordinator Coordinator      `json:"coordinator"`

	Tables  map[TableID]*Table   `json:"tables"`
	Buckets map[BucketID]*Bucket `json:"buckets"`
	Streams map[StreamID]*Stream `json:"streams"`
	// WALTrims is the trim point of each node epoch's WAL.
	WALTrims map[WALID]uint64 `json:"wal_trims"`

	// Groups holds the committed offsets of Kafka consumer groups, by group
	// id. A group with no committed offset is not in the map. Group
	// membership is not in the view: the group coordinator keeps it in
	// memory.
	Groups map[string]*Group `json:"groups"`

	// Views holds the SQL views, by id (sqlview.go). Their ids come from
	// NextID, as tables' do.
	Views map[TableID]*SQLView `json:"views"`
	// Schemas holds the schemas other than public, by id (schemas.go).
	Schemas map[SchemaID]*Schema `json:"schemas"`

	// Roles holds the roles, by id (roles.go).
	Roles map[RoleID]*Role `json:"roles"`
	// NextRoleID is the next role id handed out (0: BootstrapRole).
	NextRoleID RoleID `json:"next_role_id,omitempty"`
	// ClusterKey signs the cluster's bearer tokens (SetClusterKey); nil
	// until a node sets it.
	ClusterKey []byte `json:"cluster_key,omitempty"`

	// NextID is the next id handed out for a table, view, partition or bucket. Ids
	// are never reused, even after a drop.
	NextID uint64 `json:"next_id"`
}

// Node is a registered node. Liveness is not in the view (see Liveness).
type Node struct {
	ID    NodeID `json:"id"`
	Epoch uint64 `json:"epoch"`
	Addrs Addrs  `json:"addrs"`
}

// Coordinator is the current coordinator registration; Epoch 0 means none yet.
type Coordinator struct {
	Node  NodeID `json:"node"`
	Epoch uint64 `json:"epoch"`
}

// Table is a table and, for a partitioned table, its partitions.
type Table struct {
	ID         TableID                    `json:"id"`
	Spec       TableSpec                  `json:"spec"`
	Buckets    []BucketID                 `json:"buckets,omitempty"` // unpartitioned tables only
	Partitions map[PartitionID]*Partition `json:"partitions,omitempty"`
	Tiering    TieringState               `json:"tiering,omitzero"`
	// Sequences holds, for each column with a sequence, the last value
	// AllocateSequence handed out; absent: 0 (the first value is 1).
	Sequences map[string]int64 `json:"sequences,omitempty"`
	// SequenceEpoch counts the restarts of the table's sequences
	// (TruncateTable with RestartSequences); AllocateSequence names the
	// epoch it allocates in.
	SequenceEpoch uint64 `json:"sequence_epoch,omitempty"`
	// Owner is the role that owns the table (0: none, a superuser's), and
	// ACL what was granted on it, by grantee (roles.go).
	Owner RoleID    `json:"owner,omitempty"`
	ACL   []ACLItem `json:"acl,omitempty"`
}

// Partition is one LIST partition of a table.
type Partition struct {
	ID      PartitionID `json:"id"`
	Value   string      `json:"value"`
	Buckets []BucketID  `json:"buckets"`
}

// Bucket is the unit of ownership. Its stream has StreamID(ID).
type Bucket struct {
	ID        BucketID    `json:"id"`
	Table     TableID     `json:"table"`
	Partition PartitionID `json:"partition,omitempty"` // 0: unpartitioned
	// Index is the bucket's position, 0..Spec.Buckets-1, in its table or partition.
	Index int `json:"index"`
	// Leader is 0 until the first LeadBucket.
	Leader      NodeID `json:"leader"`
	LeaderEpoch uint64 `json:"leader_epoch"`
	// Snapshots are the retained KV snapshots, oldest first.
	Snapshots []KVSnapshot `json:"snapshots,omitempty"`
}

// KVSnapshot is a committed KV tablet snapshot.
type KVSnapshot struct {
	ID          uint64 `json:"id"`
	LeaderEpoch uint64 `json:"leader_epoch"`
	LogOffset   uint64 `json:"log_offset"`
	Manifest    string `json:"manifest"`
}

// Stream is an s3stream stream.
type Stream struct {
	ID StreamID `json:"id"`
	// Epoch is the epoch the stream was last opened at.
	Epoch uint64 `json:"epoch"`
	Open  bool   `json:"open"`
	// Node and NodeEpoch name the holder while Open (and the last holder after).
	Node      NodeID `json:"node"`
	NodeEpoch uint64 `json:"node_epoch"`
	// Start is the first readable offset: offsets below it were trimmed
	// (TrimStream). Offsets [Start, End) are in Objects; the first object
	// starts at Start (there is none when Start == End).
	Start uint64 `json:"start,omitempty"`
	// End is the committed end offset.
	End     uint64         `json:"end"`
	Objects []StreamObject `json:"objects,omitempty"`
	// Retired: the stream's bucket was dropped (DropTable, DropPartition)
	// while the stream was open. It accepts its holder's last commits and
	// leaves the view when it is closed.
	Retired bool `json:"retired,omitempty"`
}

// WALID names one WAL: the WAL a node writes during one node epoch.
type WALID struct {
	Node  NodeID `json:"node"`
	Epoch uint64 `json:"epoch"`
}

// TieringState is what CommitTieringRound recorded for a table.
type TieringState struct {
	Offsets        map[BucketID]uint64 `json:"offsets,omitempty"`
	LakeSnapshotID int64               `json:"lake_snapshot_id,omitempty"`
	LakeSequence   uint64              `json:"lake_sequence,omitempty"`
	At             time.Time           `json:"at,omitzero"`
}

// Group is the committed offsets of one Kafka consumer group
// (CommitGroupOffsets). Offsets is by topic (a log table's name), then by
// partition (an index into View.TopicBuckets); neither map is ever empty,
// and every offset names an existing log table and a partition below its
// partition count: DropTable and TruncateTable remove the offsets of their
// table, and DropPartition those of the partitions whose numbers it shifts.
type Group struct {
	Name    string                               `json:"name"`
	Offsets map[string]map[int32]CommittedOffset `json:"offsets"`
}

// CommittedOffset is one committed offset of a group, as GroupOffset carried
// it.
type CommittedOffset struct {
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// TopicBuckets returns the buckets of t in Kafka partition order: partition
// i of the topic named t.Spec.Name is bucket i of the result. That is
// t.Buckets for an unpartitioned table, and for a partitioned one the
// buckets of each partition in bucket index order, partitions in creation
// (id) order. Dropping a partition therefore renumbers the partitions after
// it (DropPartition removes their committed offsets). The slice is the
// caller's.
func (v *View) TopicBuckets(t *Table) []BucketID {
	if t.Spec.PartitionBy == "" {
		return slices.Clone(t.Buckets)
	}
	var ids []BucketID
	for _, pid := range slices.Sorted(maps.Keys(t.Partitions)) {
		ids = append(ids, t.Partitions[pid].Buckets...)
	}
	return ids
}

// topicPartitions returns the partition count of the topic t (its number of
// buckets, see TopicBuckets) without building the list.
func topicPartitions(t *Table) int {
	if t.Spec.PartitionBy == "" {
		return len(t.Buckets)
	}
	n := 0
	for _, p := range t.Partitions {
		n += len(p.Buckets)
	}
	return n
}

// Topic returns the log table whose topic name is name (TopicName), which Kafka clients see as a
// topic, and its partition count; false when there is none (no table, or a
// primary-key table).
func (v *View) Topic(name string) (*Table, int, bool) {
	t, ok := v.TableNamed(name)
	if !ok || len(t.Spec.PrimaryKey) != 0 {
		return nil, 0, false
	}
	return t, topicPartitions(t), true
}

// TableByName returns the table of schema named name (names compare
// exactly; sqlfront folds identifiers before they get here).
func (v *View) TableByName(schema SchemaID, name string) (*Table, bool) {
	for _, t := range v.Tables {
		if t.Spec.Name == name && t.Spec.Schema == schema {
			return t, true
		}
	}
	return nil, false
}

// LedBy returns the buckets whose leader is node, sorted.
func (v *View) LedBy(node NodeID) []BucketID {
	var ids []BucketID
	for id, b := range v.Buckets {
		if b.Leader == node {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// BucketsOf returns all buckets of table t, those of its partitions included,
// sorted; nil for an unknown table.
func (v *View) BucketsOf(t TableID) []BucketID {
	table := v.Tables[t]
	if table == nil {
		return nil
	}
	ids := slices.Clone(table.Buckets)
	for _, p := range table.Partitions {
		ids = append(ids, p.Buckets...)
	}
	slices.Sort(ids)
	return ids
}

// Clone returns a deep copy of v: nothing reachable from it is shared with v.
func (v *View) Clone() *View {
	c := &View{
		Index:       v.Index,
		Nodes:       make(map[NodeID]*Node, len(v.Nodes)),
		Coordinator: v.Coordinator,
		Tables:      make(map[TableID]*Table, len(v.Tables)),
		Buckets:     make(map[BucketID]*Bucket, len(v.Buckets)),
		Streams:     make(map[StreamID]*Stream, len(v.Streams)),
		WALTrims:    maps.Clone(v.WALTrims),
		Groups:      make(map[string]*Group, len(v.Groups)),
		Roles:       make(map[RoleID]*Role, len(v.Roles)),
		Views:       make(map[TableID]*SQLView, len(v.Views)),
		Schemas:     make(map[SchemaID]*Schema, len(v.Schemas)),
		NextID:      v.NextID,
		NextRoleID:  v.NextRoleID,
		ClusterKey:  slices.Clone(v.ClusterKey),
	}
	for id, r := range v.Roles {
		c.Roles[id] = r.clone()
	}
	for id, sv := range v.Views {
		c.Views[id] = sv.clone()
	}
	for id, s := range v.Schemas {
		sc := *s
		c.Schemas[id] = &sc
	}
	for name, g := range v.Groups {
		c.Groups[name] = g.clone()
	}
	if c.WALTrims == nil {
		c.WALTrims = map[WALID]uint64{}
	}
	for id, n := range v.Nodes {
		nc := *n
		c.Nodes[id] = &nc
	}
	for id, t := range v.Tables {
		c.Tables[id] = t.clone()
	}
	for id, b := range v.Buckets {
		bc := *b
		bc.Snapshots = slices.Clone(b.Snapshots)
		c.Buckets[id] = &bc
	}
	for id, s := range v.Streams {
		sc := *s
		sc.Objects = slices.Clone(s.Objects)
		c.Streams[id] = &sc
	}
	return c
}

func (t *Table) clone() *Table {
	c := *t
	c.Spec.Columns = slices.Clone(t.Spec.Columns)
	for i, col := range c.Spec.Columns {
		if col.Missing != nil {
			m := *col.Missing
			c.Spec.Columns[i].Missing = &m
		}
	}
	c.Spec.Dropped = slices.Clone(t.Spec.Dropped)
	for i, d := range c.Spec.Dropped {
		if d.Column.Missing != nil {
			m := *d.Column.Missing
			c.Spec.Dropped[i].Column.Missing = &m
		}
	}
	c.Spec.PrimaryKey = slices.Clone(t.Spec.PrimaryKey)
	c.Spec.BucketKey = slices.Clone(t.Spec.BucketKey)
	c.Spec.Options = maps.Clone(t.Spec.Options)
	c.Buckets = slices.Clone(t.Buckets)
	if t.Partitions != nil {
		c.Partitions = make(map[PartitionID]*Partition, len(t.Partitions))
		for id, p := range t.Partitions {
			pc := *p
			pc.Buckets = slices.Clone(p.Buckets)
			c.Partitions[id] = &pc
		}
	}
	c.Tiering.Offsets = maps.Clone(t.Tiering.Offsets)
	c.Sequences = maps.Clone(t.Sequences)
	c.ACL = slices.Clone(t.ACL)
	return &c
}
