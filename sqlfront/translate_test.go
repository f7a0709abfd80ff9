package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/catalog/catalogtest"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// TestTranslate runs the scripts in testdata/translate: what SQL the
// engine gets for a PostgreSQL query (rewrite.go, restype.go, numeric.go,
// arrays.go), with no node, engine or store. Commands:
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
		meta := &viewMeta{v: catalog.NewView()}
		s := &session{f: New(Config{Meta: meta}), settings: newSettings(pgwire.SessionInfo{User: "mink"}), tx: txState{status: pgwire.TxIdle}}
		s.tables = newTableRegistry(s)
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
					if o := catalog.Apply(meta.v, meta.v.Index+1, rec); o.Err != nil {
						d.Fatalf(t, "%s: %v", line, o.Err)
					}
				}
				return ""
			case "set":
				for _, a := range d.CmdArgs {
					s.settings.values[a.Key] = strings.Join(a.Vals, ", ")
				}
				return ""
			case "translate":
				sql := strings.TrimSpace(d.Input)
				tree, err := pg.Parse(sql)
				if err != nil || len(tree.Stmts) != 1 {
					d.Fatalf(t, "%s: %v", sql, err)
				}
				node := tree.Stmts[0].Stmt
				asWritten := stripPublic(sql, node)
				out, _, quotients := s.rewriteForEngine(sql, asWritten, node)
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

// viewMeta is a fixed metadata view, for tests that need tables but no
// metadata log.
type viewMeta struct{ v *catalog.View }

func (m *viewMeta) Propose(context.Context, catalog.Record) (catalog.Outcome, error) {
	return catalog.Outcome{}, errors.New("viewMeta: read-only")
}
func (m *viewMeta) Read(fn func(v *catalog.View)) { fn(m.v) }
func (m *viewMeta) Changed() <-chan struct{}      { return nil }
func (m *viewMeta) AppliedIndex() uint64          { return m.v.Index }
