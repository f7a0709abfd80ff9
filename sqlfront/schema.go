package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/sqlfront/translate"
)

// Schemas. Tables and views are in schemas (catalog/schemas.go); public
// is the one every database starts with. Inside sqlfront a relation is
// known by its qualified name (catalog.View.QualifiedName): its name in
// public, "schema.name" in any other schema. That is also the name of its
// view on the session's DuckDB connection: DuckDB's temporary views, one
// set per connection, cannot be put in schemas. qualifyNames rewrites a
// statement's references to relations outside public into that form
// before it is planned, so the rest of sqlfront, and the engine, see one
// name per relation.
//
// Unqualified names are looked up along search_path, as in PostgreSQL:
// the session's temporary tables first, then each schema of the path that
// exists; a relation is created in the first schema of the path that
// exists. Every role may use and create in every schema (mink keeps no
// schema privileges); dropping, renaming or altering a schema takes its
// owner or a superuser.

// relName returns the qualified name of the relation rv names: rv's
// schema's, or for an unqualified name the first schema of search_path
// with a relation of that name (public when none has: the name then names
// no relation, and looking it up fails as it should). 3F000 for a schema
// that does not exist.
func (s *session) relName(rv *pg.RangeVar) (string, error) {
	if rv.Catalogname != "" && rv.Catalogname != s.f.cfg.Database {
		return "", errorf(pgwire.CodeFeatureNotSupported, "cross-database references are not implemented: %s.%s.%s", rv.Catalogname, rv.Schemaname, rv.Relname)
	}
	var name string
	var err error
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		switch rv.Schemaname {
		case "":
			name = rv.Relname
			for _, id := range s.searchPath(v) {
				if _, ok := v.RelationNamedIn(id, rv.Relname); ok {
					name = v.QualifyIn(id, rv.Relname)
					return
				}
			}
		default:
			id, ok := v.SchemaByName(rv.Schemaname)
			if !ok {
				err = undefinedSchema(rv.Schemaname)
				return
			}
			name = v.QualifyIn(id, rv.Relname)
		}
	})
	return name, err
}

// createdName returns the schema a relation rv creates goes in, its name
// there, and its qualified name: rv's schema, or the first schema of
// search_path that exists. 3F000 for a schema that does not exist or an
// empty path.
func (s *session) createdName(rv *pg.RangeVar) (catalog.SchemaID, string, string, error) {
	if rv.Catalogname != "" && rv.Catalogname != s.f.cfg.Database {
		return 0, "", "", errorf(pgwire.CodeFeatureNotSupported, "cross-database references are not implemented: %s.%s.%s", rv.Catalogname, rv.Schemaname, rv.Relname)
	}
	var schema catalog.SchemaID
	var qualified string
	var err error
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		if rv.Schemaname != "" {
			var ok bool
			if schema, ok = v.SchemaByName(rv.Schemaname); !ok {
				err = undefinedSchema(rv.Schemaname)
				return
			}
		} else if path := s.searchPath(v); len(path) > 0 {
			schema = path[0]
		} else {
			err = errorf(pgwire.CodeInvalidSchemaName, "no schema has been selected to create in")
			return
		}
		qualified = v.QualifyIn(schema, rv.Relname)
	})
	return schema, rv.Relname, qualified, err
}

// schemasExist returns 3F000 unless every schema named (String nodes, as
// GRANT … ON SCHEMA lists them) exists.
func (s *session) schemasExist(names []*pg.Node) error {
	var err error
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, n := range names {
			name := n.GetString_().GetSval()
			if _, ok := v.SchemaByName(name); !ok && name != "information_schema" && name != "pg_catalog" && err == nil {
				err = undefinedSchema(name)
			}
		}
	})
	return err
}

// lookupWritten is lookupTable for the table an INSERT, UPDATE or DELETE
// writes: as in PostgreSQL, a schema that does not exist is 42P01 for the
// relation, not 3F000.
func (s *session) lookupWritten(rv *pg.RangeVar) (*tableInfo, error) {
	t, err := s.lookupTable(rv)
	var we *pgwire.Error
	if errors.As(err, &we) && we.Code == pgwire.CodeInvalidSchemaName {
		return nil, errorf(pgwire.CodeUndefinedTable, "relation \"%s.%s\" does not exist", rv.Schemaname, rv.Relname)
	}
	return t, err
}

func undefinedSchema(name string) error {
	return errorf(pgwire.CodeInvalidSchemaName, "schema %q does not exist", name)
}

