package catalog

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"
)

const (
	// DefaultBuckets is the bucket count of a table created with Buckets 0.
	// CreateTable stores the effective count in the view, so changing this
	// constant never changes an existing table.
	DefaultBuckets = 4
	// MaxBuckets is the largest bucket count of a table or partition.
	MaxBuckets = 1024
	// KVSnapshotsRetained is how many KV snapshots a bucket keeps in the view,
	// newest last. Files referenced by a retained snapshot are never deleted,
	// and the stream is never trimmed below the oldest retained LogOffset.
	KVSnapshotsRetained = 2
)

// Outcome is the result of applying one record. Only the fields listed for
// the record's kind are set, and only when the record was accepted.
type Outcome struct {
	Index uint64 // log index of the record
	// Err is nil when the record was accepted, else the rejection; it wraps
	// one of the sentinel errors (ErrStaleEpoch, ErrFenced, …).
	Err error
	// Epoch: RegisterNode: the new node epoch. RegisterCoordinator: the new
	// coordinator epoch. LeadBucket: the new leader epoch. OpenStream: the
	// stream epoch.
	Epoch     uint64
	Table     TableID     // CreateTable
	Partition PartitionID // CreatePartition
	// Buckets: CreateTable of an unpartitioned table and CreatePartition: the
	// new buckets, in bucket index order. The slice is the caller's.
	Buckets []BucketID
	// End: OpenStream: the committed end offset at open. CommitStreamObjects:
	// the new committed end offset.
	End uint64
	// SequenceStart: AllocateSequence: the first value allocated.
	SequenceStart int64
	// Role: CreateRole, AlterRole: the role's id.
	Role RoleID
}

// NewView returns the empty view, the state before the first record.
func NewView() *View {
	return &View{
		Nodes:    map[NodeID]*Node{},
		Tables:   map[TableID]*Table{},
		Buckets:  map[BucketID]*Bucket{},
		Streams:  map[StreamID]*Stream{},
		WALTrims: map[WALID]uint64{},
		Groups:   map[string]*Group{},
		Roles:    map[RoleID]*Role{},
		NextID:   1,
	}
}

// Apply applies the record at log index index to v and returns the outcome.
// Every node applies every record exactly once, in log order, so index must
// be v.Index+1; anything else is a bug in the caller and panics.
//
// Apply is pure: it reads nothing but v and rec, does no I/O, starts no
// goroutines and does not depend on map iteration order, so the same log
// yields the same view and the same outcomes on every node. An accepted record
// mutates v; a rejected one leaves v unchanged except v.Index, which always
// becomes index. v keeps no reference into rec.
//
// rec may be a record value or a pointer to one. Apply is not safe to call
// concurrently with any other use of v.
func Apply(v *View, index uint64, rec Record) Outcome {
	if v == nil || v.Nodes == nil || v.Tables == nil || v.Buckets == nil || v.Streams == nil || v.WALTrims == nil || v.Groups == nil || v.Roles == nil {
		panic(fmt.Sprintf("catalog: Apply(index %d) to a view not made by NewView, DecodeView or Clone: %+v", index, v))
	}
	if index != v.Index+1 {
		panic(fmt.Sprintf("catalog: Apply(index %d) to a view at index %d: records are applied once each, in log order", index, v.Index))
	}
	v.Index = index
	out := applyRecord(v, rec)
	out.Index = index
	return out
}

func applyRecord(v *View, rec Record) Outcome {
	rec, err := recordValue(rec)
	if err != nil {
		return Outcome{Err: err}
	}
	if err := checkRecordText(rec); err != nil {
		return Outcome{Err: fmt.Errorf("%v: %w", rec.Kind(), err)}
	}
	switch r := rec.(type) {
	case RegisterNode:
		return applyRegisterNode(v, r)
	case RegisterCoordinator:
		return applyRegisterCoordinator(v, r)
	case CreateTable:
		return applyCreateTable(v, r)
	case DropTable:
		return applyDropTable(v, r)
	case CreatePartition:
		return applyCreatePartition(v, r)
	case DropPartition:
		return applyDropPartition(v, r)
	case LeadBucket:
		return applyLeadBucket(v, r)
	case OpenStream:
		return applyOpenStream(v, r)
	case CloseStream:
		return applyCloseStream(v, r)
	case CommitStreamObjects:
		return applyCommitStreamObjects(v, r)
	case CommitWALTrim:
		return applyCommitWALTrim(v, r)
	case CommitKVSnapshot:
		return applyCommitKVSnapshot(v, r)
	case CommitTieringRound:
		return applyCommitTieringRound(v, r)
	case CompactStreamObjects:
		return applyCompactStreamObjects(v, r)
	case TrimStream:
		return applyTrimStream(v, r)
	case AllocateSequence:
		return applyAllocateSequence(v, r)
	case AddColumn:
		return applyAddColumn(v, r)
	case TruncateTable:
		return applyTruncateTable(v, r)
	case SetColumnDefault:
		return applySetColumnDefault(v, r)
	case CommitGroupOffsets:
		return applyCommitGroupOffsets(v, r)
	case DeleteGroupOffsets:
		return applyDeleteGroupOffsets(v, r)
	case CreateRole:
		return applyCreateRole(v, r)
	case AlterRole:
		return applyAlterRole(v, r)
	case DropRole:
		return applyDropRole(v, r)
	case GrantRole:
		return applyGrantRole(v, r)
	case GrantTable:
		return applyGrantTable(v, r)
	case SetTableOwner:
		return applySetTableOwner(v, r)
	case SetClusterKey:
		return applySetClusterKey(v, r)
	}
	panic(fmt.Sprintf("catalog: recordValue accepted record type %T that Apply does not handle", rec))
}

