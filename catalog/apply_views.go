package catalog

import (
	"fmt"
	"slices"
)

func applyCreateView(v *View, r CreateView) Outcome {
	spec, err := normalizeViewSpec(r.Spec)
	if err != nil {
		return Outcome{Err: fmt.Errorf("create view %q: %w", r.Spec.Name, err)}
	}
	what := fmt.Sprintf("create view %q", spec.Name)
	if _, ok := v.SchemaName(spec.Schema); !ok {
		return reject(ErrNotFound, "%s: schema %d: no such schema", what, spec.Schema)
	}
	if t, ok := v.TableByName(spec.Schema, spec.Name); ok {
		return reject(ErrExists, "%s: table %d has that name", what, t.ID)
	}
	if r.Owner != 0 && v.Roles[r.Owner] == nil {
		return reject(ErrNotFound, "%s: owner role %d: no such role", what, r.Owner)
	}
	for _, rel := range spec.Relations {
		if _, ok := v.RelationName(rel.ID); !ok {
			return reject(ErrNotFound, "%s: relation %d (%q): no such table or view", what, rel.ID, rel.Name)
		}
	}
	old, exists := v.ViewByName(spec.Schema, spec.Name)
	if exists && !r.Replace {
		return reject(ErrExists, "%s: view %d has that name", what, old.ID)
	}
	if !exists {
		sv := &SQLView{ID: TableID(v.allocID()), Spec: spec, Owner: r.Owner}
		v.Views[sv.ID] = sv
		return Outcome{Table: sv.ID}
	}
	if len(spec.Columns) < len(old.Spec.Columns) {
		return reject(ErrInvalid, "%s: the new query has %d columns, the view %d", what, len(spec.Columns), len(old.Spec.Columns))
	}
	for i, c := range old.Spec.Columns {
		if spec.Columns[i] != c {
			return reject(ErrInvalid, "%s: column %d is %s %s, was %s %s", what, i+1, spec.Columns[i].Name, spec.Columns[i].Type, c.Name, c.Type)
		}
	}
	for _, rel := range spec.Relations {
		if rel.ID == old.ID || v.reads(rel.ID, old.ID, map[TableID]bool{}) {
			return reject(ErrInvalid, "%s: relation %q reads the view: a view cannot read itself", what, rel.Name)
		}
	}
	old.Spec = spec
	return Outcome{Table: old.ID}
}

func applyDropView(v *View, r DropView) Outcome {
	if len(r.Views) == 0 {
		return reject(ErrInvalid, "drop views: no views")
	}
	for _, id := range r.Views {
		if v.Views[id] == nil {
			return reject(ErrNotFound, "drop view %d: no such view", id)
		}
	}
	for _, id := range r.Views {
		for _, reader := range v.ViewsReading(id) {
			if !slices.Contains(r.Views, reader) {
				return reject(ErrInUse, "drop view %q: view %q reads it", v.Views[id].Spec.Name, v.Views[reader].Spec.Name)
			}
		}
	}
	for _, id := range r.Views {
		delete(v.Views, id)
	}
	return Outcome{}
}

func applyRenameView(v *View, r RenameView) Outcome {
	sv := v.Views[r.View]
	if sv == nil {
		return reject(ErrNotFound, "rename view %d: no such view", r.View)
	}
	old := sv.Spec.Name
	switch {
	case r.Name == "":
		return reject(ErrInvalid, "rename view %q: empty name", old)
	case r.Name == old:
		return Outcome{}
	}
	if other, ok := v.relationNamed(sv.Spec.Schema, r.Name); ok {
		return reject(ErrExists, "rename view %q to %q: relation %d has that name", old, r.Name, other)
	}
	sv.Spec.Name = r.Name
	return Outcome{}
}
