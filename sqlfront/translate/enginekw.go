package translate

import "strings"

// engineKeywords are words that PostgreSQL takes as plain identifiers but
// DuckDB's grammar reserves or treats specially, so that a column or table
// named so (a table with a column "at") is a syntax error in the engine
// unless quoted. quoteEngineKeywords quotes them in SQL mink sends to the
// engine.
var engineKeywords = map[string]bool{
	"at": true, "columns": true, "map": true, "struct": true, "show": true,
	"generated": true, "describe": true, "semi": true, "anti": true, "glob": true,
	"lambda": true, "qualify": true, "pivot": true, "pivot_longer": true,
	"pivot_wider": true, "unpivot": true, "summarize": true, "try_cast": true,
	"unpack": true, "asof": true, "positional": true, "grouping_id": true,
}

// sqlWord is a bare word of SQL text at [start, end).
type sqlWord struct{ start, end int }

// bareWords returns the unquoted words of sql outside string literals,
// quoted identifiers and comments.
func bareWords(sql string) []sqlWord {
	var out []sqlWord
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'':
			i = skipQuoted(sql, i, '\'', i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e'))
		case c == '"':
			i = skipQuoted(sql, i, '"', false)
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '$':
			// $1 parameters, or $tag$ … $tag$ strings.
			j := i + 1
			for j < len(sql) && sql[j] != '$' && isWordByte(sql[j]) && !(sql[j] >= '0' && sql[j] <= '9' && j == i+1) {
				j++
			}
			if j < len(sql) && sql[j] == '$' {
				tag := sql[i : j+1]
				end := strings.Index(sql[j+1:], tag)
				if end < 0 {
					return out
				}
				i = j + 1 + end + len(tag)
			} else {
				i++
				for i < len(sql) && sql[i] >= '0' && sql[i] <= '9' {
					i++
				}
			}
		case isWordByte(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			out = append(out, sqlWord{i, j})
			i = j
		case c >= '0' && c <= '9':
			for i < len(sql) && (isWordByte(sql[i]) || sql[i] == '.') {
				i++
			}
		default:
			i++
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// skipQuoted returns the index after the quoted text starting at sql[i]
// (a doubled quote is one quote; backslash escapes when escapes).
func skipQuoted(sql string, i int, q byte, escapes bool) int {
	for i++; i < len(sql); i++ {
		switch {
		case escapes && sql[i] == '\\':
			i++
		case sql[i] == q:
			if i+1 < len(sql) && sql[i+1] == q {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(sql)
}

// engineKeywordUses returns the words of sql that name something but are
// keywords of the engine (engineKeywords): not followed by "(" (a call,
// such as DuckDB's own map(…) or COLUMNS(…)), and "at" not in AT TIME
// ZONE or AT LOCAL.
func engineKeywordUses(sql string) []sqlWord {
	words := bareWords(sql)
	var out []sqlWord
	for k, w := range words {
		word := strings.ToLower(sql[w.start:w.end])
		if !engineKeywords[word] {
			continue
		}
		rest := strings.TrimLeft(sql[w.end:], " \t\r\n")
		if strings.HasPrefix(rest, "(") {
			continue
		}
		if word == "at" && k+1 < len(words) {
			next := strings.ToLower(sql[words[k+1].start:words[k+1].end])
			if next == "time" || next == "local" {
				continue
			}
		}
		out = append(out, w)
	}
	return out
}

// quoteEngineKeywords quotes the engine-keyword identifiers of sql.
func quoteEngineKeywords(sql string) string {
	uses := engineKeywordUses(sql)
	if len(uses) == 0 {
		return sql
	}
	var b strings.Builder
	prev := 0
	for _, w := range uses {
		b.WriteString(sql[prev:w.start])
		b.WriteString(`"` + strings.ToLower(sql[w.start:w.end]) + `"`)
		prev = w.end
	}
	b.WriteString(sql[prev:])
	return b.String()
}