// recordValue returns rec as one of the record value types of this package,
// dereferencing a pointer, or an ErrInvalid error for nil and foreign types.
func recordValue(rec Record) (Record, error) {
	if rec == nil {
		return nil, fmt.Errorf("nil record: %w", ErrInvalid)
	}
	if rv := reflect.ValueOf(rec); rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, fmt.Errorf("nil %T record: %w", rec, ErrInvalid)
		}
		elem, ok := rv.Elem().Interface().(Record)
		if !ok {
			return nil, fmt.Errorf("record type %T is not a catalog record: %w", rec, ErrInvalid)
		}
		rec = elem
	}
	switch rec.(type) {
	case RegisterNode, RegisterCoordinator, CreateTable, DropTable, CreatePartition,
		DropPartition, LeadBucket, OpenStream, CloseStream, CommitStreamObjects,
		CommitWALTrim, CommitKVSnapshot, CommitTieringRound, CompactStreamObjects, TrimStream,
		AllocateSequence, AddColumn, TruncateTable, SetColumnDefault, CommitGroupOffsets, DeleteGroupOffsets,
		CreateRole, AlterRole, DropRole, GrantRole, GrantTable, SetTableOwner, SetClusterKey:
		return rec, nil
	}
	return nil, fmt.Errorf("record type %T is not a catalog record: %w", rec, ErrInvalid)
}

// checkRecordText rejects records whose strings are not valid UTF-8. The
// encoding (JSON) would replace invalid bytes, so such a record would apply
// differently from its decoded copy on other nodes.
func checkRecordText(rec Record) error {
	return checkUTF8(reflect.ValueOf(rec), "")
}

