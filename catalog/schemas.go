package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Schemas (CREATE SCHEMA). A schema is a namespace of tables and views:
// two relations may have one name in two schemas, never in one. A table's
// or view's spec names its schema by id, so renaming a schema is one
// record and changes no relation. Schema ids come from NextID, as tables'
// do, and are never reused.
//
// Schema 0 is public. It always exists, is not in View.Schemas, and can be
// neither dropped nor renamed; relations created before schemas existed
// are in it.

// SchemaID identifies a schema; PublicSchema is public.
type SchemaID uint64

// PublicSchema is the schema every relation is in unless it names another.
const PublicSchema SchemaID = 0

// PublicSchemaName is PublicSchema's name.
const PublicSchemaName = "public"

// Schema is a schema other than public.
type Schema struct {
	ID   SchemaID `json:"id"`
	Name string   `json:"name"`
	// Owner is the role that owns the schema (0: none, a superuser's).
	Owner RoleID `json:"owner,omitempty"`
}

// CreateSchema creates the schema Name (CREATE SCHEMA); the outcome's
// Schema is its id. Rejected with ErrExists when a schema has the name
// (public, information_schema and pg_catalog included), ErrInvalid for an
// empty name or one starting with "pg_" (reserved, as in PostgreSQL), and
// ErrNotFound when Owner is no role.
type CreateSchema struct {
	Name  string `json:"name"`
	Owner RoleID `json:"owner,omitempty"`
}

// DropSchema drops Schema (DROP SCHEMA). Without Cascade it is rejected
// with ErrInUse while a table or view is in it. With Cascade it drops, in
// this one record, the tables and views in it and every view elsewhere
// that reads one of them, directly or through other views, as DropTable
// and DropView would. Rejected with ErrNotFound for an unknown schema
// (public cannot be dropped: ErrInvalid).
type DropSchema struct {
	Schema  SchemaID `json:"schema"`
	Cascade bool     `json:"cascade,omitempty"`
}

// RenameSchema renames Schema to Name (ALTER SCHEMA … RENAME TO). Its
// relations stay in it; the Kafka topics of its log tables, named
// "schema.table", take the new name with their consumer groups' offsets.
// Renaming a schema to its own name changes nothing. Rejected with
// ErrNotFound for an unknown schema, ErrExists when another schema has
// the name, and ErrInvalid for public, an empty name or a reserved one.
type RenameSchema struct {
	Schema SchemaID `json:"schema"`
	Name   string   `json:"name"`
}

// SetRelationSchema moves the table or view Relation to Schema (ALTER
// TABLE … SET SCHEMA). A table's topic takes its new name with its
// consumer groups' offsets; views that read the relation follow it by id.
// Moving a relation to its own schema changes nothing. Rejected with
// ErrNotFound for an unknown relation or schema and ErrExists when a
// relation of the schema has the name.
type SetRelationSchema struct {
	Relation TableID  `json:"relation"`
	Schema   SchemaID `json:"schema"`
}

func (CreateSchema) Kind() Kind      { return KindCreateSchema }
func (DropSchema) Kind() Kind        { return KindDropSchema }
func (RenameSchema) Kind() Kind      { return KindRenameSchema }
func (SetRelationSchema) Kind() Kind { return KindSetRelationSchema }

// builtinSchemaNames are the schemas every database has; only public
// holds relations.
var builtinSchemaNames = []string{PublicSchemaName, "information_schema", "pg_catalog"}

// SchemaByName returns the id of the schema named name (public: PublicSchema).
func (v *View) SchemaByName(name string) (SchemaID, bool) {
	if name == PublicSchemaName {
		return PublicSchema, true
	}
	for _, s := range v.Schemas {
		if s.Name == name {
			return s.ID, true
		}
	}
	return 0, false
}

// SchemaName returns the name of schema id.
func (v *View) SchemaName(id SchemaID) (string, bool) {
	if id == PublicSchema {
		return PublicSchemaName, true
	}
	if s := v.Schemas[id]; s != nil {
		return s.Name, true
	}
	return "", false
}

// TopicName returns the Kafka topic name of table t: its name in public,
// "schema.name" in any other schema.
func (v *View) TopicName(t *Table) string {
	return v.QualifyIn(t.Spec.Schema, t.Spec.Name)
}

// QualifyIn returns QualifiedName's form of name in schema.
func (v *View) QualifyIn(schema SchemaID, name string) string {
	if schema == PublicSchema {
		return name
	}
	s, _ := v.SchemaName(schema)
	return s + "." + name
}

// RelationNamedIn returns the id of the table or view of schema named
// name.
func (v *View) RelationNamedIn(schema SchemaID, name string) (TableID, bool) {
	return v.relationNamed(schema, name)
}

