package flightwire

import "testing"

// The schema tag is the same for the same columns and differs after each
// change that makes rows read differently.
func TestSchemaTag(t *testing.T) {
	seven := "7"
	base := []Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}}
	tag := SchemaTag(base, nil)
	if tag != SchemaTag([]Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}}, nil) {
		t.Fatal("the same columns give another tag")
	}
	for name, cols := range map[string][]Column{
		"renamed":    {{Name: "id", Type: "bigint", NotNull: true}, {Name: "w", Type: "text"}},
		"added":      append(append([]Column{}, base...), Column{Name: "n", Type: "integer", Added: true, Missing: &seven}),
		"retyped":    {{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "varchar(3)"}},
		"one column": base[:1],
		"not null v": {{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text", NotNull: true}},
	} {
		if SchemaTag(cols, nil) == tag {
			t.Errorf("%s: the tag did not change", name)
		}
	}
	dropped := SchemaTag(base, []DroppedColumn{{Position: 1, Column: Column{Name: "........pg.dropped.2........", Type: "text"}}})
	if dropped == tag {
		t.Error("a dropped column did not change the tag")
	}
}