func checkUTF8(rv reflect.Value, path string) error {
	switch rv.Kind() {
	case reflect.String:
		if !utf8.ValidString(rv.String()) {
			return fmt.Errorf("field %s is not valid UTF-8: %q: %w", path, rv.String(), ErrInvalid)
		}
	case reflect.Pointer, reflect.Interface:
		if !rv.IsNil() {
			return checkUTF8(rv.Elem(), path)
		}
	case reflect.Struct:
		rt := rv.Type()
		for i := range rt.NumField() {
			if f := rt.Field(i); f.IsExported() {
				if err := checkUTF8(rv.Field(i), path+"."+f.Name); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range rv.Len() {
			if err := checkUTF8(rv.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		// Sorted so that the error names the same entry on every node.
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			if err := checkUTF8(k, path+" key"); err != nil {
				return err
			}
			if err := checkUTF8(rv.MapIndex(k), fmt.Sprintf("%s[%v]", path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// reject builds the outcome of a rejected record: the message, then the
// sentinel it wraps.
func reject(sentinel error, format string, args ...any) Outcome {
	return Outcome{Err: fmt.Errorf(format+": %w", append(args, sentinel)...)}
}

// checkNodeEpoch returns the rejection of a record acting for node at
// nodeEpoch when that is not node's current epoch (an unregistered node has
// none). what names the record in the message.
func (v *View) checkNodeEpoch(what string, node NodeID, nodeEpoch uint64) *Outcome {
	n := v.Nodes[node]
	if n == nil {
		out := reject(ErrStaleEpoch, "%s: node %d is not registered (record carries node epoch %d)", what, node, nodeEpoch)
		return &out
	}
	if n.Epoch != nodeEpoch {
		out := reject(ErrStaleEpoch, "%s: record carries node epoch %d of node %d, current is %d", what, nodeEpoch, node, n.Epoch)
		return &out
	}
	return nil
}

func applyRegisterNode(v *View, r RegisterNode) Outcome {
	if r.Node == 0 {
		return reject(ErrInvalid, "register node 0: node ids start at 1")
	}
	n := v.Nodes[r.Node]
	var current uint64
	if n != nil {
		current = n.Epoch
	}
	if r.ExpectEpoch != current {
		return reject(ErrStaleEpoch, "register node %d: expected node epoch %d, current is %d", r.Node, r.ExpectEpoch, current)
	}
	if n == nil {
		n = &Node{ID: r.Node}
		v.Nodes[r.Node] = n
	}
	n.Epoch = current + 1
	// A node registering a dead node to fence it may not know its addresses.
	if r.Addrs != (Addrs{}) {
		n.Addrs = r.Addrs
	}
	// Streams the node holds at an older node epoch stay open: the node that
	// takes over commits their data and closes them (CloseStream).
	return Outcome{Epoch: n.Epoch}
}

func applyRegisterCoordinator(v *View, r RegisterCoordinator) Outcome {
	what := fmt.Sprintf("register coordinator on node %d", r.Node)
	if r.Node == 0 {
		return reject(ErrInvalid, "%s: node ids start at 1", what)
	}
	if out := v.checkNodeEpoch(what, r.Node, r.NodeEpoch); out != nil {
		return *out
	}
	if r.ExpectEpoch != v.Coordinator.Epoch {
		return reject(ErrStaleEpoch, "%s: expected coordinator epoch %d, current is %d (node %d)",
			what, r.ExpectEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
	}
	v.Coordinator = Coordinator{Node: r.Node, Epoch: r.ExpectEpoch + 1}
	return Outcome{Epoch: v.Coordinator.Epoch}
}

func applyCreateTable(v *View, r CreateTable) Outcome {
	spec, err := normalizeTableSpec(r.Spec)
	for _, c := range spec.Columns {
		if err == nil && (c.Added || c.Missing != nil) {
			err = fmt.Errorf("column %q: only AddColumn adds a column with a missing value: %w", c.Name, ErrInvalid)
		}
	}
	if err != nil {
		return Outcome{Err: fmt.Errorf("create table %q: %w", r.Spec.Name, err)}
	}
	if t, ok := v.TableByName(spec.Name); ok {
		return reject(ErrExists, "create table %q: table %d has that name", spec.Name, t.ID)
	}
	if r.Owner != 0 && v.Roles[r.Owner] == nil {
		return reject(ErrNotFound, "create table %q: owner role %d: no such role", spec.Name, r.Owner)
	}
	t := &Table{ID: TableID(v.allocID()), Spec: spec, Owner: r.Owner}
	if spec.PartitionBy == "" {
		t.Buckets = v.createBuckets(t.ID, 0, spec.Buckets)
	}
	v.Tables[t.ID] = t
	return Outcome{Table: t.ID, Buckets: slices.Clone(t.Buckets)}
}

// normalizeTableSpec returns a copy of spec that shares nothing with it, with
// defaults filled in and empty lists as nil, or the ErrInvalid reason.
func normalizeTableSpec(spec TableSpec) (TableSpec, error) {
	out := TableSpec{
		Name:        spec.Name,
		Columns:     slices.Clone(spec.Columns),
		PrimaryKey:  slices.Clone(spec.PrimaryKey),
		PartitionBy: spec.PartitionBy,
		Buckets:     spec.Buckets,
		BucketKey:   slices.Clone(spec.BucketKey),
		Options:     maps.Clone(spec.Options),
	}
	if len(out.PrimaryKey) == 0 {
		out.PrimaryKey = nil
	}
	if len(out.BucketKey) == 0 {
		out.BucketKey = nil
	}
	if len(out.Options) == 0 {
		out.Options = nil
	}
	if out.Name == "" {
		return out, fmt.Errorf("empty table name: %w", ErrInvalid)
	}
	if len(out.Columns) == 0 {
		return out, fmt.Errorf("no columns: %w", ErrInvalid)
	}
	columns := map[string]bool{}
	for i, c := range out.Columns {
		if c.Name == "" {
			return out, fmt.Errorf("column %d has no name: %w", i, ErrInvalid)
		}
		if c.Type == "" {
			return out, fmt.Errorf("column %q has no type: %w", c.Name, ErrInvalid)
		}
		if columns[c.Name] {
			return out, fmt.Errorf("column %q appears twice: %w", c.Name, ErrInvalid)
		}

		switch c.Sequence {
		case "":
		case SequenceSerial, SequenceAlways, SequenceByDefault:
			if SequenceMax(c.Type) == 0 {
				return out, fmt.Errorf("column %q of type %s cannot have a sequence: %w", c.Name, c.Type, ErrInvalid)
			}
		default:
			return out, fmt.Errorf("column %q: unknown sequence kind %q: %w", c.Name, c.Sequence, ErrInvalid)
		}
		columns[c.Name] = true
	}
	if out.Buckets == 0 {
		out.Buckets = DefaultBuckets
	}
	if out.Buckets < 1 || out.Buckets > MaxBuckets {
		return out, fmt.Errorf("buckets = %d, want 1..%d: %w", out.Buckets, MaxBuckets, ErrInvalid)
	}
	if err := checkKeyColumns("primary key", out.PrimaryKey, columns); err != nil {
		return out, err
	}
	if err := checkKeyColumns("bucket key", out.BucketKey, columns); err != nil {
		return out, err
	}
	if out.PartitionBy != "" {
		if !columns[out.PartitionBy] {
			return out, fmt.Errorf("partition column %q is not a column: %w", out.PartitionBy, ErrInvalid)
		}
		if out.PrimaryKey != nil && !slices.Contains(out.PrimaryKey, out.PartitionBy) {
			return out, fmt.Errorf("primary key %v of a table partitioned by %q must include it: %w",
				out.PrimaryKey, out.PartitionBy, ErrInvalid)
		}
	}
	if out.PrimaryKey != nil {
		// Rows with the same key must land in the same bucket, or an upsert
		// would not find the row it replaces.
		for _, name := range out.BucketKey {
			if !slices.Contains(out.PrimaryKey, name) {
				return out, fmt.Errorf("bucket key column %q is not in the primary key %v: %w",
					name, out.PrimaryKey, ErrInvalid)
			}
		}
		if out.BucketKey == nil {
			// The default bucket key of a primary-key table is its primary
			// key; stored so that a later change of default cannot re-route
			// an existing table.
			out.BucketKey = slices.Clone(out.PrimaryKey)
		}
	}
	return out, nil
}

func checkKeyColumns(what string, key []string, columns map[string]bool) error {
	seen := map[string]bool{}
	for _, name := range key {
		if !columns[name] {
			return fmt.Errorf("%s column %q is not a column: %w", what, name, ErrInvalid)
		}
		if seen[name] {
			return fmt.Errorf("%s column %q appears twice: %w", what, name, ErrInvalid)
		}
		seen[name] = true
	}
	return nil
}

// allocID hands out the next table, partition or bucket id. An id whose
// stream exists is skipped: streams without a bucket (s3stream's tests
// open them) must not become a new bucket's stream, with their rows.
func (v *View) allocID() uint64 {
	for {
		id := v.NextID
		v.NextID++
		if _, taken := v.Streams[StreamID(id)]; !taken {
			return id
		}
	}
}

// createBuckets creates count unled buckets of a table or partition and
// returns their ids in index order.
func (v *View) createBuckets(table TableID, partition PartitionID, count int) []BucketID {
	ids := make([]BucketID, count)
	for i := range ids {
		ids[i] = BucketID(v.allocID())
		v.Buckets[ids[i]] = &Bucket{ID: ids[i], Table: table, Partition: partition, Index: i}
	}
	return ids
}

func applyDropTable(v *View, r DropTable) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "drop table %d: no such table", r.Table)
	}
	v.retireBuckets(t)
	delete(v.Tables, t.ID)
	// A new table of the same name is a new topic: no group has consumed it.
	v.dropTopicOffsets(t.Spec.Name, 0)
	return Outcome{}
}

// retireBuckets removes every bucket of t (of its partitions too) from the
// view and retires their streams.
func (v *View) retireBuckets(t *Table) {
	for _, id := range v.BucketsOf(t.ID) {
		delete(v.Buckets, id)
		v.retireStream(StreamID(id))
	}
}

// retireStream retires the stream of a dropped bucket: a closed stream leaves
// the view, an open one is marked Retired and leaves it when it is closed.
func (v *View) retireStream(id StreamID) {
	s := v.Streams[id]
	switch {
	case s == nil:
	case s.Open:
		s.Retired = true
	default:
		delete(v.Streams, id)
	}
}

func applyCreatePartition(v *View, r CreatePartition) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "create partition %q of table %d: no such table", r.Value, r.Table)
	}
	if t.Spec.PartitionBy == "" {
		return reject(ErrInvalid, "create partition %q of table %d (%q): the table is not partitioned", r.Value, t.ID, t.Spec.Name)
	}
	for _, p := range t.Partitions {
		if p.Value == r.Value {
			return reject(ErrExists, "create partition %q of table %d (%q): partition %d has that value", r.Value, t.ID, t.Spec.Name, p.ID)
		}
	}
	p := &Partition{ID: PartitionID(v.allocID()), Value: r.Value}
	p.Buckets = v.createBuckets(t.ID, p.ID, t.Spec.Buckets)
	if t.Partitions == nil {
		t.Partitions = map[PartitionID]*Partition{}
	}
	t.Partitions[p.ID] = p
	return Outcome{Partition: p.ID, Buckets: slices.Clone(p.Buckets)}
}

func applyDropPartition(v *View, r DropPartition) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "drop partition %d of table %d: no such table", r.Partition, r.Table)
	}
	p := t.Partitions[r.Partition]
	if p == nil {
		return reject(ErrNotFound, "drop partition %d of table %d (%q): no such partition", r.Partition, t.ID, t.Spec.Name)
	}
	for _, id := range p.Buckets {
		delete(v.Buckets, id)
		delete(t.Tiering.Offsets, id)
		v.retireStream(StreamID(id))
	}
	// The topic partitions from the dropped one on are renumbered (see
	// TopicBuckets): offsets committed for them would name other buckets.
	v.dropTopicOffsets(t.Spec.Name, firstPartitionOf(t, p.ID))
	delete(t.Partitions, p.ID)
	// Empty maps are nil in a view (see View), so views compare equal
	// after an encoding round trip.
	if len(t.Partitions) == 0 {
		t.Partitions = nil
	}
	if len(t.Tiering.Offsets) == 0 {
		t.Tiering.Offsets = nil
	}
	return Outcome{}
}

