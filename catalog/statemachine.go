package catalog

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
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
	Table     TableID     // CreateTable, CreateView (the view's id)
	Schema    SchemaID    // CreateSchema
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
		Views:    map[TableID]*SQLView{},
		Schemas:  map[SchemaID]*Schema{},
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
	if v == nil || v.Nodes == nil || v.Tables == nil || v.Buckets == nil || v.Streams == nil || v.WALTrims == nil || v.Groups == nil || v.Roles == nil || v.Views == nil || v.Schemas == nil {
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
	case RenameTable:
		return applyRenameTable(v, r)
	case CreateView:
		return applyCreateView(v, r)
	case DropView:
		return applyDropView(v, r)
	case CreateSchema:
		return applyCreateSchema(v, r)
	case DropSchema:
		return applyDropSchema(v, r)
	case RenameSchema:
		return applyRenameSchema(v, r)
	case SetRelationSchema:
		return applySetRelationSchema(v, r)
	case RenameView:
		return applyRenameView(v, r)
	case RenameColumn:
		return applyRenameColumn(v, r)
	case SetColumnNotNull:
		return applySetColumnNotNull(v, r)
	case SetColumnType:
		return applySetColumnType(v, r)
	case DropColumn:
		return applyDropColumn(v, r)
	case RestoreColumn:
		return applyRestoreColumn(v, r)
	case SetSequence:
		return applySetSequence(v, r)
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
		AllocateSequence, AddColumn, TruncateTable, SetColumnDefault, RenameTable, CommitGroupOffsets, DeleteGroupOffsets,
		CreateRole, AlterRole, DropRole, GrantRole, GrantTable, SetTableOwner, SetClusterKey,
		CreateView, DropView, RenameView, RenameColumn, SetColumnNotNull, SetColumnType, DropColumn, RestoreColumn, SetSequence,
		CreateSchema, DropSchema, RenameSchema, SetRelationSchema:
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
