package catalog

import (
	"fmt"
	"maps"
	"slices"
)

// SQL views (CREATE VIEW). A view is stored as the text of its query and
// expanded where it is read (sqlfront), on every node, from the same
// records. Views share the id space and the namespace of tables: a view's
// id is never a table's, and no view has a table's name. GrantTable and
// SetTableOwner take a view's id as they take a table's.

// SQLView is a view: its name, its result columns, its query and the
// relations the query names.
type SQLView struct {
	ID   TableID  `json:"id"`
	Spec ViewSpec `json:"spec"`
	// Owner is the role that owns the view (0: none, a superuser's); the
	// relations of its query are read with the owner's privileges. ACL is
	// what was granted on the view (roles.go).
	Owner RoleID    `json:"owner,omitempty"`
	ACL   []ACLItem `json:"acl,omitempty"`
}

// ViewSpec is everything CREATE VIEW says about a view.
type ViewSpec struct {
	Name string `json:"name"`
	// Schema is the schema the view is in (schemas.go).
	Schema SchemaID `json:"schema,omitempty"`
	// Columns are the view's result columns, in order.
	Columns []ViewColumn `json:"columns"`
	// Query is the view's SELECT, as SQL text in which every relation of
	// Relations is named, unqualified, by its ViewRelation.Name.
	Query string `json:"query"`
	// Relations are the tables and views the query reads, sorted by name,
	// each once. A reader of the view reads ViewRelation.ID where the query
	// says ViewRelation.Name, so renaming a relation the view reads does not
	// break the view (PostgreSQL binds a view's relations when it is
	// created, too).
	Relations []ViewRelation `json:"relations,omitempty"`
}

// ViewColumn is a result column of a view: its name and its SQL type, as
// Column.Type is written.
type ViewColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ViewRelation is a relation a view's query reads: the name the query text
// uses for it and the table or view it stood for when the view was created.
type ViewRelation struct {
	Name string  `json:"name"`
	ID   TableID `json:"id"`
}

// CreateView creates a view (CREATE VIEW). Rejected with ErrExists when a
// table or (without Replace) a view has the name, ErrNotFound when a
// relation of Spec.Relations is neither a table nor a view or Owner is no
// role, and ErrInvalid for a malformed spec.
//
// With Replace (CREATE OR REPLACE VIEW) a view of that name is replaced and
// keeps its id, owner and grants. The new columns must begin with the old
// ones, same names and types, in order (new ones may follow), and the new
// query must not read the view itself, directly or through other views
// (ErrInvalid): views that read the replaced one keep their columns, and
// expanding a view ends. The outcome's Table is the view's id.
type CreateView struct {
	Spec    ViewSpec `json:"spec"`
	Owner   RoleID   `json:"owner,omitempty"`
	Replace bool     `json:"replace,omitempty"`
}

// DropView drops Views (DROP VIEW, and the views DROP … CASCADE drops). It
// is rejected with ErrNotFound when one is not a view, and with ErrInUse
// when a view not in the list reads one of them: a view's relations always
// exist.
type DropView struct {
	Views []TableID `json:"views"`
}

// RenameView renames View to Name (ALTER VIEW … RENAME TO). Views that read
// it follow (ViewRelation.ID). Renaming a view to its own name changes
// nothing. Rejected with ErrNotFound for an unknown view, ErrExists when a
// table or another view has the name, and ErrInvalid for an empty name.
type RenameView struct {
	View TableID `json:"view"`
	Name string  `json:"name"`
}

func (CreateView) Kind() Kind { return KindCreateView }
func (DropView) Kind() Kind   { return KindDropView }
func (RenameView) Kind() Kind { return KindRenameView }

// ViewByName returns the view of schema named name (names compare exactly,
// as for TableByName).
func (v *View) ViewByName(schema SchemaID, name string) (*SQLView, bool) {
	for _, sv := range v.Views {
		if sv.Spec.Name == name && sv.Spec.Schema == schema {
			return sv, true
		}
	}
	return nil, false
}

// relationNamed returns the id of the table or view of schema named name.
func (v *View) relationNamed(schema SchemaID, name string) (TableID, bool) {
	if t, ok := v.TableByName(schema, name); ok {
		return t.ID, true
	}
	if sv, ok := v.ViewByName(schema, name); ok {
		return sv.ID, true
	}
	return 0, false
}

// RelationName returns the current name of the table or view id.
func (v *View) RelationName(id TableID) (string, bool) {
	if t := v.Tables[id]; t != nil {
		return t.Spec.Name, true
	}
	if sv := v.Views[id]; sv != nil {
		return sv.Spec.Name, true
	}
	return "", false
}

// ViewsReading returns the views whose query reads relation id directly,
// sorted by id.
func (v *View) ViewsReading(id TableID) []TableID {
	var out []TableID
	for _, vid := range slices.Sorted(maps.Keys(v.Views)) {
		if slices.ContainsFunc(v.Views[vid].Spec.Relations, func(r ViewRelation) bool { return r.ID == id }) {
			out = append(out, vid)
		}
	}
	return out
}