func applyLeadBucket(v *View, r LeadBucket) Outcome {
	what := fmt.Sprintf("lead bucket %d on node %d", r.Bucket, r.Node)
	b := v.Buckets[r.Bucket]
	if b == nil {
		return reject(ErrNotFound, "%s: no such bucket", what)
	}
	if r.Node == 0 {
		return reject(ErrInvalid, "%s: node ids start at 1", what)
	}
	node := v.Nodes[r.Node]
	if node == nil {
		return reject(ErrNotFound, "%s: node %d is not registered", what, r.Node)
	}
	if r.CoordinatorEpoch != 0 {
		// Coordinator form. The other fields belong to the renewal form; a
		// coordinator setting them would expect a check that is not made.
		if r.ExpectLeaderEpoch != 0 || r.NodeEpoch != 0 {
			return reject(ErrInvalid, "%s: coordinator form (coordinator epoch %d) carries expect leader epoch %d and node epoch %d, want 0",
				what, r.CoordinatorEpoch, r.ExpectLeaderEpoch, r.NodeEpoch)
		}
		if r.CoordinatorEpoch != v.Coordinator.Epoch {
			return reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
				what, r.CoordinatorEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
		}
	} else {
		// Renewal form: the leader asks for a fresh epoch for itself.
		if b.Leader == 0 {
			return reject(ErrStaleEpoch, "%s: renewal, but bucket %d has no leader yet", what, b.ID)
		}
		if b.Leader != r.Node {
			return reject(ErrStaleEpoch, "%s: renewal by node %d, but bucket %d is led by node %d at leader epoch %d",
				what, r.Node, b.ID, b.Leader, b.LeaderEpoch)
		}
		if r.ExpectLeaderEpoch != b.LeaderEpoch {
			return reject(ErrStaleEpoch, "%s: renewal expects leader epoch %d, current is %d",
				what, r.ExpectLeaderEpoch, b.LeaderEpoch)
		}
		if out := v.checkNodeEpoch(what, r.Node, r.NodeEpoch); out != nil {
			return *out
		}
	}
	b.Leader = r.Node
	b.LeaderEpoch++
	return Outcome{Epoch: b.LeaderEpoch}
}

func applyOpenStream(v *View, r OpenStream) Outcome {
	what := fmt.Sprintf("open stream %d at epoch %d on node %d", r.Stream, r.Epoch, r.Node)
	if r.Stream == 0 || r.Node == 0 || r.Epoch == 0 {
		return reject(ErrInvalid, "%s: stream, node and epoch must not be 0", what)
	}
	if out := v.checkNodeEpoch(what, r.Node, r.NodeEpoch); out != nil {
		return *out
	}
	s := v.Streams[r.Stream]
	if s != nil && s.Retired && !(s.Open && s.Node == r.Node && s.NodeEpoch == r.NodeEpoch && s.Epoch == r.Epoch) {
		return reject(ErrNotFound, "%s: the stream is retired (its bucket was dropped)", what)
	}
	if s != nil {
		if s.Open && s.Node == r.Node && s.NodeEpoch == r.NodeEpoch && s.Epoch == r.Epoch {
			// The same open again, after a lost response.
			return Outcome{Epoch: s.Epoch, End: s.End}
		}
		if r.Epoch < s.Epoch {
			return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
		}
		if r.Epoch == s.Epoch && !s.Open {
			// An epoch is used once: writes of the holder that closed it must
			// stay distinguishable from writes of a new holder.
			return reject(ErrFenced, "%s: the stream was closed at epoch %d; open it at a new leader epoch", what, s.Epoch)
		}
	}
	if b := v.Buckets[BucketID(r.Stream)]; b != nil {
		// A bucket's stream is opened by its leader at its leader epoch: this
		// is the fence that keeps a replaced leader from opening it again.
		if b.Leader == 0 {
			return reject(ErrStaleEpoch, "%s: bucket %d has no leader yet", what, b.ID)
		}
		if r.Node != b.Leader || r.Epoch != b.LeaderEpoch {
			return reject(ErrStaleEpoch, "%s: bucket %d is led by node %d at leader epoch %d",
				what, b.ID, b.Leader, b.LeaderEpoch)
		}
	}
	if s != nil && s.Open {
		held := &HeldByError{Stream: s.ID, Node: s.Node, NodeEpoch: s.NodeEpoch, Epoch: s.Epoch}
		return Outcome{Err: fmt.Errorf("%s: %w", what, held)}
	}
	if s == nil {
		s = &Stream{ID: r.Stream}
		v.Streams[s.ID] = s
	}
	s.Epoch, s.Open, s.Node, s.NodeEpoch = r.Epoch, true, r.Node, r.NodeEpoch
	return Outcome{Epoch: s.Epoch, End: s.End}
}

