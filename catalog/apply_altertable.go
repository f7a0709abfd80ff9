package catalog

import (
	"maps"
	"slices"
)

func applyAddColumn(v *View, r AddColumn) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "add column to table %d: no such table", r.Table)
	}
	c := r.Column
	switch {
	case c.Name == "" || c.Type == "":
		return reject(ErrInvalid, "add column to %q: a column needs a name and a type", t.Spec.Name)
	case c.Sequence != "":
		return reject(ErrInvalid, "add column %q to %q: an added column cannot have a sequence", c.Name, t.Spec.Name)
	case slices.ContainsFunc(t.Spec.Columns, func(o Column) bool { return o.Name == c.Name }):
		return reject(ErrInvalid, "add column %q to %q: the table has a column of that name", c.Name, t.Spec.Name)
	}
	c.Added = true
	if c.Missing != nil {
		m := *c.Missing
		c.Missing = &m
	}
	// A new slice: views handed out earlier share the old one.
	t.Spec.Columns = append(slices.Clip(t.Spec.Columns), c)
	return Outcome{}
}

func applyTruncateTable(v *View, r TruncateTable) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "truncate table %d: no such table", r.Table)
	}
	v.retireBuckets(t)
	t.Partitions = nil
	t.Tiering.Offsets = nil
	// The new buckets' streams start at offset 0 again: committed offsets
	// would point past their end.
	v.dropTopicOffsets(t.Spec.Name, 0)
	if r.RestartSequences {
		t.Sequences = nil
		t.SequenceEpoch++
	}
	if t.Spec.PartitionBy != "" {
		t.Buckets = nil
		return Outcome{}
	}
	t.Buckets = v.createBuckets(t.ID, 0, t.Spec.Buckets)
	return Outcome{Buckets: slices.Clone(t.Buckets)}
}

func applySetColumnDefault(v *View, r SetColumnDefault) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "set default of table %d: no such table", r.Table)
	}
	i := slices.IndexFunc(t.Spec.Columns, func(c Column) bool { return c.Name == r.Column })
	if i < 0 {
		return reject(ErrNotFound, "set default of %q.%q: no such column", t.Spec.Name, r.Column)
	}
	if t.Spec.Columns[i].Sequence != "" {
		return reject(ErrInvalid, "set default of %q.%q: the column takes its values from a sequence", t.Spec.Name, r.Column)
	}
	// A new slice: views handed out earlier share the old one.
	t.Spec.Columns = slices.Clone(t.Spec.Columns)
	t.Spec.Columns[i].Default = r.Default
	return Outcome{}
}

func applyRenameTable(v *View, r RenameTable) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "rename table %d: no such table", r.Table)
	}
	old := t.Spec.Name
	switch {
	case r.Name == "":
		return reject(ErrInvalid, "rename %q: empty name", old)
	case r.Name == old:
		return Outcome{}
	}
	if other, ok := v.relationNamed(t.Spec.Schema, r.Name); ok {
		return reject(ErrExists, "rename %q to %q: relation %d has that name", old, r.Name, other)
	}
	oldTopic := v.TopicName(t)
	t.Spec.Name = r.Name
	v.renameTopic(oldTopic, v.TopicName(t))
	return Outcome{}
}

func applyRenameColumn(v *View, r RenameColumn) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "rename column of table %d: no such table", r.Table)
	}
	i := slices.IndexFunc(t.Spec.Columns, func(c Column) bool { return c.Name == r.From })
	switch {
	case i < 0:
		return reject(ErrNotFound, "rename column %q of %q: no such column", r.From, t.Spec.Name)
	case r.To == "":
		return reject(ErrInvalid, "rename column %q of %q: empty name", r.From, t.Spec.Name)
	case r.To == r.From:
		return Outcome{}
	case slices.ContainsFunc(t.Spec.Columns, func(c Column) bool { return c.Name == r.To }):
		return reject(ErrExists, "rename column %q of %q to %q: the table has a column of that name", r.From, t.Spec.Name, r.To)
	}
	// New slices and maps: views handed out earlier share the old ones.
	t.Spec.Columns = slices.Clone(t.Spec.Columns)
	t.Spec.Columns[i].Name = r.To
	rename := func(names []string) []string {
		out := slices.Clone(names)
		for j, n := range out {
			if n == r.From {
				out[j] = r.To
			}
		}
		return out
	}
	t.Spec.PrimaryKey = rename(t.Spec.PrimaryKey)
	t.Spec.BucketKey = rename(t.Spec.BucketKey)
	if t.Spec.PartitionBy == r.From {
		t.Spec.PartitionBy = r.To
	}
	if last, ok := t.Sequences[r.From]; ok {
		seqs := make(map[string]int64, len(t.Sequences))
		for k, n := range t.Sequences {
			seqs[k] = n
		}
		delete(seqs, r.From)
		seqs[r.To] = last
		t.Sequences = seqs
	}
	return Outcome{}
}