// DependentViews returns every view that reads relation id, directly or
// through other views, in an order in which each view comes after the
// views it reads (the order DROP … CASCADE drops them in reverse).
func (v *View) DependentViews(id TableID) []TableID {
	var out []TableID
	seen := map[TableID]bool{}
	var visit func(TableID)
	visit = func(rel TableID) {
		for _, vid := range v.ViewsReading(rel) {
			if !seen[vid] {
				seen[vid] = true
				out = append(out, vid)
				visit(vid)
			}
		}
	}
	visit(id)
	// A view can be reached before a view it reads: order by depth.
	depth := map[TableID]int{}
	var depthOf func(TableID) int
	depthOf = func(vid TableID) int {
		if d, ok := depth[vid]; ok {
			return d
		}
		d := 0
		for _, r := range v.Views[vid].Spec.Relations {
			if seen[r.ID] {
				d = max(d, depthOf(r.ID)+1)
			}
		}
		depth[vid] = d
		return d
	}
	slices.SortStableFunc(out, func(a, b TableID) int { return depthOf(a) - depthOf(b) })
	return out
}

// reads reports whether view vid reads relation target, directly or
// through other views.
func (v *View) reads(vid, target TableID, seen map[TableID]bool) bool {
	if seen[vid] {
		return false
	}
	seen[vid] = true
	sv := v.Views[vid]
	if sv == nil {
		return false
	}
	for _, r := range sv.Spec.Relations {
		if r.ID == target || v.reads(r.ID, target, seen) {
			return true
		}
	}
	return false
}

// ViewPrivileges is what role may do on view sv, as TablePrivileges is for
// a table.
func (v *View) ViewPrivileges(role RoleID, sv *SQLView) Privileges {
	return v.privileges(role, sv.Owner, sv.ACL)
}

// normalizeViewSpec returns a copy of spec that shares nothing with it,
// with its relations sorted and empty lists nil, or the ErrInvalid reason.
func normalizeViewSpec(spec ViewSpec) (ViewSpec, error) {
	out := ViewSpec{
		Name:      spec.Name,
		Schema:    spec.Schema,
		Columns:   slices.Clone(spec.Columns),
		Query:     spec.Query,
		Relations: slices.Clone(spec.Relations),
	}
	slices.SortFunc(out.Relations, func(a, b ViewRelation) int {
		if a.Name < b.Name {
			return -1
		} else if a.Name > b.Name {
			return 1
		}
		return 0
	})
	if len(out.Relations) == 0 {
		out.Relations = nil
	}
	switch {
	case out.Name == "":
		return out, fmt.Errorf("empty view name: %w", ErrInvalid)
	case out.Query == "":
		return out, fmt.Errorf("empty query: %w", ErrInvalid)
	case len(out.Columns) == 0:
		return out, fmt.Errorf("no columns: %w", ErrInvalid)
	}
	names := map[string]bool{}
	for i, c := range out.Columns {
		switch {
		case c.Name == "" || c.Type == "":
			return out, fmt.Errorf("column %d needs a name and a type: %w", i, ErrInvalid)
		case names[c.Name]:
			return out, fmt.Errorf("column %q appears twice: %w", c.Name, ErrInvalid)
		}
		names[c.Name] = true
	}
	for i, r := range out.Relations {
		if r.Name == "" || r.ID == 0 {
			return out, fmt.Errorf("relation %d %+v: empty name or id: %w", i, r, ErrInvalid)
		}
		if i > 0 && out.Relations[i-1].Name == r.Name {
			return out, fmt.Errorf("relation %q appears twice: %w", r.Name, ErrInvalid)
		}
	}
	return out, nil
}

func (sv *SQLView) clone() *SQLView {
	c := *sv
	c.Spec.Columns = slices.Clone(sv.Spec.Columns)
	c.Spec.Relations = slices.Clone(sv.Spec.Relations)
	c.ACL = slices.Clone(sv.ACL)
	return &c
}

// checkViews checks the invariants of views: ids and names apart from
// tables', specs in normal form, relations that exist, no view that reads
// itself, owners and grants of existing roles.
func (v *View) checkViews() error {
	for _, id := range slices.Sorted(maps.Keys(v.Views)) {
		sv := v.Views[id]
		if sv == nil || sv.ID != id || id == 0 || uint64(id) >= v.NextID {
			return fmt.Errorf("view %d: bad entry or id not below next id %d", id, v.NextID)
		}
		if v.Tables[id] != nil {
			return fmt.Errorf("view %d: a table has its id", id)
		}
		if spec, err := normalizeViewSpec(sv.Spec); err != nil {
			return fmt.Errorf("view %d: %w", id, err)
		} else if !slices.Equal(spec.Relations, sv.Spec.Relations) || !slices.Equal(spec.Columns, sv.Spec.Columns) {
			return fmt.Errorf("view %d: spec %+v is not in normal form", id, sv.Spec)
		}
		if other, ok := v.relationNamed(sv.Spec.Schema, sv.Spec.Name); !ok || other != id {
			return fmt.Errorf("view %d: its name %q is also relation %d's", id, sv.Spec.Name, other)
		}
		for _, r := range sv.Spec.Relations {
			if _, ok := v.RelationName(r.ID); !ok {
				return fmt.Errorf("view %d reads relation %d, which does not exist", id, r.ID)
			}
		}
		if v.reads(id, id, map[TableID]bool{}) {
			return fmt.Errorf("view %d reads itself", id)
		}
		if sv.Owner != 0 && v.Roles[sv.Owner] == nil {
			return fmt.Errorf("view %d: owner role %d does not exist", id, sv.Owner)
		}
		if err := v.checkACL(sv.ACL); err != nil {
			return fmt.Errorf("view %d: %w", id, err)
		}
	}
	return nil
}