func applyCloseStream(v *View, r CloseStream) Outcome {
	what := fmt.Sprintf("close stream %d at epoch %d", r.Stream, r.Epoch)
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if r.Epoch < s.Epoch {
		return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
	}
	if r.Epoch > s.Epoch {
		return reject(ErrInvalid, "%s: the stream was never opened at that epoch (it is at epoch %d)", what, s.Epoch)
	}
	// Closing a closed stream at its epoch again (a lost response) is accepted.
	s.Open = false
	if s.Retired {
		delete(v.Streams, s.ID)
	}
	return Outcome{}
}

func applyCommitStreamObjects(v *View, r CommitStreamObjects) Outcome {
	what := fmt.Sprintf("commit %d objects to stream %d at epoch %d", len(r.Objects), r.Stream, r.Epoch)
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if r.Epoch < s.Epoch {
		return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
	}
	if r.Epoch > s.Epoch {
		return reject(ErrInvalid, "%s: the stream was never opened at that epoch (it is at epoch %d)", what, s.Epoch)
	}
	if len(r.Objects) == 0 {
		return reject(ErrInvalid, "%s: no objects", what)
	}
	for i, o := range r.Objects {
		if o.Key == "" || o.Start >= o.End || o.Size < 0 {
			return reject(ErrInvalid, "%s: object %d (key %q, offsets [%d, %d), size %d) needs a key, start < end and size >= 0",
				what, i, o.Key, o.Start, o.End, o.Size)
		}
		if i > 0 && o.Start != r.Objects[i-1].End {
			return reject(ErrGap, "%s: object %d starts at offset %d, object %d ended at %d",
				what, i, o.Start, i-1, r.Objects[i-1].End)
		}
		if _, err := o.At.UTC().MarshalJSON(); err != nil {
			return reject(ErrInvalid, "%s: object %d: time %v cannot be encoded", what, i, o.At)
		}
	}
	objects := slices.Clone(r.Objects)
	for i := range objects {
		objects[i].At = objects[i].At.UTC()
	}
	if first := objects[0]; first.Start != s.End {
		if committedAlready(s, objects) {
			// The same commit again, after a lost response.
			return Outcome{End: s.End}
		}
		if last := objects[len(objects)-1]; last.End <= s.Start {
			// Unreachable in practice: a commit retried after its offsets
			// were trimmed away. Only the stream's writer commits at its
			// epoch, so these are its own objects; they are garbage now.
			return Outcome{End: s.End}
		}
		return reject(ErrGap, "%s: the first object starts at offset %d, the stream's committed end is %d",
			what, first.Start, s.End)
	}
	s.Objects = append(s.Objects, objects...)
	s.End = objects[len(objects)-1].End
	return Outcome{End: s.End}
}

// committedAlready reports whether objects are, key, offsets and size, a run
// of objects the stream has committed. Their times are not compared: a
// writer that retries a commit after a lost response stamps the same objects
// again with a later time.
func committedAlready(s *Stream, objects []StreamObject) bool {
	i, found := slices.BinarySearchFunc(s.Objects, objects[0].Start, func(o StreamObject, start uint64) int {
		return cmp.Compare(o.Start, start)
	})
	if !found || len(s.Objects)-i < len(objects) {
		return false
	}
	return slices.EqualFunc(s.Objects[i:i+len(objects)], objects, func(a, b StreamObject) bool {
		return a.Key == b.Key && a.Start == b.Start && a.End == b.End && a.Size == b.Size
	})
}

func applyCompactStreamObjects(v *View, r CompactStreamObjects) Outcome {
	what := fmt.Sprintf("compact %d objects of stream %d at epoch %d", len(r.Replaces), r.Stream, r.Epoch)
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if r.Epoch < s.Epoch {
		return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
	}
	if r.Epoch > s.Epoch || !s.Open {
		return reject(ErrStaleEpoch, "%s: the stream is not open at that epoch (epoch %d, open %v)", what, s.Epoch, s.Open)
	}
	if len(r.Replaces) < 2 {
		return reject(ErrInvalid, "%s: a compaction replaces at least 2 objects", what)
	}
	w := r.With
	w.At = w.At.UTC()
	if _, err := w.At.MarshalJSON(); err != nil {
		return reject(ErrInvalid, "%s: time %v cannot be encoded", what, r.With.At)
	}
	replaces := slices.Clone(r.Replaces)
	for i := range replaces {
		replaces[i].At = replaces[i].At.UTC()
	}
	if w.Key == "" || w.Start != r.Replaces[0].Start || w.End != r.Replaces[len(r.Replaces)-1].End || w.Size < 0 {
		return reject(ErrInvalid, "%s: the new object (key %q, offsets [%d, %d)) must cover the replaced objects' offsets [%d, %d)",
			what, w.Key, w.Start, w.End, r.Replaces[0].Start, r.Replaces[len(r.Replaces)-1].End)
	}
	if slices.IndexFunc(s.Objects, func(o StreamObject) bool { return o.Key == w.Key }) >= 0 {
		if committedAlready(s, []StreamObject{w}) {
			return Outcome{} // the same compaction again, after a lost response
		}
		return reject(ErrExists, "%s: key %q is already a different object of the stream", what, w.Key)
	}
	if !committedAlready(s, replaces) {
		return reject(ErrGap, "%s: the replaced objects are not a run of the stream's objects", what)
	}
	i := slices.IndexFunc(s.Objects, func(o StreamObject) bool { return o.Key == replaces[0].Key })
	s.Objects = slices.Concat(s.Objects[:i], []StreamObject{w}, s.Objects[i+len(replaces):])
	return Outcome{}
}

