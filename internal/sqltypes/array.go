package sqltypes

import (
	"strings"
)

// codeMalformedArray is the SQLSTATE of array text that cannot be read
// (PostgreSQL's invalid_text_representation).
const codeMalformedArray = codeInvalidTextRepr

// ParseArrayText reads PostgreSQL's text form of a one-dimensional array,
// as array_in does: '{a,"b c",NULL,"NULL",\,}' has the elements a, "b c",
// NULL (nil), the string NULL and a comma. White space around an unquoted
// element is dropped; a backslash takes the next character literally, in
// or out of double quotes; an unquoted NULL (any case) is SQL NULL. '{}'
// is the empty array. Errors are *Error with SQLSTATE 22P02: malformed
// text ("malformed array literal"), and multi-dimensional arrays
// ('{{1,2},{3,4}}') and explicit bounds ('[0:1]={a,b}'), which mink does
// not store.
func ParseArrayText(s string) ([]*string, error) {
	malformed := func(detail string) error {
		// PostgreSQL sends the detail separately; mink's message has it
		// after the literal.
		return &Error{Code: codeMalformedArray, Message: "malformed array literal: \"" + s + "\" (" + detail + ")"}
	}
	i := skipSpace(s, 0)
	if i < len(s) && s[i] == '[' {
		return nil, errorf(codeMalformedArray, "array bounds are not supported by mink: %q", s)
	}
	if i >= len(s) || s[i] != '{' {
		return nil, malformed(`Array value must start with "{" or dimension information.`)
	}
	i++
	elems := []*string{}
	i = skipSpace(s, i)
	if i < len(s) && s[i] == '}' {
		if j := skipSpace(s, i+1); j != len(s) {
			return nil, malformed("Junk after closing right brace.")
		}
		return elems, nil
	}
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return nil, malformed("Unexpected end of input.")
		}
		if s[i] == '{' {
			return nil, errorf(codeMalformedArray, "multidimensional arrays are not supported by mink: %q", s)
		}
		var b strings.Builder
		quoted, escaped, keep := false, false, 0
		if s[i] == '"' {
			quoted = true
			i++
			for {
				if i >= len(s) {
					return nil, malformed("Unexpected end of input.")
				}
				c := s[i]
				if c == '\\' {
					if i+1 >= len(s) {
						return nil, malformed("Unexpected end of input.")
					}
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				i++
				if c == '"' {
					break
				}
				b.WriteByte(c)
			}
			i = skipSpace(s, i)
		} else {
			// Unquoted: up to a comma or the closing brace; trailing white
			// space that was not escaped is dropped.
			// keep is the length of b up to its last escaped or non-space
			// byte.
			for i < len(s) && s[i] != ',' && s[i] != '}' {
				c := s[i]
				switch {
				case c == '\\':
					if i+1 >= len(s) {
						return nil, malformed("Unexpected end of input.")
					}
					b.WriteByte(s[i+1])
					escaped = true
					i += 2
					keep = b.Len()
					continue
				case c == '"' || c == '{':
					return nil, malformed("Unexpected \"" + string(c) + "\" character.")
				}
				b.WriteByte(c)
				i++
				if !isArraySpace(c) {
					keep = b.Len()
				}
			}
			if keep == 0 && !escaped {
				return nil, malformed("Unexpected \"" + string(at(s, i)) + "\" character.")
			}
		}
		v := b.String()
		if !quoted {
			v = v[:keep]
		}
		if !quoted && !escaped && strings.EqualFold(v, "NULL") {
			elems = append(elems, nil)
		} else {
			elems = append(elems, &v)
		}
		if i >= len(s) {
			return nil, malformed("Unexpected end of input.")
		}
		switch s[i] {
		case ',':
			i++
		case '}':
			if j := skipSpace(s, i+1); j != len(s) {
				return nil, malformed("Junk after closing right brace.")
			}
			return elems, nil
		default:
			return nil, malformed("Unexpected array element.")
		}
	}
}

func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return '}'
}

func skipSpace(s string, i int) int {
	for i < len(s) && isArraySpace(s[i]) {
		i++
	}
	return i
}

// isArraySpace is C's isspace, which array_in and array_out use.
func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// AppendArrayElement appends one element of an array's text form as
// array_out writes it: in double quotes, with " and \ escaped by a
// backslash, when it is empty, is NULL in any case, or contains a brace, a
// double quote, a comma, a backslash or white space; as it is otherwise.
// A SQL NULL element is written NULL by the caller.
func AppendArrayElement(buf []byte, v string) []byte {
	if !arrayElementNeedsQuotes(v) {
		return append(buf, v...)
	}
	buf = append(buf, '"')
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '"' || c == '\\' {
			buf = append(buf, '\\')
		}
		buf = append(buf, v[i])
	}
	return append(buf, '"')
}

func arrayElementNeedsQuotes(v string) bool {
	if v == "" || strings.EqualFold(v, "NULL") {
		return true
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '{', '}', '"', ',', '\\':
			return true
		default:
			if isArraySpace(c) {
				return true
			}
		}
	}
	return false
}

// ArrayElemOID returns the element type OID of a PostgreSQL array type OID
// of a type mink has (1009 _text → 25 text); false for other OIDs.
func ArrayElemOID(oid uint32) (uint32, bool) {
	if oid == 0 {
		return 0, false
	}
	for k, a := range arrayOIDs {
		if a == oid {
			return scalarOIDs[k], true
		}
	}
	return 0, false
}

// ArrayOIDOf returns the array type OID whose elements have type OID elem
// (25 text → 1009 _text); false when mink has no such array type.
func ArrayOIDOf(elem uint32) (uint32, bool) {
	if elem == 0 {
		return 0, false
	}
	for k, s := range scalarOIDs {
		if s == elem && k < len(arrayOIDs) && arrayOIDs[k] != 0 {
			return arrayOIDs[k], true
		}
	}
	return 0, false
}
