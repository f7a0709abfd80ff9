package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Flight SQL through the ADBC Flight SQL driver (adbc_driver_flightsql,
// PyPI), against the real binary with a password: DDL and DML sent as
// queries, a query's Arrow schema and rows, a prepared statement with a
// parameter, executemany's row count, adbc_get_objects, the driver's
// info, and a missing table's SQLSTATE.
func TestFlightSQLADBC(t *testing.T) {
	python := filepath.Join(kafkaClientCache(t), "adbc-venv", "bin", "python")
	if out, err := exec.Command(python, "-c", "import adbc_driver_flightsql.dbapi, pyarrow").CombinedOutput(); err != nil {
		t.Fatalf("adbc_driver_flightsql is not installed in %s (%v: %s): %s", python, err, out, installHint)
	}
	n := startSecureNode(t, t.TempDir(), "root pw")
	cmd := exec.Command(python, "../../test/clients/flightsql_adbc.py", n.flightAddr(), "mink", "root pw")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // the driver warns that autocommit cannot be disabled: mink has no Flight SQL transactions
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("flightsql_adbc.py: %v\n%s%s", err, out, stderr.Bytes())
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("flightsql_adbc.py printed %q: %v\n%s", sc.Text(), err, out)
		}
		steps[fmt.Sprint(m["step"])] = m
	}
	want := func(step, field, value string) {
		t.Helper()
		got, err := json.Marshal(steps[step][field])
		if err != nil || string(got) != value {
			t.Errorf("%s %s: %s, want %s", step, field, got, value)
		}
	}
	want("query", "schema", `["id:int64","name:string","score:double"]`)
	want("query", "rows", `[{"id":1,"name":"one","score":1.5},{"id":2,"name":"two","score":null},{"id":3,"name":"three","score":3.5}]`)
	want("prepared", "rows", `[["two"],["three"]]`)
	want("dml", "inserted", `2`)
	want("dml", "count", `5`)
	want("dml", "kv", `[[1,"a"],[2,"B"]]`)
	want("objects", "tables", `[["mink","public","adbc_t","TABLE",["id","name","score"]]]`)
	want("info", "vendor", `"mink"`)
	e := steps["error"]
	msg, _ := e["message"].(string)
	if !strings.Contains(msg, "(SQLSTATE 42P01)") || !strings.Contains(msg, `relation "nosuch" does not exist`) {
		t.Errorf("error: %v, want the message with SQLSTATE 42P01", e)
	}
	// The driver maps the gRPC code to ADBC's NOT_FOUND and passes the
	// status details through (its sqlstate attribute stays unset).
	if !strings.HasPrefix(msg, "NOT_FOUND:") || e["cls"] != "ProgrammingError" {
		t.Errorf("error %v, want NOT_FOUND, a ProgrammingError", e)
	}
	if details := fmt.Sprint(e["details"]); !strings.Contains(details, "google.rpc.ErrorInfo") || !strings.Contains(details, "SQLSTATE_42P01") || !strings.Contains(details, "sqlstate") {
		t.Errorf("error details %s, want an ErrorInfo with sqlstate 42P01", details)
	}
	if t.Failed() {
		t.Logf("flightsql_adbc.py printed:\n%s", out)
	}
}
