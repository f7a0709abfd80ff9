package catalog

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// The encodings of records and view snapshots. docs/format/metadata-log.md is
// the specification; keep the two in step.
//
// A record is a 3-byte header and a JSON body:
//
//	+---------+-----------------+---------------------------+
//	| version | kind            | body: one JSON object     |
//	| 1 byte  | uint16 big end. | (the record's json tags)  |
//	+---------+-----------------+---------------------------+
//
// A view snapshot is the 4 bytes "MKVW", a version byte and a JSON body.
// Decoders reject unknown versions and kinds and ignore unknown JSON fields,
// so a field can be added to a record without a new version; its zero value
// must mean what the record meant before the field existed.
const (
	recordVersion1    byte = 1
	recordHeaderLen        = 3
	viewVersion1      byte = 1
	viewHeaderLen          = 5
	viewMagic              = "MKVW"
	maxKnownKind           = KindSetRelationSchema
	recordDecodeError      = "decode record"
	viewDecodeError        = "decode view"
)

var kindNames = map[Kind]string{
	KindRegisterNode:         "RegisterNode",
	KindRegisterCoordinator:  "RegisterCoordinator",
	KindCreateTable:          "CreateTable",
	KindDropTable:            "DropTable",
	KindCreatePartition:      "CreatePartition",
	KindDropPartition:        "DropPartition",
	KindLeadBucket:           "LeadBucket",
	KindOpenStream:           "OpenStream",
	KindCloseStream:          "CloseStream",
	KindCommitStreamObjects:  "CommitStreamObjects",
	KindCommitWALTrim:        "CommitWALTrim",
	KindCommitKVSnapshot:     "CommitKVSnapshot",
	KindCommitTieringRound:   "CommitTieringRound",
	KindCompactStreamObjects: "CompactStreamObjects",
	KindTrimStream:           "TrimStream",
	KindAllocateSequence:     "AllocateSequence",
	KindAddColumn:            "AddColumn",
	KindTruncateTable:        "TruncateTable",
	KindSetColumnDefault:     "SetColumnDefault",
	KindCommitGroupOffsets:   "CommitGroupOffsets",
	KindDeleteGroupOffsets:   "DeleteGroupOffsets",
	KindCreateRole:           "CreateRole",
	KindAlterRole:            "AlterRole",
	KindDropRole:             "DropRole",
	KindGrantRole:            "GrantRole",
	KindGrantTable:           "GrantTable",
	KindSetTableOwner:        "SetTableOwner",
	KindSetClusterKey:        "SetClusterKey",
	KindRenameTable:          "RenameTable",
	KindCreateView:           "CreateView",
	KindDropView:             "DropView",
	KindRenameView:           "RenameView",
	KindRenameColumn:         "RenameColumn",
	KindSetColumnNotNull:     "SetColumnNotNull",
	KindSetColumnType:        "SetColumnType",
	KindDropColumn:           "DropColumn",
	KindRestoreColumn:        "RestoreColumn",
	KindSetSequence:          "SetSequence",
	KindCreateSchema:         "CreateSchema",
	KindDropSchema:           "DropSchema",
	KindRenameSchema:         "RenameSchema",
	KindSetRelationSchema:    "SetRelationSchema",
}