// searchPath returns the schemas of the session's search_path that exist,
// in order ("$user" is the session's user; pg_catalog and pg_temp, which
// hold no tables of mink's, are left out).
func (s *session) searchPath(v *catalog.View) []catalog.SchemaID {
	var out []catalog.SchemaID
	for _, name := range parseSearchPath(s.settings.values["search_path"]) {
		if name == "$user" {
			name = s.identity.Name
		}
		if id, ok := v.SchemaByName(name); ok && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// searchPathNames returns the names of searchPath's schemas.
func (s *session) searchPathNames() []string {
	var out []string
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, id := range s.searchPath(v) {
			name, _ := v.SchemaName(id)
			out = append(out, name)
		}
	})
	return out
}

// parseSearchPath splits a search_path value into its schema names:
// comma-separated, each perhaps double-quoted ("" stands for ").
func parseSearchPath(value string) []string {
	var out []string
	for len(value) > 0 {
		value = strings.TrimLeft(value, " \t\n")
		var name string
		if strings.HasPrefix(value, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(value); i++ {
				if value[i] == '"' {
					if i+1 < len(value) && value[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(value[i])
			}
			name, value = b.String(), value[min(i+1, len(value)):]
			if _, rest, ok := strings.Cut(value, ","); ok {
				value = rest
			} else {
				value = ""
			}
		} else {
			var rest string
			var ok bool
			name, rest, ok = strings.Cut(value, ",")
			name = strings.ToLower(strings.TrimSpace(name))
			if !ok {
				rest = ""
			}
			value = rest
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// qualifyNames rewrites, in place, the references of node to relations
// outside public into their qualified names (see the comment at the top),
// with the name the statement wrote as the alias, so that columns
// qualified by it still resolve. It reports whether it changed anything;
// the caller then plans the tree's deparsed text.
//
// The relation a statement creates is left as written (createdName reads
// it), as are names of CTEs, of the session's temporary tables, and of
// PostgreSQL's catalogs.
func (s *session) qualifyNames(node *pg.Node) bool {
	others := false
	s.f.cfg.Meta.Read(func(v *catalog.View) { others = len(v.Schemas) > 0 })
	if !others {
		return false // only public: nothing to rewrite (the common case, kept cheap)
	}
	created := map[*pg.RangeVar]bool{}
	// Queries and DML name relations where an alias may follow; utility
	// statements (ALTER, DROP, COPY t, …) name them where none may.
	aliased := false
	switch n := node.Node.(type) {
	case *pg.Node_SelectStmt, *pg.Node_InsertStmt, *pg.Node_UpdateStmt, *pg.Node_DeleteStmt, *pg.Node_ExplainStmt:
		aliased = true
	case *pg.Node_CopyStmt:
		aliased = n.CopyStmt.Query != nil
	}
	switch n := node.Node.(type) {
	case *pg.Node_CreateStmt:
		created[n.CreateStmt.Relation] = true
	case *pg.Node_ViewStmt:
		created[n.ViewStmt.View] = true
		aliased = true
	case *pg.Node_CreateTableAsStmt:
		if n.CreateTableAsStmt.Into != nil {
			created[n.CreateTableAsStmt.Into.Rel] = true
		}
		aliased = true
	case *pg.Node_SelectStmt:
		if into := n.SelectStmt.IntoClause; into != nil {
			created[into.Rel] = true
		}
	}
	rvs := pg.RangeVars(node)
	if len(rvs) == 0 {
		return false
	}
	var ctes map[string]bool
	changed := false
	qualified := map[[2]string]bool{} // the schema and name of each rewritten reference
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		var path []catalog.SchemaID
		for _, rv := range rvs {
			if created[rv] || (rv.Catalogname != "" && rv.Catalogname != s.f.cfg.Database) {
				continue
			}
			schema, ok := catalog.PublicSchema, false
			switch rv.Schemaname {
			case "public":
				continue
			case "":
				if ctes == nil {
					ctes = cteNames(node)
				}
				if ctes[rv.Relname] {
					continue
				}
				if _, isCatalog := pgcatalog.Key("", rv.Relname); isCatalog {
					continue
				}
				if _, isTemp := s.tempRel(rv); isTemp {
					continue
				}
				if path == nil {
					path = s.searchPath(v)
				}
				for _, id := range path {
					if _, found := v.RelationNamedIn(id, rv.Relname); found {
						schema, ok = id, true
						break
					}
				}
			default:
				schema, ok = v.SchemaByName(rv.Schemaname)
			}
			if !ok || schema == catalog.PublicSchema {
				continue
			}
			if rv.Alias == nil && aliased {
				rv.Alias = &pg.Alias{Aliasname: rv.Relname}
			}
			if rv.Schemaname != "" {
				qualified[[2]string{rv.Schemaname, rv.Relname}] = true
			}
			rv.Catalogname, rv.Schemaname, rv.Relname = "", "", v.QualifyIn(schema, rv.Relname)
			changed = true
		}
	})
	if len(qualified) > 0 {
		// s.t.c: the column c of the relation s.t, now known as t.
		pg.Visit(node, func(n *pg.Node) bool {
			if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) >= 3 {
				first, second := cr.Fields[len(cr.Fields)-3].GetString_(), cr.Fields[len(cr.Fields)-2].GetString_()
				if first != nil && second != nil && qualified[[2]string{first.Sval, second.Sval}] {
					cr.Fields = slices.Delete(cr.Fields, 0, len(cr.Fields)-2)
				}
			}
			return true
		})
	}
	return changed
}

// requalify returns node's text after qualifyNames changed it, parsed
// again so that the positions in the tree point into the text.
func requalify(node *pg.Node) (string, *pg.Node, error) {
	text, err := translate.Deparse(node)
	if err != nil {
		return "", nil, fmt.Errorf("deparse a statement naming relations outside public: %w", err)
	}
	tree, err := pg.Parse(text)
	if err != nil || len(tree.Stmts) != 1 {
		return "", nil, fmt.Errorf("parse the deparsed statement %q: %v", text, err)
	}
	return text, tree.Stmts[0].Stmt, nil
}

// planCreateSchema plans CREATE SCHEMA [IF NOT EXISTS] s [AUTHORIZATION
// r]: one catalog.CreateSchema (42P06 when the schema exists; IF NOT
// EXISTS: a notice).
func (s *session) planCreateSchema(cs *pg.CreateSchemaStmt) (*stmt, error) {
	name := cs.Schemaname
	if name == "" && cs.Authrole != nil {
		name = cs.Authrole.Rolename // CREATE SCHEMA AUTHORIZATION r: a schema named r
	}
	if strings.HasPrefix(name, "pg_") {
		return nil, &pgwire.Error{Code: codeReservedName, Message: fmt.Sprintf("unacceptable schema name %q", name),
			Detail: `The prefix "pg_" is reserved for system schemas.`}
	}
	elements, err := schemaElements(name, cs.SchemaElts)
	if err != nil {
		return nil, err
	}
	exists := func() *pgwire.Error {
		if cs.IfNotExists {
			return nil
		}
		return errorf(pgwire.CodeDuplicateSchema, "schema %q already exists", name)
	}
	skipping := []*pgwire.Error{notice(pgwire.CodeDuplicateSchema, "schema %q already exists, skipping", name)}
	return s.tagWithNotices("CREATE SCHEMA", func(ctx context.Context) ([]*pgwire.Error, error) {
		if name == "information_schema" || name == "pg_catalog" {
			if err := exists(); err != nil {
				return nil, err
			}
			return skipping, nil
		}
		owner := s.identity.Role
		if cs.Authrole != nil {
			var err error
			s.f.cfg.Meta.Read(func(v *catalog.View) { owner, _, err = s.roleID(v, cs.Authrole) })
			if err != nil {
				return nil, err
			}
		}
		var taken bool
		s.f.cfg.Meta.Read(func(v *catalog.View) { _, taken = v.SchemaByName(name) })
		if !taken {
			if err := s.checkCreateSchema(ctx, owner); err != nil {
				return nil, err
			}
			out, err := s.f.cfg.Meta.Propose(ctx, catalog.CreateSchema{Name: name, Owner: owner})
			if !errors.Is(err, catalog.ErrExists) {
				if err == nil && s.tx.status == pgwire.TxInBlock {
					s.tx.undo = append(s.tx.undo, undoDDL{createdSchema: name})
				}
				if err != nil || len(elements) == 0 {
					return nil, err
				}
				return s.createSchemaElements(ctx, out.Schema, name, elements)
			}
		}
		if err := exists(); err != nil {
			return nil, err
		}
		return skipping, nil
	}), nil
}

// schemaElements returns the statements of CREATE SCHEMA name's elements
// (CREATE TABLE, CREATE VIEW, CREATE INDEX, GRANT), each relation it
// creates qualified with the schema; 42P15 for one that names another
// schema, as in PostgreSQL.
func schemaElements(name string, elts []*pg.Node) ([]*pg.Node, error) {
	var out []*pg.Node
	for _, e := range elts {
		e = proto.Clone(e).(*pg.Node)
		var rel *pg.RangeVar
		switch n := e.Node.(type) {
		case *pg.Node_CreateStmt:
			rel = n.CreateStmt.Relation
		case *pg.Node_ViewStmt:
			rel = n.ViewStmt.View
		case *pg.Node_IndexStmt:
			rel = n.IndexStmt.Relation
		case *pg.Node_GrantStmt:
		default:
			return nil, unsupported("%s in CREATE SCHEMA is not supported by mink", statementName(e))
		}
		if rel != nil {
			if rel.Schemaname != "" && rel.Schemaname != name {
				return nil, errorf(codeInvalidSchemaDefinition, "CREATE specifies a schema (%s) different from the one being created (%s)", rel.Schemaname, name)
			}
			rel.Schemaname = name
		}
		out = append(out, e)
	}
	return out, nil
}

// codeInvalidSchemaDefinition is invalid_schema_definition.
const codeInvalidSchemaDefinition = "42P15"

// createSchemaElements runs the elements of CREATE SCHEMA name, whose
// schema id the statement just created, with the schema first in
// search_path (as PostgreSQL resolves their names). One that fails drops
// the schema with what the ones before made, as PostgreSQL's CREATE
// SCHEMA is all or nothing, and returns its error.
func (s *session) createSchemaElements(ctx context.Context, id catalog.SchemaID, name string, elements []*pg.Node) ([]*pgwire.Error, error) {
	path := s.settings.values["search_path"]
	s.settings.values["search_path"] = quoteIdent(name) + ", " + path
	defer func() { s.settings.values["search_path"] = path }()
	var notices []*pgwire.Error
	for _, e := range elements {
		res, err := s.runElement(ctx, e)
		notices = append(notices, res.Notices...)
		if err != nil {
			if _, derr := s.f.cfg.Meta.Propose(ctx, catalog.DropSchema{Schema: id, Cascade: true}); derr != nil {
				s.f.cfg.Logger.Warn("CREATE SCHEMA: could not drop the schema after an element failed", "schema", name, "err", derr)
			}
			return nil, err
		}
	}
	return notices, nil
}

// runElement plans and runs one element of CREATE SCHEMA from its text.
func (s *session) runElement(ctx context.Context, e *pg.Node) (pgwire.Result, error) {
	text, err := translate.Deparse(e)
	if err != nil {
		return pgwire.Result{}, fmt.Errorf("deparse a CREATE SCHEMA element: %w", err)
	}
	tree, err := pg.Parse(text)
	if err != nil || len(tree.Stmts) != 1 {
		return pgwire.Result{}, fmt.Errorf("parse the CREATE SCHEMA element %q: %v", text, err)
	}
	st, err := s.plan(ctx, text, tree.Stmts[0].Stmt, nil)
	if err != nil {
		return pgwire.Result{}, err
	}
	defer st.Close()
	return st.run(ctx, nil)
}

// checkCreateSchema checks that the session may create a schema owned by
// owner: a superuser may; any other role only for itself or a role it is
// a member of (PostgreSQL also asks for CREATE on the database, which
// every mink role has).
func (s *session) checkCreateSchema(ctx context.Context, owner catalog.RoleID) error {
	if s.isSuperuser() || owner == s.identity.Role {
		return nil
	}
	member := false
	s.f.cfg.Meta.Read(func(v *catalog.View) { member = v.IsMember(s.identity.Role, owner) })
	if !member {
		return errorf(pgwire.CodeInsufficientPrivilege, "must be able to SET ROLE to the schema's owner")
	}
	return nil
}

// schemaOwnerOnly returns 42501 unless the session may drop or alter the
// schema s: its owner (or a member of the owner) or a superuser.
func (s *session) schemaOwnerOnly(v *catalog.View, sc *catalog.Schema) error {
	if s.isSuperuser() || sc.Owner == s.identity.Role || (sc.Owner != 0 && v.IsMember(s.identity.Role, sc.Owner)) {
		return nil
	}
	return errorf(pgwire.CodeInsufficientPrivilege, "must be owner of schema %s", sc.Name)
}

// planDropSchema plans DROP SCHEMA [IF EXISTS] s, … [CASCADE | RESTRICT]:
// one catalog.DropSchema per schema. Without CASCADE a schema that holds a
// relation is 2BP01, as in PostgreSQL; with it, its tables and views, and
// the views elsewhere that read them, go in the same record.
func (s *session) planDropSchema(d *pg.DropStmt) (*stmt, error) {
	var names []string
	for _, obj := range d.Objects {
		names = append(names, obj.GetString_().GetSval())
	}
	cascade := d.Behavior == pg.DropBehavior_DROP_CASCADE
	return s.tagWithNotices("DROP SCHEMA", func(ctx context.Context) ([]*pgwire.Error, error) {
		var notices []*pgwire.Error
		var recs []catalog.DropSchema
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			for _, name := range names {
				switch name {
				case catalog.PublicSchemaName, "information_schema", "pg_catalog":
					err = &pgwire.Error{Code: codeDependentObjects, Message: fmt.Sprintf("cannot drop schema %s because other objects depend on it", name),
						Detail: "mink keeps its built-in schemas"}
					return
				}
				id, ok := v.SchemaByName(name)
				if !ok {
					if !d.MissingOk {
						err = undefinedSchema(name)
						return
					}
					notices = append(notices, notice(pgwire.CodeSuccessfulCompletion, "schema %q does not exist, skipping", name))
					continue
				}
				if err = s.schemaOwnerOnly(v, v.Schemas[id]); err != nil {
					return
				}
				var more []*pgwire.Error
				more, err = schemaCascade(v, id, cascade)
				if err != nil {
					return
				}
				notices = append(notices, more...)
				recs = append(recs, catalog.DropSchema{Schema: id, Cascade: cascade})
			}
		})
		if err != nil {
			return nil, err
		}
		if s.tx.status == pgwire.TxInBlock {
			// As DROP TABLE in a block: COMMIT drops (ddl_tx.go).
			for _, rec := range recs {
				s.tx.dropped = append(s.tx.dropped, droppedTable{schema: rec.Schema, cascade: rec.Cascade})
			}
			return notices, nil
		}
		for _, rec := range recs {
			if _, err := s.f.cfg.Meta.Propose(ctx, rec); err != nil {
				return nil, dropSchemaError(err)
			}
		}
		return notices, nil
	}), nil
}