// TableNamed returns the table a qualified name names: "name" is a table
// of public, "schema.name" one of schema. A table of public whose name
// holds a dot wins over a schema's table with the same qualified name.
func (v *View) TableNamed(qualified string) (*Table, bool) {
	return byQualified(v, qualified, v.TableByName)
}

// byQualified looks a qualified name up with byName: in public as it is,
// else as "schema.name".
func byQualified[T any](v *View, qualified string, byName func(SchemaID, string) (T, bool)) (T, bool) {
	if r, ok := byName(PublicSchema, qualified); ok {
		return r, true
	}
	if schema, name, ok := v.splitQualified(qualified); ok {
		return byName(schema, name)
	}
	var zero T
	return zero, false
}

// SplitQualified returns the schema and name a qualified name
// (QualifiedName) stands for: "schema.name" of a schema other than public
// that exists, or name in public.
func (v *View) SplitQualified(qualified string) (SchemaID, string) {
	if schema, name, ok := v.splitQualified(qualified); ok {
		return schema, name
	}
	return PublicSchema, qualified
}

// splitQualified splits "schema.name" of a schema other than public.
func (v *View) splitQualified(qualified string) (SchemaID, string, bool) {
	schema, name, ok := strings.Cut(qualified, ".")
	if !ok {
		return 0, "", false
	}
	id, ok := v.SchemaByName(schema)
	return id, name, ok && id != PublicSchema
}

// RelationsIn returns the tables and views of schema id, sorted by id.
func (v *View) RelationsIn(id SchemaID) []TableID {
	var out []TableID
	for _, t := range v.Tables {
		if t.Spec.Schema == id {
			out = append(out, t.ID)
		}
	}
	for _, sv := range v.Views {
		if sv.Spec.Schema == id {
			out = append(out, sv.ID)
		}
	}
	slices.Sort(out)
	return out
}

// checkSchemaName returns the ErrInvalid reason name cannot be a schema's.
func checkSchemaName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty schema name: %w", ErrInvalid)
	case strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("schema name %q: names starting with pg_ are reserved for system schemas: %w", name, ErrInvalid)
	}
	return nil
}

// schemaNameTaken reports whether a schema, built-in or not, is called name.
func (v *View) schemaNameTaken(name string) bool {
	_, ok := v.SchemaByName(name)
	return ok || slices.Contains(builtinSchemaNames, name)
}

func applyCreateSchema(v *View, r CreateSchema) Outcome {
	what := fmt.Sprintf("create schema %q", r.Name)
	if err := checkSchemaName(r.Name); err != nil {
		return Outcome{Err: fmt.Errorf("%s: %w", what, err)}
	}
	if v.schemaNameTaken(r.Name) {
		return reject(ErrExists, "%s: a schema has that name", what)
	}
	if r.Owner != 0 && v.Roles[r.Owner] == nil {
		return reject(ErrNotFound, "%s: owner role %d: no such role", what, r.Owner)
	}
	s := &Schema{ID: SchemaID(v.allocID()), Name: r.Name, Owner: r.Owner}
	v.Schemas[s.ID] = s
	return Outcome{Schema: s.ID}
}

func applyDropSchema(v *View, r DropSchema) Outcome {
	if r.Schema == PublicSchema {
		return reject(ErrInvalid, "drop schema public: public cannot be dropped")
	}
	s := v.Schemas[r.Schema]
	if s == nil {
		return reject(ErrNotFound, "drop schema %d: no such schema", r.Schema)
	}
	in := v.RelationsIn(s.ID)
	if len(in) > 0 && !r.Cascade {
		name, _ := v.RelationName(in[0])
		return reject(ErrInUse, "drop schema %q: relation %q is in it", s.Name, name)
	}
	// The relations to drop: those in the schema and, transitively, the
	// views reading any of them.
	drop := map[TableID]bool{}
	for len(in) > 0 {
		id := in[0]
		in = in[1:]
		if drop[id] {
			continue
		}
		drop[id] = true
		in = append(in, v.ViewsReading(id)...)
	}
	for _, id := range slices.Sorted(maps.Keys(drop)) {
		if t := v.Tables[id]; t != nil {
			v.retireBuckets(t)
			v.dropTopicOffsets(v.TopicName(t), 0)
			delete(v.Tables, id)
		} else {
			delete(v.Views, id)
		}
	}
	delete(v.Schemas, s.ID)
	return Outcome{}
}

