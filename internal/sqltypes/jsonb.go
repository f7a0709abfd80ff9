package sqltypes

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// JSONBText returns JSON text the way PostgreSQL prints a jsonb value:
// object keys in jsonb's order (shorter first, then bytewise), the last of
// duplicate keys, ", " between elements and ": " after keys. Text that does
// not parse is returned as it is.
func JSONBText(s string) string {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return s
	}
	var b strings.Builder
	writeJSONB(&b, v)
	return b.String()
}

func writeJSONB(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if len(keys[i]) != len(keys[j]) {
				return len(keys[i]) < len(keys[j])
			}
			return keys[i] < keys[j]
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSONB(b, k)
			b.WriteString(": ")
			writeJSONB(b, v[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSONB(b, e)
		}
		b.WriteByte(']')
	default:
		// Strings as PostgreSQL escapes them: no \u003c for <, > and &.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // a string, json.Number, bool or nil
		b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
}