// dropSchemaError is the error of a catalog.DropSchema the catalog
// refused: a relation created in the schema since the statement looked.
func dropSchemaError(err error) error {
	if errors.Is(err, catalog.ErrInUse) {
		return &pgwire.Error{Code: codeDependentObjects, Message: "cannot drop schema because other objects depend on it: " + err.Error(),
			Hint: "Use DROP ... CASCADE to drop the dependent objects too."}
	}
	return err
}

// schemaCascade returns the notices of dropping schema id, which name
// what goes with it, or, without cascade, 2BP01 when anything would.
func schemaCascade(v *catalog.View, id catalog.SchemaID, cascade bool) ([]*pgwire.Error, error) {
	schema, _ := v.SchemaName(id)
	in := v.RelationsIn(id)
	if len(in) == 0 {
		return nil, nil
	}
	var lines []string
	for _, rid := range in {
		name, _ := v.QualifiedName(rid)
		what := "table"
		if v.Views[rid] != nil {
			what = "view"
		}
		lines = append(lines, fmt.Sprintf("%s %s", what, name))
	}
	if !cascade {
		depends := make([]string, len(lines))
		for i, l := range lines {
			depends[i] = l + " depends on schema " + schema
		}
		return nil, &pgwire.Error{Code: codeDependentObjects, Message: fmt.Sprintf("cannot drop schema %s because other objects depend on it", schema),
			Detail: strings.Join(depends, "\n"), Hint: "Use DROP ... CASCADE to drop the dependent objects too."}
	}
	// The views elsewhere that read the schema's relations go too.
	readers, _, err := cascadeViews(v, "table", in, true)
	if err != nil {
		return nil, err
	}
	for _, id := range readers {
		if !slices.Contains(in, id) {
			name, _ := v.QualifiedName(id)
			lines = append(lines, "view "+name)
		}
	}
	if len(lines) == 1 {
		return []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion, "drop cascades to %s", lines[0])}, nil
	}
	return []*pgwire.Error{{Severity: "NOTICE", Code: pgwire.CodeSuccessfulCompletion,
		Message: fmt.Sprintf("drop cascades to %d other objects", len(lines)),
		Detail:  "drop cascades to " + strings.Join(lines, "\ndrop cascades to ")}}, nil
}