// String returns the record type's name, or "Kind(n)" for an unknown kind.
func (k Kind) String() string {
	if name, ok := kindNames[k]; ok {
		return name
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// EncodeRecord returns the log encoding of rec (a record value or a pointer to
// one). It fails for a record type of another package and for a record that
// would not decode to an equal record (a string that is not valid UTF-8, a
// time outside years 0-9999).
func EncodeRecord(rec Record) ([]byte, error) {
	rec, err := recordValue(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	if err := checkRecordText(rec); err != nil {
		return nil, fmt.Errorf("encode %v record: %w", rec.Kind(), err)
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode %v record: %w", rec.Kind(), err)
	}
	buf := make([]byte, recordHeaderLen, recordHeaderLen+len(body))
	buf[0] = recordVersion1
	binary.BigEndian.PutUint16(buf[1:], uint16(rec.Kind()))
	return append(buf, body...), nil
}

// DecodeRecord decodes a record written by EncodeRecord and returns it as a
// value (RegisterNode, not *RegisterNode). It returns an error wrapping
// ErrInvalid, and never panics, for data of an unknown version or kind, a
// body that is not a JSON object of the kind's fields, or trailing bytes.
// Unknown JSON fields are ignored.
func DecodeRecord(data []byte) (Record, error) {
	if len(data) < recordHeaderLen {
		return nil, fmt.Errorf("%s: %d bytes, shorter than the %d-byte header: %w", recordDecodeError, len(data), recordHeaderLen, ErrInvalid)
	}
	if data[0] != recordVersion1 {
		return nil, fmt.Errorf("%s: unknown format version %d (this build reads %d): %w", recordDecodeError, data[0], recordVersion1, ErrInvalid)
	}
	kind := Kind(binary.BigEndian.Uint16(data[1:]))
	body := data[recordHeaderLen:]
	switch kind {
	case KindRegisterNode:
		return decodeRecordBody[RegisterNode](kind, body)
	case KindRegisterCoordinator:
		return decodeRecordBody[RegisterCoordinator](kind, body)
	case KindCreateTable:
		return decodeRecordBody[CreateTable](kind, body)
	case KindDropTable:
		return decodeRecordBody[DropTable](kind, body)
	case KindCreatePartition:
		return decodeRecordBody[CreatePartition](kind, body)
	case KindDropPartition:
		return decodeRecordBody[DropPartition](kind, body)
	case KindLeadBucket:
		return decodeRecordBody[LeadBucket](kind, body)
	case KindOpenStream:
		return decodeRecordBody[OpenStream](kind, body)
	case KindCloseStream:
		return decodeRecordBody[CloseStream](kind, body)
	case KindCommitStreamObjects:
		return decodeRecordBody[CommitStreamObjects](kind, body)
	case KindCommitWALTrim:
		return decodeRecordBody[CommitWALTrim](kind, body)
	case KindCommitKVSnapshot:
		return decodeRecordBody[CommitKVSnapshot](kind, body)
	case KindCommitTieringRound:
		return decodeRecordBody[CommitTieringRound](kind, body)
	case KindCompactStreamObjects:
		return decodeRecordBody[CompactStreamObjects](kind, body)
	case KindTrimStream:
		return decodeRecordBody[TrimStream](kind, body)
	case KindAllocateSequence:
		return decodeRecordBody[AllocateSequence](kind, body)
	case KindAddColumn:
		return decodeRecordBody[AddColumn](kind, body)
	case KindTruncateTable:
		return decodeRecordBody[TruncateTable](kind, body)
	case KindSetColumnDefault:
		return decodeRecordBody[SetColumnDefault](kind, body)
	case KindRenameTable:
		return decodeRecordBody[RenameTable](kind, body)
	case KindCommitGroupOffsets:
		return decodeRecordBody[CommitGroupOffsets](kind, body)
	case KindDeleteGroupOffsets:
		return decodeRecordBody[DeleteGroupOffsets](kind, body)
	case KindCreateRole:
		return decodeRecordBody[CreateRole](kind, body)
	case KindAlterRole:
		return decodeRecordBody[AlterRole](kind, body)
	case KindDropRole:
		return decodeRecordBody[DropRole](kind, body)
	case KindGrantRole:
		return decodeRecordBody[GrantRole](kind, body)
	case KindGrantTable:
		return decodeRecordBody[GrantTable](kind, body)
	case KindSetTableOwner:
		return decodeRecordBody[SetTableOwner](kind, body)
	case KindSetClusterKey:
		return decodeRecordBody[SetClusterKey](kind, body)
	case KindCreateView:
		return decodeRecordBody[CreateView](kind, body)
	case KindDropView:
		return decodeRecordBody[DropView](kind, body)
	case KindRenameView:
		return decodeRecordBody[RenameView](kind, body)
	case KindRenameColumn:
		return decodeRecordBody[RenameColumn](kind, body)
	case KindSetColumnNotNull:
		return decodeRecordBody[SetColumnNotNull](kind, body)
	case KindSetColumnType:
		return decodeRecordBody[SetColumnType](kind, body)
	case KindDropColumn:
		return decodeRecordBody[DropColumn](kind, body)
	case KindRestoreColumn:
		return decodeRecordBody[RestoreColumn](kind, body)
	case KindSetSequence:
		return decodeRecordBody[SetSequence](kind, body)
	case KindCreateSchema:
		return decodeRecordBody[CreateSchema](kind, body)
	case KindDropSchema:
		return decodeRecordBody[DropSchema](kind, body)
	case KindRenameSchema:
		return decodeRecordBody[RenameSchema](kind, body)
	case KindSetRelationSchema:
		return decodeRecordBody[SetRelationSchema](kind, body)
	}
	return nil, fmt.Errorf("%s: unknown kind %d (this build knows 1..%d; written by a newer mink?): %w",
		recordDecodeError, kind, maxKnownKind, ErrInvalid)
}

func decodeRecordBody[R Record](kind Kind, body []byte) (Record, error) {
	var rec R
	if err := unmarshalObject(body, &rec); err != nil {
		return nil, fmt.Errorf("%s: %v body: %w: %w", recordDecodeError, kind, err, ErrInvalid)
	}
	return rec, nil
}

// unmarshalObject decodes body, which must be exactly one JSON object, into v.
// json.Unmarshal alone would accept "null" and leave v zero.
func unmarshalObject(body []byte, v any) error {
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	return json.Unmarshal(body, v)
}

// viewBody is the JSON body of a view snapshot. The view's maps are lists
// sorted by id (WALTrims has a struct key, which JSON objects cannot have).
type viewBody struct {
	Index       uint64      `json:"index"`
	NextID      uint64      `json:"next_id"`
	Coordinator Coordinator `json:"coordinator"`
	Nodes       []*Node     `json:"nodes,omitempty"`
	Tables      []*Table    `json:"tables,omitempty"`
	Buckets     []*Bucket   `json:"buckets,omitempty"`
	Streams     []*Stream   `json:"streams,omitempty"`
	WALTrims    []walTrim   `json:"wal_trims,omitempty"`
	Groups      []*Group    `json:"groups,omitempty"`
	Roles       []*Role     `json:"roles,omitempty"`
	Views       []*SQLView  `json:"views,omitempty"`
	Schemas     []*Schema   `json:"schemas,omitempty"`
	NextRoleID  RoleID      `json:"next_role_id,omitempty"`
	ClusterKey  []byte      `json:"cluster_key,omitempty"`
}

type walTrim struct {
	Node    NodeID `json:"node"`
	Epoch   uint64 `json:"epoch"`
	TrimSeq uint64 `json:"trim_seq"`
}

// EncodeView returns the snapshot encoding of v. Equal views encode to equal
// bytes: lists are sorted by id and JSON objects by key.
func EncodeView(v *View) ([]byte, error) {
	body := viewBody{Index: v.Index, NextID: v.NextID, Coordinator: v.Coordinator, NextRoleID: v.NextRoleID, ClusterKey: v.ClusterKey}
	for _, id := range slices.Sorted(maps.Keys(v.Roles)) {
		body.Roles = append(body.Roles, v.Roles[id])
	}
	for _, id := range slices.Sorted(maps.Keys(v.Views)) {
		body.Views = append(body.Views, v.Views[id])
	}
	for _, id := range slices.Sorted(maps.Keys(v.Schemas)) {
		body.Schemas = append(body.Schemas, v.Schemas[id])
	}
	for _, id := range slices.Sorted(maps.Keys(v.Nodes)) {
		body.Nodes = append(body.Nodes, v.Nodes[id])
	}
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		body.Tables = append(body.Tables, v.Tables[id])
	}
	for _, id := range slices.Sorted(maps.Keys(v.Buckets)) {
		body.Buckets = append(body.Buckets, v.Buckets[id])
	}
	for _, id := range slices.Sorted(maps.Keys(v.Streams)) {
		body.Streams = append(body.Streams, v.Streams[id])
	}
	for _, w := range slices.SortedFunc(maps.Keys(v.WALTrims), compareWALID) {
		body.WALTrims = append(body.WALTrims, walTrim{Node: w.Node, Epoch: w.Epoch, TrimSeq: v.WALTrims[w]})
	}
	for _, name := range slices.Sorted(maps.Keys(v.Groups)) {
		body.Groups = append(body.Groups, v.Groups[name])
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode view at index %d: %w", v.Index, err)
	}
	buf := make([]byte, 0, viewHeaderLen+len(data))
	buf = append(buf, viewMagic...)
	buf = append(buf, viewVersion1)
	return append(buf, data...), nil
}

// DecodeView decodes a snapshot written by EncodeView. It returns an error
// wrapping ErrInvalid, and never panics, for data of an unknown version, a
// malformed body, or a view that breaks an invariant Apply maintains
// (duplicate ids, a bucket without its table, stream objects with a gap, …).
// Unknown JSON fields are ignored.
func DecodeView(data []byte) (*View, error) {
	if len(data) < viewHeaderLen || string(data[:len(viewMagic)]) != viewMagic {
		return nil, fmt.Errorf("%s: no %q header: %w", viewDecodeError, viewMagic, ErrInvalid)
	}
	if data[len(viewMagic)] != viewVersion1 {
		return nil, fmt.Errorf("%s: unknown format version %d (this build reads %d): %w",
			viewDecodeError, data[len(viewMagic)], viewVersion1, ErrInvalid)
	}
	var body viewBody
	if err := unmarshalObject(data[viewHeaderLen:], &body); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", viewDecodeError, err, ErrInvalid)
	}
	v := NewView()
	v.Index, v.NextID, v.Coordinator = body.Index, body.NextID, body.Coordinator
	v.NextRoleID, v.ClusterKey = body.NextRoleID, body.ClusterKey
	if err := fillMap(v.Roles, "role", body.Roles, func(r *Role) RoleID { return r.ID }); err != nil {
		return nil, err
	}
	if err := fillMap(v.Views, "view", body.Views, func(sv *SQLView) TableID { return sv.ID }); err != nil {
		return nil, err
	}
	if err := fillMap(v.Schemas, "schema", body.Schemas, func(s *Schema) SchemaID { return s.ID }); err != nil {
		return nil, err
	}
	if err := fillMap(v.Nodes, "node", body.Nodes, func(n *Node) NodeID { return n.ID }); err != nil {
		return nil, err
	}
	if err := fillMap(v.Tables, "table", body.Tables, func(t *Table) TableID { return t.ID }); err != nil {
		return nil, err
	}
	if err := fillMap(v.Buckets, "bucket", body.Buckets, func(b *Bucket) BucketID { return b.ID }); err != nil {
		return nil, err
	}
	if err := fillMap(v.Streams, "stream", body.Streams, func(s *Stream) StreamID { return s.ID }); err != nil {
		return nil, err
	}
	for _, w := range body.WALTrims {
		id := WALID{Node: w.Node, Epoch: w.Epoch}
		if _, dup := v.WALTrims[id]; dup {
			return nil, fmt.Errorf("%s: two trim points for the WAL of node %d epoch %d: %w", viewDecodeError, w.Node, w.Epoch, ErrInvalid)
		}
		v.WALTrims[id] = w.TrimSeq
	}
	if err := fillMap(v.Groups, "group", body.Groups, func(g *Group) string { return g.Name }); err != nil {
		return nil, err
	}
	normalizeDecodedView(v)
	if err := v.checkInvariants(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", viewDecodeError, err, ErrInvalid)
	}
	return v, nil
}

func fillMap[K cmp.Ordered, V any](m map[K]*V, what string, list []*V, id func(*V) K) error {
	for _, e := range list {
		if e == nil {
			return fmt.Errorf("%s: null %s entry: %w", viewDecodeError, what, ErrInvalid)
		}
		k := id(e)
		if _, dup := m[k]; dup {
			return fmt.Errorf("%s: two %s entries with id %v: %w", viewDecodeError, what, k, ErrInvalid)
		}
		m[k] = e
	}
	return nil
}

// normalizeDecodedView brings a decoded view into the form Apply keeps: empty
// lists and maps nil, times in UTC. A snapshot written by EncodeView is in that
// form already; this makes a hand-written or future one compare equal.
func normalizeDecodedView(v *View) {
	for _, t := range v.Tables {
		t.Spec.Columns = nilIfEmpty(t.Spec.Columns)
		t.Spec.PrimaryKey = nilIfEmpty(t.Spec.PrimaryKey)
		t.Spec.BucketKey = nilIfEmpty(t.Spec.BucketKey)
		if len(t.Spec.Options) == 0 {
			t.Spec.Options = nil
		}
		t.Buckets = nilIfEmpty(t.Buckets)
		if len(t.Partitions) == 0 {
			t.Partitions = nil
		}
		for _, p := range t.Partitions {
			if p != nil {
				p.Buckets = nilIfEmpty(p.Buckets)
			}
		}
		if len(t.Tiering.Offsets) == 0 {
			t.Tiering.Offsets = nil
		}
		t.Tiering.At = t.Tiering.At.UTC()
	}
	for _, sv := range v.Views {
		sv.Spec.Columns = nilIfEmpty(sv.Spec.Columns)
		sv.Spec.Relations = nilIfEmpty(sv.Spec.Relations)
		sv.ACL = nilIfEmpty(sv.ACL)
	}
	for _, b := range v.Buckets {
		b.Snapshots = nilIfEmpty(b.Snapshots)
	}
	for _, s := range v.Streams {
		s.Objects = nilIfEmpty(s.Objects)
		for i := range s.Objects {
			s.Objects[i].At = s.Objects[i].At.UTC()
		}
	}
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
