package sqltypes

import "testing"

// Every column type comes back from its OID and typmod, as CREATE TABLE …
// AS reads a query's result description.
func TestFromOIDRoundTrip(t *testing.T) {
	for _, name := range []string{
		"boolean", "smallint", "integer", "bigint", "real", "double precision", "numeric", "numeric(12,2)",
		"text", "character varying", "character varying(5)", "character(3)", "bytea", "date", "time",
		"timestamp", "timestamptz", "interval", "uuid", "json", "jsonb",
		"integer[]", "text[]", "numeric(5,1)[]", "character varying(4)[]", "timestamptz[]", "jsonb[]",
	} {
		typ, err := Parse(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, ok := FromOID(typ.OID(), typ.TypMod())
		if !ok || got != typ {
			t.Errorf("FromOID(%d, %d) = %v, %v; want %s", typ.OID(), typ.TypMod(), got.Name(), ok, typ.Name())
		}
	}
	if _, ok := FromOID(705, -1); ok { // unknown
		t.Error("FromOID(unknown) has a type")
	}
	if _, ok := FromOID(2249, -1); ok { // record
		t.Error("FromOID(record) has a type")
	}
}
