package catalog

import "maps"

func applyAllocateSequence(v *View, r AllocateSequence) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "allocate sequence of table %d: no such table", r.Table)
	}
	col := sequenceColumn(t, r.Column)
	if col == nil {
		return reject(ErrInvalid, "allocate sequence of %q.%q: no such column with a sequence", t.Spec.Name, r.Column)
	}
	if r.Epoch != t.SequenceEpoch {
		return reject(ErrStaleEpoch, "allocate sequence of %q.%q in epoch %d: the table's sequences were restarted (epoch %d)", t.Spec.Name, r.Column, r.Epoch, t.SequenceEpoch)
	}
	if r.Count == 0 || r.Count > MaxSequenceAllocation {
		return reject(ErrInvalid, "allocate sequence of %q.%q: count %d, want 1..%d", t.Spec.Name, r.Column, r.Count, MaxSequenceAllocation)
	}
	last := t.Sequences[r.Column] // 0 <= last <= max
	max := SequenceMax(col.Type)
	if left := uint64(max - last); left < r.Count {
		return reject(ErrSequenceExhausted, "allocate %d values of the sequence of %q.%q: %d left below its maximum %d", r.Count, t.Spec.Name, r.Column, left, max)
	}
	if t.Sequences == nil {
		t.Sequences = map[string]int64{}
	}
	t.Sequences[r.Column] = last + int64(r.Count)
	return Outcome{SequenceStart: last + 1}
}

func applySetSequence(v *View, r SetSequence) Outcome {
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "set sequence of table %d: no such table", r.Table)
	}
	col := sequenceColumn(t, r.Column)
	if col == nil {
		return reject(ErrInvalid, "set sequence of %q.%q: no such column with a sequence", t.Spec.Name, r.Column)
	}
	if max := SequenceMax(col.Type); r.Last < 0 || r.Last > max {
		return reject(ErrInvalid, "set sequence of %q.%q to %d: want 0..%d", t.Spec.Name, r.Column, r.Last, max)
	}
	// A new map: views handed out earlier share the old one.
	seqs := maps.Clone(t.Sequences)
	if seqs == nil {
		seqs = map[string]int64{}
	}
	seqs[r.Column] = r.Last
	if r.Last == 0 {
		delete(seqs, r.Column)
	}
	if len(seqs) == 0 {
		seqs = nil
	}
	t.Sequences = seqs
	// Values nodes cached before are stale now.
	t.SequenceEpoch++
	return Outcome{}
}

// sequenceColumn is t's column name if it has a sequence, else nil.
func sequenceColumn(t *Table, name string) *Column {
	for i := range t.Spec.Columns {
		if c := &t.Spec.Columns[i]; c.Name == name && c.Sequence != "" {
			return c
		}
	}
	return nil
}
