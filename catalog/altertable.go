package catalog

import "slices"

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
