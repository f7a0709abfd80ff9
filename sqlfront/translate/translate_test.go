package translate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/catalog/catalogtest"
)

// TestTranslate runs the scripts in testdata/translate: what SQL the
// engine gets for a PostgreSQL query (rewrite.go, restype.go, numeric.go,
// arrays.go), with no node, engine or store: the tables come from
// catalog records. Commands:
//
//	apply
//	<catalog records in catalogtest.ParseRecord's syntax: the tables>
//	----
//
//	set name=(value, …)
//	----
//	(the setting's value as SET stores it: datestyle=(German, DMY))
//
//	translate
//	<one SELECT>
//	----
//	<the engine's SQL, "as written" when nothing but public. was changed>
//	[quotients: <result columns computed as exact quotient text>]
//
// Run with -rewrite to update the expected output, and read it: each
// translation is the contract between PostgreSQL's semantics and the
// engine's.
func TestTranslate(t *testing.T) {
	datadriven.Walk(t, "testdata/translate", func(t *testing.T, path string) {
		env := &viewEnv{v: catalog.NewView(), dateStyle: "ISO, MDY"}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "apply":
				for _, line := range strings.Split(d.Input, "\n") {
					if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					rec, err := catalogtest.ParseRecord(line)
					if err != nil {
						d.Fatalf(t, "%s: %v", line, err)
					}
					if o := catalog.Apply(env.v, env.v.Index+1, rec); o.Err != nil {
						d.Fatalf(t, "%s: %v", line, o.Err)
					}
				}
				return ""
			case "set":
				for _, a := range d.CmdArgs {
					if a.Key != "datestyle" {
						d.Fatalf(t, "translation reads no setting %s", a.Key)
					}
					env.dateStyle = strings.Join(a.Vals, ", ")
				}
				return ""
			case "translate":
				sql := strings.TrimSpace(d.Input)
				tree, err := pg.Parse(sql)
				if err != nil || len(tree.Stmts) != 1 {
					d.Fatalf(t, "%s: %v", sql, err)
				}
				node := tree.Stmts[0].Stmt
				asWritten := StripPublic(sql, node)
				out, _, quotients := Query(env, sql, asWritten, node)
				var b strings.Builder
				if out == asWritten {
					b.WriteString("as written\n")
				} else {
					b.WriteString(out + "\n")
				}
				if len(quotients) > 0 {
					var cols []string
					for c := range quotients {
						cols = append(cols, fmt.Sprint(c))
					}
					slices.Sort(cols)
					fmt.Fprintf(&b, "quotients: %s\n", strings.Join(cols, ", "))
				}
				return b.String()
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// viewEnv is a session of user mink over the tables of a view.
type viewEnv struct {
	v         *catalog.View
	dateStyle string
}

func (e *viewEnv) Table(rv *pg.RangeVar) ([]sqltypes.Column, uint32, bool) {
	if rv.Schemaname != "" && rv.Schemaname != "public" {
		return nil, 0, false
	}
	t, ok := e.v.TableNamed(rv.Relname)
	if !ok {
		return nil, 0, false
	}
	var cols []sqltypes.Column
	for _, c := range t.Spec.Columns {
		typ, err := sqltypes.Parse(c.Type)
		if err != nil {
			return nil, 0, false
		}
		cols = append(cols, sqltypes.Column{Name: c.Name, Type: typ, NotNull: c.NotNull})
	}
	return cols, pgcatalog.TableOID(t.ID), true
}

func (e *viewEnv) PrimaryKey(rv *pg.RangeVar) []string {
	if t, ok := e.v.TableNamed(rv.Relname); ok && (rv.Schemaname == "" || rv.Schemaname == "public") {
		return t.Spec.PrimaryKey
	}
	return nil
}

func (e *viewEnv) User() string      { return "mink" }
func (e *viewEnv) DateStyle() string { return e.dateStyle }
