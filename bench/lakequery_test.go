package bench

import (
	"bytes"
	"testing"
)

// TestRunLakeQuery runs the lake query benchmark with a few thousand rows so
// it stays compiled and working; it measures nothing useful, but it checks
// that mink's union read (and its mirrors filled from the lake after a
// restart) return the same results as DuckDB reading the lake's Parquet
// files.
func TestRunLakeQuery(t *testing.T) {
	rep, err := MeasureLakeQuery(t.Context(), LakeQueryConfig{Dir: t.TempDir(), Rows: 5000, ChunkRows: 2000, Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteLakeQueryTable(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Results) != len(Queries) || len(rep.Mirrored) != len(Queries) {
		t.Fatalf("%d and %d results for %d queries", len(rep.Results), len(rep.Mirrored), len(Queries))
	}
	if len(rep.Selective) != len(SelectiveLakeQueries(5000)) {
		t.Fatalf("%d selective results", len(rep.Selective))
	}
	if rep.Files == 0 || rep.Bytes == 0 {
		t.Fatalf("lake of facts: %d files, %d bytes", rep.Files, rep.Bytes)
	}
}