func applyTrimStream(v *View, r TrimStream) Outcome {
	what := fmt.Sprintf("trim stream %d to offset %d", r.Stream, r.Start)
	if r.Stream == 0 {
		return reject(ErrInvalid, "%s: stream must not be 0", what)
	}
	if r.CoordinatorEpoch == 0 {
		return reject(ErrInvalid, "%s: coordinator epoch must not be 0", what)
	}
	if r.CoordinatorEpoch != v.Coordinator.Epoch {
		return reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
			what, r.CoordinatorEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
	}
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if s.Retired {
		return reject(ErrNotFound, "%s: the stream is retired (its bucket was dropped)", what)
	}
	if r.Start == s.Start {
		return Outcome{} // the same trim again, or nothing to trim
	}
	if r.Start < s.Start {
		return reject(ErrInvalid, "%s: the stream starts at offset %d already; start offsets only move forward", what, s.Start)
	}
	if r.Start > s.End {
		return reject(ErrInvalid, "%s: the stream's committed end is %d; a trim never passes it", what, s.End)
	}
	i, found := slices.BinarySearchFunc(s.Objects, r.Start, func(o StreamObject, start uint64) int {
		return cmp.Compare(o.Start, start)
	})
	if !found && r.Start != s.End {
		return reject(ErrInvalid, "%s: offset %d is inside an object; a trim removes whole objects", what, r.Start)
	}
	if b := v.Buckets[BucketID(r.Stream)]; b != nil {
		t := v.Tables[b.Table]
		if len(t.Spec.PrimaryKey) > 0 {
			// The changelog is the bucket's state: a tablet restores from a
			// retained KV snapshot and replays the changelog from its
			// offset. Retained snapshots only move forward (a new one is
			// never below the latest, and the oldest leaves first), so a
			// trim at or below the oldest stays valid for good.
			if len(b.Snapshots) == 0 {
				return reject(ErrInvalid, "%s: bucket %d of primary-key table %q has no KV snapshot; its changelog is its only copy and is never trimmed",
					what, b.ID, t.Spec.Name)
			}
			if oldest := b.Snapshots[0]; r.Start > oldest.LogOffset {
				return reject(ErrInvalid, "%s: the oldest retained KV snapshot of bucket %d (primary-key table %q) is snapshot %d at offset %d; the changelog from there on is needed to restore the bucket",
					what, b.ID, t.Spec.Name, oldest.ID, oldest.LogOffset)
			}
		}
		if t.Spec.Options["tiering"] != "off" {
			if tiered := t.Tiering.Offsets[b.ID]; r.Start > tiered {
				return reject(ErrInvalid, "%s: bucket %d of table %q is tiered to offset %d; untiered data is never trimmed",
					what, b.ID, t.Spec.Name, tiered)
			}
		}
	}
	if !found {
		i = len(s.Objects)
	}
	s.Objects = nilIfEmpty(slices.Clone(s.Objects[i:]))
	s.Start = r.Start
	return Outcome{}
}

func applyCommitWALTrim(v *View, r CommitWALTrim) Outcome {
	what := fmt.Sprintf("trim WAL of node %d at node epoch %d to seq %d", r.Node, r.NodeEpoch, r.TrimSeq)
	if r.Node == 0 || r.NodeEpoch == 0 {
		return reject(ErrInvalid, "%s: node and node epoch must not be 0", what)
	}
	n := v.Nodes[r.Node]
	if n == nil {
		return reject(ErrNotFound, "%s: node %d is not registered", what, r.Node)
	}
	if r.NodeEpoch > n.Epoch {
		return reject(ErrInvalid, "%s: node %d is at node epoch %d, no WAL exists at a later one", what, r.Node, n.Epoch)
	}
	if out := v.checkNodeEpoch(what+fmt.Sprintf(" by node %d", r.By), r.By, r.ByEpoch); out != nil {
		return *out
	}
	id := WALID{Node: r.Node, Epoch: r.NodeEpoch}
	current := v.WALTrims[id]
	if r.TrimSeq < current {
		return reject(ErrInvalid, "%s: the WAL is trimmed to seq %d already; trim points only move forward", what, current)
	}
	if r.TrimSeq > current {
		v.WALTrims[id] = r.TrimSeq
	}
	// Equal: the same trim again; a WAL never trimmed has trim point 0 and
	// no entry.
	return Outcome{}
}

func applyCommitKVSnapshot(v *View, r CommitKVSnapshot) Outcome {
	what := fmt.Sprintf("commit KV snapshot %d of bucket %d at offset %d", r.SnapshotID, r.Bucket, r.LogOffset)
	b := v.Buckets[r.Bucket]
	if b == nil {
		return reject(ErrNotFound, "%s: no such bucket", what)
	}
	if r.LeaderEpoch == 0 || r.Manifest == "" {
		return reject(ErrInvalid, "%s: leader epoch and manifest must be set", what)
	}
	if r.LeaderEpoch != b.LeaderEpoch {
		return reject(ErrStaleEpoch, "%s: record carries leader epoch %d, current is %d (node %d)",
			what, r.LeaderEpoch, b.LeaderEpoch, b.Leader)
	}
	snap := KVSnapshot{ID: r.SnapshotID, LeaderEpoch: r.LeaderEpoch, LogOffset: r.LogOffset, Manifest: r.Manifest}
	for _, s := range b.Snapshots {
		if s.ID == r.SnapshotID {
			if s == snap {
				// The same commit again, after a lost response.
				return Outcome{}
			}
			return reject(ErrExists, "%s: snapshot %d is committed already (leader epoch %d, offset %d, manifest %q)",
				what, s.ID, s.LeaderEpoch, s.LogOffset, s.Manifest)
		}
	}
	if n := len(b.Snapshots); n > 0 && r.LeaderEpoch == b.Snapshots[n-1].LeaderEpoch && r.SnapshotID <= b.Snapshots[n-1].ID {
		// Ids increase within a leader epoch (a tablet numbers its attempts);
		// an older attempt committed late would undo a newer snapshot.
		return reject(ErrInvalid, "%s: the latest snapshot of leader epoch %d is %d; snapshot ids only increase",
			what, r.LeaderEpoch, b.Snapshots[n-1].ID)
	}
	if n := len(b.Snapshots); n > 0 && r.LogOffset < b.Snapshots[n-1].LogOffset {
		return reject(ErrInvalid, "%s: the latest snapshot %d is at offset %d; snapshots only move forward",
			what, b.Snapshots[n-1].ID, b.Snapshots[n-1].LogOffset)
	}
	snapshots := append(slices.Clone(b.Snapshots), snap)
	if len(snapshots) > KVSnapshotsRetained {
		snapshots = slices.Clone(snapshots[len(snapshots)-KVSnapshotsRetained:])
	}
	b.Snapshots = snapshots
	return Outcome{}
}

