package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunInsertSelect runs the insert-select workload on a few thousand
// rows so it stays compiled and working; it measures nothing useful. Each
// statement's rows are checked on both systems by the workload itself.
func TestRunInsertSelect(t *testing.T) {
	withPG := postgresInstalled(t)
	rep, err := MeasureInsertSelect(t.Context(), InsertSelectConfig{Dir: searchableTempDir(t), Rows: 3000, Runs: 2, SkipPostgres: !withPG})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteInsertSelectTable(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Mink) != len(insertSelectStatements) {
		t.Fatalf("%d statements measured, want %d", len(rep.Mink), len(insertSelectStatements))
	}
	for _, m := range rep.Mink {
		if len(m.Runs) != 2 || m.Rows == 0 {
			t.Errorf("mink: %s: %d runs of %d rows", m.Statement, len(m.Runs), m.Rows)
		}
	}
	if withPG && !strings.Contains(out.String(), "×**") {
		t.Errorf("no ratio to PostgreSQL in:\n%s", out.String())
	}
}
