package pgtree

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Walking parse trees. pg_query's trees are generated protobuf messages,
// so one reflective walk reaches every node of every statement kind,
// including the ones mink does not know by name; the walkers below are the
// only ones in sqlfront.

// WalkTree calls fn for m and then, in pre-order, for every message below
// it. A message's fields are read after fn returned, so fn may replace
// what is under the message it was given; when fn returns false, nothing
// below that message is visited.
func WalkTree(m protoreflect.Message, fn func(protoreflect.Message) bool) {
	if !m.IsValid() || !fn(m) {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				WalkTree(l.Get(i).Message(), fn)
			}
		default:
			WalkTree(v.Message(), fn)
		}
		return true
	})
}

// Walk calls fn for every message in a parse tree, depth first.
func Walk(m proto.Message, fn func(protoreflect.Message)) {
	WalkTree(m.ProtoReflect(), func(msg protoreflect.Message) bool {
		fn(msg)
		return true
	})
}

// Visit calls fn on n and then, if fn returns true, on the nodes under
// n as fn left it, in pre-order. Only *Node messages (the tree's
// expression and statement nodes) are passed to fn; the messages between
// them are walked through.
func Visit(n *Node, fn func(*Node) bool) {
	if n == nil {
		return
	}
	WalkTree(n.ProtoReflect(), func(m protoreflect.Message) bool {
		node, ok := m.Interface().(*Node)
		if !ok {
			return true
		}
		return node.Node != nil && fn(node)
	})
}

// RangeVars returns every table reference in a parse tree.
func RangeVars(node *Node) []*RangeVar {
	var out []*RangeVar
	Walk(node, func(m protoreflect.Message) {
		if rv, ok := m.Interface().(*RangeVar); ok {
			out = append(out, rv)
		}
	})
	return out
}