func applyCommitTieringRound(v *View, r CommitTieringRound) Outcome {
	what := fmt.Sprintf("commit tiering round of table %d (lake snapshot %d)", r.Table, r.LakeSnapshotID)
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "%s: no such table", what)
	}
	if r.CoordinatorEpoch == 0 {
		return reject(ErrInvalid, "%s: coordinator epoch must not be 0", what)
	}
	if r.CoordinatorEpoch != v.Coordinator.Epoch {
		return reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
			what, r.CoordinatorEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
	}
	if len(r.Offsets) == 0 {
		return reject(ErrInvalid, "%s: no bucket offsets", what)
	}
	at := r.At.UTC()
	if _, err := at.MarshalJSON(); err != nil {
		return reject(ErrInvalid, "%s: time %v cannot be encoded", what, r.At)
	}
	same := r.LakeSnapshotID == t.Tiering.LakeSnapshotID && r.LakeSequence == t.Tiering.LakeSequence
	for _, id := range slices.Sorted(maps.Keys(r.Offsets)) {
		b := v.Buckets[id]
		if b == nil {
			return reject(ErrNotFound, "%s: no bucket %d", what, id)
		}
		if b.Table != t.ID {
			return reject(ErrInvalid, "%s: bucket %d belongs to table %d", what, id, b.Table)
		}
		previous, ok := t.Tiering.Offsets[id]
		if r.Offsets[id] < previous {
			return reject(ErrInvalid, "%s: bucket %d is tiered to offset %d already, the round says %d; offsets only move forward",
				what, id, previous, r.Offsets[id])
		}
		same = same && ok && r.Offsets[id] == previous
	}
	if same {
		// The same round again, after a lost response.
		return Outcome{}
	}
	if r.LakeSequence <= t.Tiering.LakeSequence {
		return reject(ErrInvalid, "%s: the table's lake is at sequence number %d (snapshot %d) already, the round says %d; lake sequence numbers only increase",
			what, t.Tiering.LakeSequence, t.Tiering.LakeSnapshotID, r.LakeSequence)
	}
	offsets := maps.Clone(t.Tiering.Offsets)
	if offsets == nil {
		offsets = map[BucketID]uint64{}
	}
	maps.Copy(offsets, r.Offsets)
	t.Tiering = TieringState{Offsets: offsets, LakeSnapshotID: r.LakeSnapshotID, LakeSequence: r.LakeSequence, At: at}
	return Outcome{}
}