func applyRenameSchema(v *View, r RenameSchema) Outcome {
	if r.Schema == PublicSchema {
		return reject(ErrInvalid, "rename schema public: public cannot be renamed")
	}
	s := v.Schemas[r.Schema]
	if s == nil {
		return reject(ErrNotFound, "rename schema %d: no such schema", r.Schema)
	}
	what := fmt.Sprintf("rename schema %q to %q", s.Name, r.Name)
	if err := checkSchemaName(r.Name); err != nil {
		return Outcome{Err: fmt.Errorf("%s: %w", what, err)}
	}
	if r.Name == s.Name {
		return Outcome{}
	}
	if v.schemaNameTaken(r.Name) {
		return reject(ErrExists, "%s: a schema has that name", what)
	}
	var tables []*Table
	for _, id := range v.RelationsIn(s.ID) {
		if t := v.Tables[id]; t != nil {
			tables = append(tables, t)
		}
	}
	old := make([]string, len(tables))
	for i, t := range tables {
		old[i] = v.TopicName(t)
	}
	s.Name = r.Name
	for i, t := range tables {
		v.renameTopic(old[i], v.TopicName(t))
	}
	return Outcome{}
}

func applySetRelationSchema(v *View, r SetRelationSchema) Outcome {
	target, ok := v.SchemaName(r.Schema)
	if !ok {
		return reject(ErrNotFound, "set schema of relation %d: schema %d: no such schema", r.Relation, r.Schema)
	}
	var schema *SchemaID
	var name string
	t, sv := v.Tables[r.Relation], v.Views[r.Relation]
	switch {
	case t != nil:
		schema, name = &t.Spec.Schema, t.Spec.Name
	case sv != nil:
		schema, name = &sv.Spec.Schema, sv.Spec.Name
	default:
		return reject(ErrNotFound, "set schema of relation %d: no such table or view", r.Relation)
	}
	if *schema == r.Schema {
		return Outcome{}
	}
	if other, ok := v.relationNamed(r.Schema, name); ok {
		return reject(ErrExists, "set schema of %q to %q: relation %d has that name", name, target, other)
	}
	if t == nil {
		*schema = r.Schema
		return Outcome{}
	}
	old := v.TopicName(t)
	*schema = r.Schema
	v.renameTopic(old, v.TopicName(t))
	return Outcome{}
}

// renameTopic moves every group's committed offsets of topic old to new:
// the topic is the table, and its consumer groups go on under its new name.
func (v *View) renameTopic(old, new string) {
	if old == new {
		return
	}
	for _, g := range v.Groups {
		if offsets, ok := g.Offsets[old]; ok {
			g.Offsets[new] = offsets
			delete(g.Offsets, old)
		}
	}
}

// checkSchemas is the part of checkInvariants about schemas: every
// schema is keyed by its id and has a unique, valid name, and every
// relation's schema exists.
func (v *View) checkSchemas() error {
	names := map[string]SchemaID{}
	for _, id := range slices.Sorted(maps.Keys(v.Schemas)) {
		s := v.Schemas[id]
		if s == nil || s.ID != id || id == PublicSchema || uint64(id) >= v.NextID {
			return fmt.Errorf("schema %d: bad entry or id not below next id %d", id, v.NextID)
		}
		if v.Tables[TableID(id)] != nil || v.Views[TableID(id)] != nil {
			return fmt.Errorf("schema %d: a relation has its id", id)
		}
		if err := checkSchemaName(s.Name); err != nil || slices.Contains(builtinSchemaNames, s.Name) {
			return fmt.Errorf("schema %d: bad name %q", id, s.Name)
		}
		if other, dup := names[s.Name]; dup {
			return fmt.Errorf("schemas %d and %d are both named %q", other, id, s.Name)
		}
		names[s.Name] = id
		if s.Owner != 0 && v.Roles[s.Owner] == nil {
			return fmt.Errorf("schema %q: owner role %d does not exist", s.Name, s.Owner)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		if s := v.Tables[id].Spec.Schema; s != PublicSchema && v.Schemas[s] == nil {
			return fmt.Errorf("table %d: schema %d does not exist", id, s)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Views)) {
		if s := v.Views[id].Spec.Schema; s != PublicSchema && v.Schemas[s] == nil {
			return fmt.Errorf("view %d: schema %d does not exist", id, s)
		}
	}
	return nil
}

// QualifiedName returns the name that names relation id on its own, as
// TableNamed and ViewNamed read it: its name in public, "schema.name" in
// any other schema. It is a log table's Kafka topic (TopicName) and the
// name sqlfront's engine knows the relation by.
func (v *View) QualifiedName(id TableID) (string, bool) {
	var schema SchemaID
	var name string
	if t := v.Tables[id]; t != nil {
		schema, name = t.Spec.Schema, t.Spec.Name
	} else if sv := v.Views[id]; sv != nil {
		schema, name = sv.Spec.Schema, sv.Spec.Name
	} else {
		return "", false
	}
	return v.QualifyIn(schema, name), true
}

// ViewNamed returns the view a qualified name (QualifiedName) names, by
// TableNamed's rule.
func (v *View) ViewNamed(qualified string) (*SQLView, bool) {
	return byQualified(v, qualified, v.ViewByName)
}
