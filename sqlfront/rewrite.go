package sqlfront

import (
	"sort"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// walk calls fn for every message in a parse tree, depth first.
func walk(m proto.Message, fn func(protoreflect.Message)) {
	var visit func(protoreflect.Message)
	visit = func(msg protoreflect.Message) {
		fn(msg)
		msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					visit(l.Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap():
				visit(v.Message())
			}
			return true
		})
	}
	visit(m.ProtoReflect())
}

// rangeVars returns every table reference in a parse tree.
func rangeVars(node *pg.Node) []*pg.RangeVar {
	var out []*pg.RangeVar
	walk(node, func(m protoreflect.Message) {
		if rv, ok := m.Interface().(*pg.RangeVar); ok {
			out = append(out, rv)
		}
	})
	return out
}

// stripPublic removes "public." (and "mink.public.") qualifiers from the
// table references in sql: mink's tables are the engine's temporary views,
// which live outside any schema named public. Edits are made on the text at
// the parser's locations, so the rest of the statement is sent as written.
func stripPublic(sql string, node *pg.Node) string {
	type cut struct{ from, to int }
	var cuts []cut
	for _, rv := range rangeVars(node) {
		if rv.Schemaname != "public" || rv.Location < 0 || int(rv.Location) >= len(sql) {
			continue
		}
		at := int(rv.Location)
		rest := sql[at:]
		n := 0
		for _, prefix := range []string{"mink.", `"mink".`} {
			if rv.Catalogname != "" && hasPrefixFold(rest[n:], prefix) {
				n += len(prefix)
			}
		}
		for _, prefix := range []string{"public.", `"public".`} {
			if hasPrefixFold(rest[n:], prefix) {
				n += len(prefix)
				cuts = append(cuts, cut{at, at + n})
				break
			}
		}
	}
	if len(cuts) == 0 {
		return sql
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].from > cuts[j].from })
	for _, c := range cuts {
		sql = sql[:c.from] + sql[c.to:]
	}
	return sql
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