// planRenameSchema plans ALTER SCHEMA s RENAME TO n: one
// catalog.RenameSchema.
func (s *session) planRenameSchema(rs *pg.RenameStmt) (*stmt, error) {
	name, to := rs.Subname, rs.Newname
	if strings.HasPrefix(to, "pg_") {
		return nil, &pgwire.Error{Code: codeReservedName, Message: fmt.Sprintf("unacceptable schema name %q", to),
			Detail: `The prefix "pg_" is reserved for system schemas.`}
	}
	return s.tagOnly("ALTER SCHEMA", func(ctx context.Context) error {
		var id catalog.SchemaID
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			var ok bool
			if id, ok = v.SchemaByName(name); !ok {
				err = undefinedSchema(name)
			} else if id == catalog.PublicSchema {
				err = errorf(pgwire.CodeInsufficientPrivilege, "schema public cannot be renamed in mink")
			} else if err = s.schemaOwnerOnly(v, v.Schemas[id]); err == nil {
				if _, taken := v.SchemaByName(to); taken || to == "information_schema" || to == "pg_catalog" {
					err = errorf(pgwire.CodeDuplicateSchema, "schema %q already exists", to)
				}
			}
		})
		if err != nil {
			return err
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.RenameSchema{Schema: id, Name: to}); err != nil {
			if errors.Is(err, catalog.ErrExists) {
				return errorf(pgwire.CodeDuplicateSchema, "schema %q already exists", to)
			}
			return err
		}
		if s.tx.status == pgwire.TxInBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{renamedSchema: id, renamedFrom: name})
		}
		return nil
	}), nil
}

