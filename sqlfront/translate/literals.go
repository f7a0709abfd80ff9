package translate

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/sqltypes"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// PostgreSQL's literals and type names, read as PostgreSQL reads them.

// TypeOf resolves a column's type name.
func TypeOf(tn *pg.TypeName) (sqltypes.Type, error) {
	var name string
	for _, n := range tn.Names {
		if str := n.GetString_(); str != nil && str.Sval != "pg_catalog" {
			name = str.Sval
		}
	}
	if len(tn.ArrayBounds) > 0 && !strings.HasPrefix(name, "_") {
		// int[], int[3][3], int ARRAY: one-dimensional arrays of int, as
		// in PostgreSQL, which ignores sizes and dimensions of the type.
		name = "_" + name
	}
	var mods []int32
	for _, m := range tn.Typmods {
		c := m.GetAConst()
		if c == nil || c.GetIval() == nil {
			return sqltypes.Type{}, pgwire.Errorf(pgwire.CodeSyntaxError, "type modifiers must be simple constants")
		}
		mods = append(mods, c.GetIval().Ival)
	}
	return sqltypes.Lookup(name, mods)
}

// StringLiteral returns the text of a string constant, and the type it is
// cast to ('\x41'::bytea, as drivers that interpolate parameters send
// them); the zero Type when it is not cast.
func StringLiteral(n *pg.Node) (string, sqltypes.Type, bool) {
	var typ sqltypes.Type
	if tc := n.GetTypeCast(); tc != nil {
		t, err := TypeOf(tc.TypeName)
		if err != nil {
			return "", typ, false // the engine reports it
		}
		typ, n = t, tc.Arg
	}
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return "", typ, false
	}
	if sv, ok := c.Val.(*pg.A_Const_Sval); ok {
		return sv.Sval.Sval, typ, true
	}
	return "", typ, false
}

// typedLiteralCast is the string constant text cast to typ.
func typedLiteralCast(text string, typ sqltypes.Type) (*pg.Node, error) {
	return CastTo(&pg.Node{Node: &pg.Node_AConst{AConst: &pg.A_Const{Val: &pg.A_Const_Sval{Sval: &pg.String{Sval: text}}, Location: -1}}}, typ)
}

// IsNumber reports whether typ is an integer, float or numeric type.
func IsNumber(typ sqltypes.Type) bool {
	switch typ.Kind() {
	case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8, sqltypes.Float4, sqltypes.Float8, sqltypes.Numeric:
		return true
	}
	return false
}

// CastTo wraps n in a cast to typ.
func CastTo(n *pg.Node, typ sqltypes.Type) (*pg.Node, error) {
	cast, err := pg.ParseExpr("CAST(NULL AS " + typ.Name() + ")")
	if err != nil {
		return nil, err
	}
	cast.GetTypeCast().Arg = n
	return cast, nil
}

// pgInteger is the text PostgreSQL 15's integer input functions accept.
var pgInteger = regexp.MustCompile(`^\s*[+-]?[0-9]+\s*$`)

// IntegerInput reports whether text is an integer as PostgreSQL 15's
// integer input functions read it (sign, digits, surrounding spaces).
func IntegerInput(text string) bool { return pgInteger.MatchString(text) }

