package catalog

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// checkInvariants returns an error naming the first broken invariant of a
// view that Apply maintains. DecodeView runs it on every decoded snapshot;
// tests run it after every record.
func (v *View) checkInvariants() error {
	if v.Nodes == nil || v.Tables == nil || v.Buckets == nil || v.Streams == nil || v.WALTrims == nil || v.Groups == nil || v.Roles == nil || v.Views == nil || v.Schemas == nil {
		return fmt.Errorf("a map of the view is nil")
	}
	if v.NextID == 0 {
		return fmt.Errorf("next id is 0")
	}
	if err := v.checkRoles(); err != nil {
		return err
	}
	if err := v.checkViews(); err != nil {
		return err
	}
	if err := v.checkSchemas(); err != nil {
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
	type qualified struct {
		schema SchemaID
		name   string
	}
	names := map[qualified]TableID{}
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
		if other, ok := names[qualified{t.Spec.Schema, t.Spec.Name}]; ok {
			return fmt.Errorf("tables %d and %d are both named %q", other, id, t.Spec.Name)
		}
		names[qualified{t.Spec.Schema, t.Spec.Name}] = id
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