// planSetSchema plans ALTER TABLE|VIEW r SET SCHEMA s: one
// catalog.SetRelationSchema. The relation keeps its id, so its data,
// grants and the views that read it go with it.
func (s *session) planSetSchema(as *pg.AlterObjectSchemaStmt) (*stmt, error) {
	tag := "ALTER TABLE"
	if as.ObjectType == pg.ObjectType_OBJECT_VIEW {
		tag = "ALTER VIEW"
	}
	name, err := s.relName(as.Relation)
	if err != nil {
		return nil, err
	}
	return s.tagWithNotices(tag, func(ctx context.Context) ([]*pgwire.Error, error) {
		var rel catalog.TableID
		var bare string
		var schema catalog.SchemaID
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			var ok bool
			if schema, ok = v.SchemaByName(as.Newschema); !ok {
				err = undefinedSchema(as.Newschema)
				return
			}
			if t, ok := v.TableNamed(name); ok {
				rel, bare = t.ID, t.Spec.Name
			} else if sv, ok := v.ViewNamed(name); ok {
				rel, bare = sv.ID, sv.Spec.Name
			} else {
				return
			}
			if _, taken := v.RelationNamedIn(schema, bare); taken && v.QualifyIn(schema, bare) != name {
				err = errorf(pgwire.CodeDuplicateTable, "relation %q already exists in schema %q", bare, as.Newschema)
			}
		})
		if err != nil {
			return nil, err
		}
		if rel == 0 {
			if as.MissingOk {
				return []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion, "relation %q does not exist, skipping", name)}, nil
			}
			return nil, undefinedTable(name)
		}
		if err := s.checkPrivileges(ctx, viewOwnerNeeds([]string{name})); err != nil {
			return nil, err
		}
		if s.tx.status == pgwire.TxInBlock {
			return nil, unsupported("ALTER … SET SCHEMA in a transaction block is not supported by mink: run it on its own")
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.SetRelationSchema{Relation: rel, Schema: schema}); err != nil {
			if errors.Is(err, catalog.ErrExists) {
				return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists in schema %q", bare, as.Newschema)
			}
			return nil, err
		}
		return nil, nil
	}), nil
}

// rollbackSchemaDDL takes back a CREATE SCHEMA or ALTER SCHEMA … RENAME
// of a block that rolled back (rollbackDDL).
func (s *session) rollbackSchemaDDL(ctx context.Context, u undoDDL) {
	var rec catalog.Record
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		if u.renamedSchema != 0 {
			rec = catalog.RenameSchema{Schema: u.renamedSchema, Name: u.renamedFrom}
		} else if id, ok := v.SchemaByName(u.createdSchema); ok {
			rec = catalog.DropSchema{Schema: id}
		}
	})
	if rec == nil {
		return
	}
	if _, err := s.f.cfg.Meta.Propose(ctx, rec); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		s.f.cfg.Logger.Warn("rollback: could not take a schema statement back", "record", rec.Kind(), "err", err)
	}
}