// TableByName returns the table named name (names compare exactly; sqlfront
// folds identifiers before they get here).
func (v *View) TableByName(name string) (*Table, bool) {
	for _, t := range v.Tables {
		if t.Spec.Name == name {
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
		NextID:      v.NextID,
		NextRoleID:  v.NextRoleID,
		ClusterKey:  slices.Clone(v.ClusterKey),
	}
	for id, r := range v.Roles {
		c.Roles[id] = r.clone()
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

// checkInvariants returns an error naming the first broken invariant of a
// view that Apply maintains. DecodeView runs it on every decoded snapshot;
// tests run it after every record.
func (v *View) checkInvariants() error {
	if v.Nodes == nil || v.Tables == nil || v.Buckets == nil || v.Streams == nil || v.WALTrims == nil || v.Groups == nil || v.Roles == nil {
		return fmt.Errorf("a map of the view is nil")
	}
	if v.NextID == 0 {
		return fmt.Errorf("next id is 0")
	}
	if err := v.checkRoles(); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(v.Nodes)) {
		n := v.Nodes[id]
		if n == nil || n.ID != id || id == 0 || n.Epoch == 0 {
			return fmt.Errorf("node %d: bad entry %+v", id, n)
		}
	}
	if c := v.Coordinator; (c.Epoch == 0) != (c.Node == 0) || (c.Node != 0 && v.Nodes[c.Node] == nil) {
		return fmt.Errorf("coordinator %+v: epoch and node must be both 0 or a registered node", c)
	}
	owner := map[BucketID]string{}
	claim := func(what string, table TableID, partition PartitionID, ids []BucketID, want int) error {
		if len(ids) != want {
			return fmt.Errorf("%s has %d buckets, its spec says %d", what, len(ids), want)
		}
		for i, id := range ids {
			b := v.Buckets[id]
			if b == nil {
				return fmt.Errorf("%s: bucket %d is not in the view", what, id)
			}
			if other, ok := owner[id]; ok {
				return fmt.Errorf("bucket %d belongs to %s and %s", id, other, what)
			}
			owner[id] = what
			if b.Table != table || b.Partition != partition || b.Index != i {
				return fmt.Errorf("%s: bucket %d says table %d partition %d index %d, want %d %d %d",
					what, id, b.Table, b.Partition, b.Index, table, partition, i)
			}
		}
		return nil
	}
	names := map[string]TableID{}
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		t := v.Tables[id]
		if t == nil || t.ID != id || id == 0 || uint64(id) >= v.NextID {
			return fmt.Errorf("table %d: bad entry or id not below next id %d", id, v.NextID)
		}
		if spec, err := normalizeTableSpec(t.Spec); err != nil {
			return fmt.Errorf("table %d: %w", id, err)
		} else if !reflect.DeepEqual(spec, t.Spec) {
			return fmt.Errorf("table %d: spec %+v is not in normal form %+v", id, t.Spec, spec)
		}
		for i, c := range t.Spec.Columns {
			if i > 0 && t.Spec.Columns[i-1].Added && !c.Added {
				return fmt.Errorf("table %d: column %q follows an added column", id, c.Name)
			}
		}
		if other, ok := names[t.Spec.Name]; ok {
			return fmt.Errorf("tables %d and %d are both named %q", other, id, t.Spec.Name)
		}
		names[t.Spec.Name] = id
		what := fmt.Sprintf("table %d", id)
		if t.Spec.PartitionBy == "" {
			if len(t.Partitions) != 0 {
				return fmt.Errorf("%s is not partitioned but has partitions", what)
			}
			if err := claim(what, id, 0, t.Buckets, t.Spec.Buckets); err != nil {
				return err
			}
		} else {
			if t.Buckets != nil {
				return fmt.Errorf("%s is partitioned but has table buckets %v", what, t.Buckets)
			}
			if t.Partitions != nil && len(t.Partitions) == 0 {
				return fmt.Errorf("%s: empty partition map is not nil", what)
			}
			values := map[string]bool{}
			for _, pid := range slices.Sorted(maps.Keys(t.Partitions)) {
				p := t.Partitions[pid]
				if p == nil || p.ID != pid || pid == 0 || uint64(pid) >= v.NextID {
					return fmt.Errorf("%s partition %d: bad entry or id not below next id %d", what, pid, v.NextID)
				}
				if values[p.Value] {
					return fmt.Errorf("%s: two partitions have value %q", what, p.Value)
				}
				values[p.Value] = true
				if err := claim(fmt.Sprintf("%s partition %d", what, pid), id, pid, p.Buckets, t.Spec.Buckets); err != nil {
					return err
				}
			}
		}
		if t.Tiering.Offsets != nil && len(t.Tiering.Offsets) == 0 {
			return fmt.Errorf("%s: empty tiering offsets map is not nil", what)
		}
		for _, bid := range slices.Sorted(maps.Keys(t.Tiering.Offsets)) {
			if b := v.Buckets[bid]; b == nil || b.Table != id {
				return fmt.Errorf("%s: tiering offset for bucket %d, which is not the table's", what, bid)
			}
		}
		if t.Tiering.At.Location() != time.UTC {
			return fmt.Errorf("%s: tiering time %v is not in UTC", what, t.Tiering.At)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Buckets)) {
		b := v.Buckets[id]
		if b == nil || b.ID != id || id == 0 || uint64(id) >= v.NextID {
			return fmt.Errorf("bucket %d: bad entry or id not below next id %d", id, v.NextID)
		}
		if _, ok := owner[id]; !ok {
			return fmt.Errorf("bucket %d belongs to no table or partition", id)
		}
		if (b.Leader == 0) != (b.LeaderEpoch == 0) || (b.Leader != 0 && v.Nodes[b.Leader] == nil) {
			return fmt.Errorf("bucket %d: leader %d at leader epoch %d", id, b.Leader, b.LeaderEpoch)
		}
		if len(b.Snapshots) > KVSnapshotsRetained || (b.Snapshots != nil && len(b.Snapshots) == 0) {
			return fmt.Errorf("bucket %d: %d snapshots retained, want at most %d (nil when none)", id, len(b.Snapshots), KVSnapshotsRetained)
		}
		for i, s := range b.Snapshots {
			if s.LeaderEpoch == 0 || s.LeaderEpoch > b.LeaderEpoch || s.Manifest == "" ||
				(i > 0 && (s.LogOffset < b.Snapshots[i-1].LogOffset || s.ID == b.Snapshots[i-1].ID)) {
				return fmt.Errorf("bucket %d: snapshot %d %+v out of order or malformed", id, i, s)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Streams)) {
		s := v.Streams[id]
		if s == nil || s.ID != id || id == 0 || s.Epoch == 0 {
			return fmt.Errorf("stream %d: bad entry %+v", id, s)
		}
		if n := v.Nodes[s.Node]; n == nil || s.NodeEpoch == 0 || s.NodeEpoch > n.Epoch {
			return fmt.Errorf("stream %d: holder node %d at node epoch %d is not registered at that epoch", id, s.Node, s.NodeEpoch)
		}
		if s.Objects != nil && len(s.Objects) == 0 {
			return fmt.Errorf("stream %d: empty object list is not nil", id)
		}
		if s.Start > s.End || (len(s.Objects) == 0 && s.Start != s.End) {
			return fmt.Errorf("stream %d: start %d, end %d, %d objects", id, s.Start, s.End, len(s.Objects))
		}
		if b := v.Buckets[BucketID(id)]; b != nil && !s.Retired && s.Start > 0 {
			if t := v.Tables[b.Table]; t != nil && len(t.Spec.PrimaryKey) > 0 &&
				(len(b.Snapshots) == 0 || s.Start > b.Snapshots[0].LogOffset) {
				return fmt.Errorf("stream %d of primary-key bucket %d starts at %d, past its oldest retained KV snapshot %+v", id, id, s.Start, b.Snapshots)
			}
		}
		if s.Retired && !s.Open {
			return fmt.Errorf("stream %d: retired but closed; it should have left the view", id)
		}
		if b := v.Buckets[BucketID(id)]; b != nil && s.Retired {
			return fmt.Errorf("stream %d: retired, but its bucket is in the view", id)
		}
		end := s.Start
		for i, o := range s.Objects {
			if o.Start != end || o.End <= o.Start || o.Key == "" || o.Size < 0 {
				return fmt.Errorf("stream %d: object %d %+v does not continue offset %d", id, i, o, end)
			}
			if o.At.Location() != time.UTC {
				return fmt.Errorf("stream %d: object %d time %v is not in UTC", id, i, o.At)
			}
			end = o.End
		}
		if end != s.End {
			return fmt.Errorf("stream %d: objects end at %d, committed end is %d", id, end, s.End)
		}
	}
	for _, w := range slices.SortedFunc(maps.Keys(v.WALTrims), compareWALID) {
		n := v.Nodes[w.Node]
		if n == nil || w.Epoch == 0 || w.Epoch > n.Epoch || v.WALTrims[w] == 0 {
			return fmt.Errorf("WAL trim of node %d epoch %d to %d: no such node epoch, or trim point 0", w.Node, w.Epoch, v.WALTrims[w])
		}
	}
	return v.checkGroupInvariants()
}

func compareWALID(a, b WALID) int {
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Epoch, b.Epoch))
}
