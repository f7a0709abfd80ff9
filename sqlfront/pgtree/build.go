package pgtree

import (
	"fmt"
	"strings"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Names returns the String nodes of a qualified name (schema, name).
func Names(parts ...string) []*Node {
	out := make([]*Node, len(parts))
	for i, p := range parts {
		out[i] = &Node{Node: &Node_String_{String_: &String{Sval: p}}}
	}
	return out
}

// Call returns a call of the function name.
func Call(name string, args ...*Node) *Node {
	return &Node{Node: &Node_FuncCall{FuncCall: &FuncCall{Funcname: Names(name), Args: args, Funcformat: CoercionForm_COERCE_EXPLICIT_CALL}}}
}

// StringConst returns a string constant (of type unknown, as in SQL).
func StringConst(s string) *Node {
	return &Node{Node: &Node_AConst{AConst: &A_Const{Val: &A_Const_Sval{Sval: &String{Sval: s}}}}}
}

// IntConst returns an integer constant; outside int4 it is a numeric
// constant, as the grammar makes it.
func IntConst(v int64) *Node {
	if v > 1<<31-1 || v < -1<<31 {
		return &Node{Node: &Node_AConst{AConst: &A_Const{Val: &A_Const_Fval{Fval: &Float{Fval: fmt.Sprint(v)}}}}}
	}
	return &Node{Node: &Node_AConst{AConst: &A_Const{Val: &A_Const_Ival{Ival: &Integer{Ival: int32(v)}}}}}
}

// BoolConst returns a boolean constant.
func BoolConst(v bool) *Node {
	return &Node{Node: &Node_AConst{AConst: &A_Const{Val: &A_Const_Boolval{Boolval: &Boolean{Boolval: v}}}}}
}

// NullConst returns NULL.
func NullConst() *Node {
	return &Node{Node: &Node_AConst{AConst: &A_Const{Isnull: true}}}
}

// Cast returns n cast to the type typ.
func Cast(n *Node, typ string) *Node {
	return &Node{Node: &Node_TypeCast{TypeCast: &TypeCast{Arg: n, TypeName: &TypeName{Names: Names(typ), Typemod: -1}}}}
}

// CastArray returns n cast to an array of elem.
func CastArray(n *Node, elem string) *Node {
	bounds := []*Node{{Node: &Node_Integer{Integer: &Integer{Ival: -1}}}}
	return &Node{Node: &Node_TypeCast{TypeCast: &TypeCast{Arg: n, TypeName: &TypeName{Names: Names(elem), Typemod: -1, ArrayBounds: bounds}}}}
}

// Target returns a result column name AS val (or an UPDATE SET target).
func Target(name string, val *Node) *Node {
	return &Node{Node: &Node_ResTarget{ResTarget: &ResTarget{Name: name, Val: val}}}
}

// FuncName returns a function's schema (lower case, "" if none) and name.
func FuncName(fc *FuncCall) (schema, name string) {
	n := fc.Funcname
	name = strings.ToLower(n[len(n)-1].GetString_().GetSval())
	if len(n) > 1 {
		schema = strings.ToLower(n[len(n)-2].GetString_().GetSval())
	}
	return schema, name
}

// ArrayConsts parses a one-dimensional PostgreSQL array literal
// ({a,"b c",NULL}) into text constants, as array_in reads it.
func ArrayConsts(lit string) ([]*Node, bool) {
	texts, err := sqltypes.ParseArrayText(lit)
	if err != nil {
		return nil, false
	}
	elems := make([]*Node, len(texts))
	for i, t := range texts {
		if t == nil {
			elems[i] = NullConst()
		} else {
			elems[i] = StringConst(*t)
		}
	}
	return elems, true
}
