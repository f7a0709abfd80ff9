package sqlfront

import (
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Walking parse trees. pg_query's trees are generated protobuf messages,
// so one reflective walk reaches every node of every statement kind,
// including the ones mink does not know by name; the walkers below are the
// only ones in the package.

// walkTree calls fn for m and then, in pre-order, for every message below
// it. A message's fields are read after fn returned, so fn may replace
// what is under the message it was given; when fn returns false, nothing
// below that message is visited.
func walkTree(m protoreflect.Message, fn func(protoreflect.Message) bool) {
	if !m.IsValid() || !fn(m) {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkTree(l.Get(i).Message(), fn)
			}
		default:
			walkTree(v.Message(), fn)
		}
		return true
	})
}

// walk calls fn for every message in a parse tree, depth first.
func walk(m proto.Message, fn func(protoreflect.Message)) {
	walkTree(m.ProtoReflect(), func(msg protoreflect.Message) bool {
		fn(msg)
		return true
	})
}

// visitNode calls fn on n and then, if fn returns true, on the nodes under
// n as fn left it, in pre-order. Only *pg.Node messages (the tree's
// expression and statement nodes) are passed to fn; the messages between
// them are walked through.
func visitNode(n *pg.Node, fn func(*pg.Node) bool) {
	if n == nil {
		return
	}
	walkTree(n.ProtoReflect(), func(m protoreflect.Message) bool {
		node, ok := m.Interface().(*pg.Node)
		if !ok {
			return true
		}
		return node.Node != nil && fn(node)
	})
}
