package pgwire

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// psql runs the psql binary against ts and returns its stdout, stderr and
// exit code. env entries are added to a clean environment.
func psql(t *testing.T, ts *testServer, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin := requireBinary(t, "psql")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := []string{"-X", "-h", ts.host, "-p", ts.port, "-U", "mink", "-d", "mink"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=10", "PGTZ=UTC"}, env...)
	cmd.Dir = home
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("psql: %v", err)
	}
	return out.String(), errOut.String(), code
}

func TestPsql(t *testing.T) {
	ts := startServer(t, Config{})

	// Aligned output, as a user sees it.
	out, errOut, code := psql(t, ts, nil, "-c", "select * from t")
	want := `
 id |    name     | ok | score |              ts               | amount |    data    |    day     |                 uid                  |   doc
----+-------------+----+-------+-------------------------------+--------+------------+------------+--------------------------------------+----------
  1 | alpha       | t  |   1.5 | 2024-01-02 03:04:05.123456+00 | 123.45 | \xdeadbeef | 2024-01-02 | 12345678-9abc-def0-1234-56789abcdef0 | {"a": 1}
  2 | bé      tab | f  | -0.25 | 1999-12-31 23:59:59+00        |  -0.50 | \x         | 1999-12-31 | 00000000-0000-0000-0000-000000000001 | [1, 2]
  3 |             |    |       |                               |        |            |            |                                      |
(3 rows)
`
	if code != 0 || trimLines(out) != trimLines(want) {
		t.Errorf("psql -c 'select * from t' (exit %d, stderr %q):\n%s\nwant:\n%s", code, errOut, out, want)
	}

	// Several statements in one -c: psql shows every result.
	out, errOut, code = psql(t, ts, nil, "-A", "-t", "-c", "select 1; select n from series(3); create table x")
	if code != 0 || out != "1\n1\n2\n3\nCREATE TABLE\n" {
		t.Errorf("multi-statement -c: exit %d %q %q", code, out, errOut)
	}

	// An error shows the message and the caret under the position.
	_, errOut, code = psql(t, ts, nil, "-c", "select * from missing")
	wantErr := "ERROR:  relation \"missing\" does not exist\nLINE 1: select * from missing\n                      ^\n"
	if code != 1 || errOut != wantErr {
		t.Errorf("error: exit %d\n%s\nwant\n%s", code, errOut, wantErr)
	}
}

func TestPsqlScriptAndCopy(t *testing.T) {
	ts := startServer(t, Config{})
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csvPath, []byte("id,name,score\n1,\"comma, inside\",1.5\n2,,\n3,\"multi\nline\",-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	txtPath := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(txtPath, []byte("4\ttab\\there\t4\n5\t\\N\t\\N\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, "out.csv")
	script := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(script, []byte(`
begin;
select 1;
commit;
\copy c from '`+csvPath+`' with (format csv, header)
\copy c from '`+txtPath+`'
\copy c to '`+outPath+`' with (format csv)
\copy c to stdout
select n from series(2);
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := psql(t, ts, nil, "-v", "ON_ERROR_STOP=1", "-A", "-t", "-f", script)
	wantOut := "BEGIN\n1\nCOMMIT\nCOPY 3\nCOPY 2\nCOPY 5\n" +
		"1\tcomma, inside\t1.5\n2\t\\N\t\\N\n3\tmulti\\nline\t-2\n4\ttab\\there\t4\n5\t\\N\t\\N\n" +
		"1\n2\n"
	if code != 0 || out != wantOut {
		t.Errorf("script: exit %d, stderr %q\n got %q\nwant %q", code, errOut, out, wantOut)
	}
	written, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "1,\"comma, inside\",1.5\n2,,\n3,\"multi\nline\",-2\n4,tab\there,4\n5,,\n"; string(written) != want {
		t.Errorf("\\copy to file wrote %q, want %q", written, want)
	}

	// A bad row fails the whole \copy, with the line in the context, and
	// stores nothing.
	badPath := filepath.Join(dir, "bad.csv")
	os.WriteFile(badPath, []byte("10,a,1\n11,b,2\nx12,c,3\n13,d,4\n"), 0o644)
	_, errOut, code = psql(t, ts, nil, "-c", `\copy c from '`+badPath+`' csv`)
	wantErr := "ERROR:  invalid input syntax for type bigint: \"x12\"\nCONTEXT:  COPY c, line 3, column id: \"x12\"\n"
	if code != 1 || errOut != wantErr {
		t.Errorf("bad \\copy: exit %d\n%s\nwant\n%s", code, errOut, wantErr)
	}
	if n := len(ts.h.committed()); n != 5 {
		t.Errorf("%d rows stored, want the 5 of the good COPYs", n)
	}
}

// trimLines drops trailing blanks of every line and blank lines around.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
