package catalog

import (
	"fmt"
	"maps"
	"slices"
)

func applyCreateTable(v *View, r CreateTable) Outcome {
	spec, err := normalizeTableSpec(r.Spec)
	for _, c := range spec.Columns {
		if err == nil && (c.Added || c.Missing != nil) {
			err = fmt.Errorf("column %q: only AddColumn adds a column with a missing value: %w", c.Name, ErrInvalid)
		}
	}
	if err == nil && spec.Dropped != nil {
		err = fmt.Errorf("only DropColumn drops a column: %w", ErrInvalid)
	}
	if err != nil {
		return Outcome{Err: fmt.Errorf("create table %q: %w", r.Spec.Name, err)}
	}
	if _, ok := v.SchemaName(spec.Schema); !ok {
		return reject(ErrNotFound, "create table %q: schema %d: no such schema", spec.Name, spec.Schema)
	}
	if t, ok := v.TableByName(spec.Schema, spec.Name); ok {
		return reject(ErrExists, "create table %q: table %d has that name", spec.Name, t.ID)
	}
	if sv, ok := v.ViewByName(spec.Schema, spec.Name); ok {
		return reject(ErrExists, "create table %q: view %d has that name", spec.Name, sv.ID)
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
		Schema:      spec.Schema,
		Columns:     slices.Clone(spec.Columns),
		PrimaryKey:  slices.Clone(spec.PrimaryKey),
		PartitionBy: spec.PartitionBy,
		Buckets:     spec.Buckets,
		BucketKey:   slices.Clone(spec.BucketKey),
		Options:     maps.Clone(spec.Options),
		Dropped:     slices.Clone(spec.Dropped),
	}
	if len(out.Dropped) == 0 {
		out.Dropped = nil
	}
	for i, d := range out.Dropped {
		if d.Position < 0 || d.Position >= len(out.Columns)+len(out.Dropped) || i > 0 && d.Position <= out.Dropped[i-1].Position {
			return out, fmt.Errorf("dropped column %q at position %d: out of order or out of range: %w", d.Column.Name, d.Position, ErrInvalid)
		}
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
	if readers := v.ViewsReading(t.ID); readers != nil {
		return reject(ErrInUse, "drop table %q: view %q reads it", t.Spec.Name, v.Views[readers[0]].Spec.Name)
	}
	v.retireBuckets(t)
	delete(v.Tables, t.ID)
	// A new table of the same name is a new topic: no group has consumed it.
	v.dropTopicOffsets(v.TopicName(t), 0)
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