// TypedLiteral reads a string constant in VALUES the way PostgreSQL reads an
// unknown-type literal assigned to a column: with the column type's input
// function. Where the engine's text cast reads the text differently, it
// returns an expression for the engine that yields the PostgreSQL value;
// nil means the engine's cast already agrees.
func TypedLiteral(text string, typ sqltypes.Type) (*pg.Node, error) {
	switch typ.Kind() {
	case sqltypes.Array:
		return arrayLiteral(text, typ)
	case sqltypes.Bytea:
		// DuckDB reads '\x41' as one escaped byte, PostgreSQL as hex.
		b, err := byteaInput(text)
		if err != nil {
			return nil, err
		}
		return pg.ParseExpr("from_hex('" + hex.EncodeToString(b) + "')")
	case sqltypes.Interval:
		// DuckDB does not read PostgreSQL's own output ("1 year 2 mons",
		// "-1 mons +00:00:01"); pgtype does. Other forms ("90 minutes")
		// are left to the engine.
		var iv pgtype.Interval
		if err := iv.Scan(strings.TrimSpace(text)); err != nil || !iv.Valid {
			return nil, nil
		}
		return pg.ParseExpr(fmt.Sprintf("to_months(%d) + to_days(%d) + to_microseconds(%d)", iv.Months, iv.Days, iv.Microseconds))
	case sqltypes.Bool:
		// DuckDB does not take 'on', 'off' or prefixes such as 'tr'.
		v, ok := boolInput(text)
		if !ok {
			return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type boolean: %q", text)
		}
		return pg.ParseExpr(strconv.FormatBool(v))
	case sqltypes.Timestamptz:
		// DuckDB does not read an offset after a time without seconds
		// ('10:00+01'); PostgreSQL does.
		if m := offsetNoSecondsRE.FindStringSubmatchIndex(text); m != nil {
			return typedLiteralCast(text[:m[3]]+":00"+text[m[3]:], typ)
		}
	case sqltypes.Float4, sqltypes.Float8:
		// DuckDB reads '1e309' as infinity; PostgreSQL refuses it.
		return nil, CheckFloat(text, typ)
	case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8:
		// DuckDB rounds '1.5' to 2; PostgreSQL refuses it.
		if !IntegerInput(text) {
			return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type %s: %q", typ.Name(), text)
		}
	}
	return nil, nil
}

// CheckFloat rejects a number that does not fit a real or double precision
// column (overflow to infinity or underflow to zero), as PostgreSQL does.
// Text that is not a number is left to the engine.
func CheckFloat(text string, typ sqltypes.Type) error {
	bits := 64
	switch typ.Kind() {
	case sqltypes.Float4:
		bits = 32
	case sqltypes.Float8:
	default:
		return nil
	}
	t := strings.TrimSpace(text)
	f, err := strconv.ParseFloat(t, bits)
	mantissa, _, _ := strings.Cut(strings.ToLower(t), "e")
	underflow := err == nil && f == 0 && strings.ContainsAny(mantissa, "123456789")
	if errors.Is(err, strconv.ErrRange) || underflow {
		return pgwire.Errorf(pgwire.CodeNumericValueOutOfRange, "%q is out of range for type %s", text, typ.Name())
	}
	return nil
}

// boolInput reads a boolean the way PostgreSQL's boolin does: true, yes,
// on, 1 and their opposites, case-insensitive, surrounding white space
// ignored, and any unambiguous prefix of the words.
func boolInput(text string) (value, ok bool) {
	t := strings.ToLower(strings.TrimSpace(text))
	if t == "" {
		return false, false
	}
	switch t {
	case "1":
		return true, true
	case "0":
		return false, true
	case "on":
		return true, true
	case "of", "off":
		return false, true
	case "o":
		return false, false // on or off?
	}
	for _, w := range []struct {
		word  string
		value bool
	}{{"true", true}, {"false", false}, {"yes", true}, {"no", false}} {
		if strings.HasPrefix(w.word, t) {
			return w.value, true
		}
	}
	return false, false
}

// byteaInput decodes PostgreSQL's bytea text input: hex (\x0102ff) or the
// escape format (backslash-octal \ooo and \\, every other byte as is).
func byteaInput(text string) ([]byte, error) {
	if strings.HasPrefix(text, `\x`) {
		digits := make([]byte, 0, len(text)-2)
		for i := 2; i < len(text); i++ {
			c := text[i]
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
				continue // PostgreSQL allows white space between bytes
			case strings.IndexByte("0123456789abcdefABCDEF", c) < 0:
				return nil, pgwire.Errorf(pgwire.CodeInvalidParameterValue, "invalid hexadecimal digit: %q", string(c))
			}
			digits = append(digits, c)
		}
		if len(digits)%2 != 0 {
			return nil, pgwire.Errorf(pgwire.CodeInvalidParameterValue, "invalid hexadecimal data: odd number of digits")
		}
		out := make([]byte, len(digits)/2)
		_, err := hex.Decode(out, digits)
		return out, err
	}
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(text) && text[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(text) && isOctal(text[i+1]) && text[i+1] <= '3' && isOctal(text[i+2]) && isOctal(text[i+3]):
			out = append(out, (text[i+1]-'0')<<6|(text[i+2]-'0')<<3|(text[i+3]-'0'))
			i += 3
		default:
			return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type bytea")
		}
	}
	return out, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