func applySetColumnNotNull(v *View, r SetColumnNotNull) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "set not null of table %d: no such table", r.Table)
	}
	i := slices.IndexFunc(t.Spec.Columns, func(c Column) bool { return c.Name == r.Column })
	switch {
	case i < 0:
		return reject(ErrNotFound, "set not null of %q.%q: no such column", t.Spec.Name, r.Column)
	case !r.NotNull && slices.Contains(t.Spec.PrimaryKey, r.Column):
		return reject(ErrInvalid, "drop not null of %q.%q: the column is in the primary key", t.Spec.Name, r.Column)
	}
	// A new slice: views handed out earlier share the old one.
	t.Spec.Columns = slices.Clone(t.Spec.Columns)
	t.Spec.Columns[i].NotNull = r.NotNull
	t.Spec.Columns[i].LakeOptional = true
	return Outcome{}
}

func applySetColumnType(v *View, r SetColumnType) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "set type of table %d: no such table", r.Table)
	}
	i := slices.IndexFunc(t.Spec.Columns, func(c Column) bool { return c.Name == r.Column })
	switch {
	case i < 0:
		return reject(ErrNotFound, "set type of %q.%q: no such column", t.Spec.Name, r.Column)
	case r.Type == "":
		return reject(ErrInvalid, "set type of %q.%q: empty type", t.Spec.Name, r.Column)
	case t.Spec.Columns[i].Sequence != "":
		return reject(ErrInvalid, "set type of %q.%q: the column takes its values from a sequence", t.Spec.Name, r.Column)
	}
	// A new slice: views handed out earlier share the old one.
	t.Spec.Columns = slices.Clone(t.Spec.Columns)
	t.Spec.Columns[i].Type = r.Type
	return Outcome{}
}

func applyDropColumn(v *View, r DropColumn) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "drop column of table %d: no such table", r.Table)
	}
	i := slices.IndexFunc(t.Spec.Columns, func(c Column) bool { return c.Name == r.Column })
	switch {
	case i < 0:
		return reject(ErrNotFound, "drop column %q of %q: no such column", r.Column, t.Spec.Name)
	case slices.Contains(t.Spec.PrimaryKey, r.Column):
		return reject(ErrInvalid, "drop column %q of %q: a primary-key column", r.Column, t.Spec.Name)
	case slices.Contains(t.Spec.BucketKey, r.Column):
		return reject(ErrInvalid, "drop column %q of %q: a bucket-key column", r.Column, t.Spec.Name)
	case t.Spec.PartitionBy == r.Column:
		return reject(ErrInvalid, "drop column %q of %q: the partition column", r.Column, t.Spec.Name)
	case len(t.Spec.Columns) == 1:
		return reject(ErrInvalid, "drop column %q of %q: the table's only column", r.Column, t.Spec.Name)
	}
	// The column's stored position: i plus the dropped columns before it.
	pos, at := i, 0
	for at < len(t.Spec.Dropped) && t.Spec.Dropped[at].Position <= pos {
		pos++
		at++
	}
	d := DroppedColumn{Position: pos, Column: t.Spec.Columns[i], SequenceLast: t.Sequences[r.Column]}
	// New slices and maps: views handed out earlier share the old ones.
	t.Spec.Columns = slices.Delete(slices.Clone(t.Spec.Columns), i, i+1)
	t.Spec.Dropped = slices.Insert(slices.Clone(t.Spec.Dropped), at, d)
	if _, ok := t.Sequences[r.Column]; ok {
		t.Sequences = maps.Clone(t.Sequences)
		delete(t.Sequences, r.Column)
		if len(t.Sequences) == 0 {
			t.Sequences = nil
		}
	}
	return Outcome{}
}

func applyRestoreColumn(v *View, r RestoreColumn) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "restore column of table %d: no such table", r.Table)
	}
	at := slices.IndexFunc(t.Spec.Dropped, func(d DroppedColumn) bool { return d.Position == r.Position })
	if at < 0 {
		return reject(ErrNotFound, "restore column %d of %q: no dropped column there", r.Position, t.Spec.Name)
	}
	d := t.Spec.Dropped[at]
	if slices.ContainsFunc(t.Spec.Columns, func(c Column) bool { return c.Name == d.Column.Name }) {
		return reject(ErrExists, "restore column %q of %q: the table has a column of that name", d.Column.Name, t.Spec.Name)
	}
	// Its index among the visible columns: its position less the dropped
	// columns before it.
	i := d.Position - at
	t.Spec.Columns = slices.Insert(slices.Clone(t.Spec.Columns), i, d.Column)
	t.Spec.Dropped = slices.Delete(slices.Clone(t.Spec.Dropped), at, at+1)
	if len(t.Spec.Dropped) == 0 {
		t.Spec.Dropped = nil
	}
	if d.SequenceLast != 0 {
		t.Sequences = maps.Clone(t.Sequences)
		if t.Sequences == nil {
			t.Sequences = map[string]int64{}
		}
		t.Sequences[d.Column.Name] = d.SequenceLast
	}
	return Outcome{}
}
