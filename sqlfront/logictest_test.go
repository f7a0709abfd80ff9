package sqlfront_test

// SQL logic tests: files of statements and their expected results under
// testdata/logic/*.test, run against an in-process node (minktest) through
// pgx's pgconn in three ways, each with a fresh node:
//
//	simple    the simple query protocol; results in text
//	extended  Parse/Describe (unnamed statement) then Bind/Execute; results
//	          in text, column types from the statement's Describe
//	binary    like extended with every result column in binary; each value
//	          is decoded with pgx's pgtype and compared with the expected
//	          text decoded the same way (so binary and text must agree)
//
// The expected output is what PostgreSQL 15 returns. `go test -run
// TestLogic -logic.pg 'postgres://…'` runs the files against a real
// PostgreSQL instead (each file in a fresh database), which is how the
// expected output is checked; records that only make sense for one of them
// are marked with onlyif/skipif. `-logic.rewrite -logic.pg URL` writes
// PostgreSQL's results of the simple run back into the files, keeping the
// records that did not run as they are; `-logic.rewrite` alone rewrites the
// records marked onlyif mink from mink. `-logic.file name` runs one file.
//
// # Format
//
// A file is a sequence of records separated by blank lines. Lines starting
// with # outside a record are comments.
//
//	statement ok [TAG]
//	<SQL, one or more lines>
//
// runs the SQL and expects success; with TAG (`INSERT 0 3`, `CREATE
// TABLE`), the command tag must match too. A ---- section after the SQL
// lists the notices and warnings the statement must send, one a line as
// "SEVERITY SQLSTATE message" (an empty section: none).
//
//	statement error SQLSTATE [message]
//	<SQL>
//
// expects an error with that SQLSTATE (and exactly that primary message,
// when given, with line breaks and tabs written \n and \t). A ---- section
// after the SQL lists more fields the error must have, one a line as
// "FIELD value": DETAIL, HINT or CONSTRAINT (the constraint name).
//
//	query TYPES [rowsort] [colnames] [catalogtypes]
//	<SQL>
//	----
//	<expected rows>
//
// expects rows. TYPES has one letter per result column, the column's
// PostgreSQL type as the server describes it (a new record may leave TYPES
// out for a rewrite to fill in):
//
//	B boolean   S smallint  I integer   L bigint     F real
//	R double precision      N numeric   T text       V varchar
//	C char(n)/bpchar        X bytea     D date       M time
//	P timestamp Z timestamptz           E interval   U uuid
//	J json      K jsonb     O oid       Y any array  ? anything else
//
// Each expected row is one line: the columns' text forms (as PostgreSQL
// sends them in text format) joined by " | ". NULL is written NULL, the
// empty string (empty), and a line break inside a value \n. rowsort sorts
// the rows (as rendered) before comparing, for queries without a total
// ORDER BY. colnames makes the first line the column names, joined by
// " | ". catalogtypes lets mink describe a column that PostgreSQL
// describes with a catalog type outside the letters (?: name, "char",
// regproc, aclitem[], pg_node_tree, int2vector, xid, …) as text (T), an
// array (Y) or oid (O), as mink does (docs/sql-catalog.md); for catalog
// queries sent as tools send them.
//
//	copy ok N
//	copy error SQLSTATE [message]
//	<COPY … FROM STDIN statement, one line>
//	----
//	<data lines, sent verbatim, each followed by \n>
//
// runs a COPY FROM STDIN with the data and expects N rows copied, or the
// error.
//
//	connection NAME
//
// switches the following records to the session NAME (opened on first
// use; the first session is "default"). Sessions are how a test shows what
// another connection sees.
//
//	restart [mirrors=on|off]
//
// closes every session and stops the node cleanly (Server.Close: buckets
// flushed and handed back, the metadata log and etcd closed), then starts
// a new node on the same data directory: the embedded etcd's metadata log,
// the object store (streams, KV snapshots, the lake) and the local caches,
// so what follows reads only what the node made durable. Sessions reopen
// on first use (a session's settings are gone, as after any reconnect).
// mirrors=off starts the new node with the engine's mirrors of log tables
// off (server.Config.DisableSQLMirrors: every SELECT reads the buckets and
// the lake directly), mirrors=on with them on again (the default). On
// PostgreSQL only the sessions are closed.
//
//	tier TABLE [TABLE…]
//
// runs a tiering round of each TABLE, the rounds at once, and waits for
// them to finish (the admin API's POST /api/v1/tiering/run?wait=1, what
// `mink tiering run --wait` does), so that the tables' committed rows are
// read from the lake from then on (a round must leave no row untiered:
// nothing else writes while a file runs); a round is retried while no node holds the coordinator lease yet (right
// after a restart). Rounds run only on tier: the harness's nodes have a
// tiering freshness of an hour. On PostgreSQL it does nothing.
//
//	onlyif mink|pg
//	knownbug <text>   (mink still differs here: logged, not failed; see the record's comment)
//	skipif mink|pg
//
// before a record (on the line above its header) runs the record only on,
// or never on, mink or PostgreSQL.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
)

var (
	logicRewrite = flag.Bool("logic.rewrite", false, "rewrite the expected output of testdata/logic/*.test: from PostgreSQL with -logic.pg, else only the records marked onlyif mink")
	logicPG      = flag.String("logic.pg", "", "run the logic tests against this PostgreSQL (a URL of a superuser connection) instead of mink")
	logicFile    = flag.String("logic.file", "", "run only this logic test file (base name, without .test)")
)

const logicDir = "testdata/logic"

// logicMode is one way of running a file.
type logicMode string

const (
	modeSimple   logicMode = "simple"
	modeExtended logicMode = "extended"
	modeBinary   logicMode = "binary"
)

func TestLogic(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(logicDir, "*.test"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no logic test files in %s", logicDir)
	}
	modes := []logicMode{modeSimple, modeExtended, modeBinary}
	if *logicRewrite {
		modes = modes[:1]
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".test")
		if *logicFile != "" && *logicFile != name {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each run has a node of its own
			recs, err := parseLogicFile(path)
			if err != nil {
				t.Fatal(err)
			}
			runMode := func(mode logicMode) {
				t.Run(string(mode), func(t *testing.T) {
					r := newLogicRunner(t, name, mode)
					defer r.close()
					for _, rec := range recs {
						r.run(rec)
					}
				})
			}
			if waitsOnNode(recs) {
				// A file that tiers or restarts spends most of its time
				// waiting (a round lets the leaders flush first, a
				// restart waits for leases): its modes run at once, each
				// on its own node, in the one slot of -test.parallel the
				// file holds. The records are only read (a rewrite runs
				// one mode).
				var wg sync.WaitGroup
				for _, mode := range modes {
					wg.Add(1)
					go func() {
						defer wg.Done()
						runMode(mode)
					}()
				}
				wg.Wait()
			} else {
				for _, mode := range modes {
					runMode(mode)
				}
			}
			if *logicRewrite && !t.Failed() {
				if err := os.WriteFile(path, []byte(formatLogicFile(recs)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// waitsOnNode reports whether a file tiers or restarts its node.
func waitsOnNode(recs []*logicRecord) bool {
	for _, rec := range recs {
		if rec.kind == "tier" || rec.kind == "restart" {
			return true
		}
	}
	return false
}

// A logic record and, after a rewrite run, what it got.
type logicRecord struct {
	line int // of the header, 1-based
	// text is the verbatim text of a comment or blank-line block.
	text string

	kind   string // "statement", "query", "copy", "connection", "" (text)
	onlyif string
	skipif string
	// knownbug marks a record where mink still differs from PostgreSQL:
	// against mink it runs, and a difference is logged as a KNOWN BUG
	// instead of failing; against PostgreSQL it must pass as usual.
	knownbug string
	conds    []string // the onlyif/skipif lines, verbatim
	sql      string
	data     []string // COPY data
	wantErr  bool
	code     string
	message  string // expected error message, "" to not check
	hasMsg   bool
	tag      string // expected tag of statement ok, "" to not check
	count    int64  // copy ok N
	types    string
	rowsort  bool
	colname  bool
	// catalogTypes: mink may describe a column PostgreSQL describes
	// with a catalog type (name, "char", regproc, aclitem[], …) as text
	// or an array (catalogTypesMatch).
	catalogTypes bool
	rows         []string // expected rows (with the names line first under colnames)
	// notices are the expected notices and warnings of a statement ok
	// record, checked when it has a ---- section (hasNotices).
	notices    []string
	hasNotices bool
	// errFields are the "FIELD value" lines a statement error's ----
	// section lists.
	errFields []string
	conn      string   // for "connection"
	tables    []string // for "tier"
	// mirrors is restart's mirrors=on|off ("" keeps the node's setting).
	mirrors string

	// got is the outcome, for rewrites.
	got *logicOutcome
}

type logicOutcome struct {
	err     *pgconn.PgError
	tag     string
	types   string
	names   []string
	rows    []string // rendered, sorted when rowsort
	isQuery bool     // had a row description
	notices []string // "SEVERITY SQLSTATE message"
	// fieldDescs are the result's columns (extended and binary modes).
	fieldDescs []pgconn.FieldDescription
}

func parseLogicFile(path string) ([]*logicRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var recs []*logicRecord
	var text []string
	flushText := func() {
		if len(text) > 0 {
			recs = append(recs, &logicRecord{text: strings.Join(text, "\n")})
			text = nil
		}
	}
	bad := func(i int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, i+1, fmt.Sprintf(format, args...))
	}
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			text = append(text, line)
			i++
			continue
		}
		flushText()
		rec := &logicRecord{line: i + 1}
		for {
			f := strings.Fields(lines[i])
			if len(f) >= 2 && f[0] == "knownbug" {
				rec.knownbug = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "knownbug"))
				rec.conds = append(rec.conds, lines[i])
				i++
				if i >= len(lines) {
					return nil, bad(i-1, "knownbug at the end of the file")
				}
				continue
			}
			if len(f) == 2 && (f[0] == "onlyif" || f[0] == "skipif") {
				if f[1] != "mink" && f[1] != "pg" {
					return nil, bad(i, "%s takes mink or pg", f[0])
				}
				if f[0] == "onlyif" {
					rec.onlyif = f[1]
				} else {
					rec.skipif = f[1]
				}
				rec.conds = append(rec.conds, lines[i])
				i++
				if i >= len(lines) {
					return nil, bad(i-1, "%s at the end of the file", f[0])
				}
				continue
			}
			break
		}
		rec.line = i + 1
		f := strings.Fields(lines[i])
		rec.kind = f[0]
		switch f[0] {
		case "connection":
			if len(f) != 2 {
				return nil, bad(i, "connection NAME")
			}
			rec.conn = f[1]
			i++
			recs = append(recs, rec)
			continue
		case "restart":
			for _, opt := range f[1:] {
				switch opt {
				case "mirrors=on", "mirrors=off":
					rec.mirrors = strings.TrimPrefix(opt, "mirrors=")
				default:
					return nil, bad(i, "restart [mirrors=on|off], not %q", opt)
				}
			}
			i++
			recs = append(recs, rec)
			continue
		case "tier":
			if len(f) < 2 {
				return nil, bad(i, "tier TABLE [TABLE…]")
			}
			rec.tables = f[1:]
			i++
			recs = append(recs, rec)
			continue
		case "statement", "copy":
			if len(f) < 2 {
				return nil, bad(i, "%s ok|error", f[0])
			}
			switch f[1] {
			case "ok":
				if f[0] == "copy" {
					if len(f) != 3 {
						return nil, bad(i, "copy ok N")
					}
					if rec.count, err = strconv.ParseInt(f[2], 10, 64); err != nil {
						return nil, bad(i, "copy ok N: %v", err)
					}
				} else {
					rec.tag = strings.Join(f[2:], " ")
				}
			case "error":
				if len(f) < 3 {
					return nil, bad(i, "%s error SQLSTATE [message]", f[0])
				}
				rec.wantErr, rec.code = true, f[2]
				if len(rec.code) != 5 {
					return nil, bad(i, "SQLSTATE %q is not 5 characters", rec.code)
				}
				hdr := strings.TrimSpace(lines[i])
				if idx := strings.Index(hdr, rec.code); idx >= 0 {
					if msg := strings.TrimSpace(hdr[idx+len(rec.code):]); msg != "" {
						rec.message, rec.hasMsg = msg, true
					}
				}
			default:
				return nil, bad(i, "%s ok|error, not %q", f[0], f[1])
			}
		case "query":
			// TYPES may be left out of a new record: a rewrite fills it in.
			opts := f[1:]
			if len(opts) > 0 && opts[0] != "rowsort" && opts[0] != "colnames" && opts[0] != "catalogtypes" {
				rec.types, opts = opts[0], opts[1:]
			}
			for _, opt := range opts {
				switch opt {
				case "rowsort":
					rec.rowsort = true
				case "colnames":
					rec.colname = true
				case "catalogtypes":
					rec.catalogTypes = true
				default:
					return nil, bad(i, "unknown query option %q", opt)
				}
			}
		default:
			return nil, bad(i, "unknown record %q", f[0])
		}
		i++
		var sql []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" && lines[i] != "----" {
			sql = append(sql, lines[i])
			i++
		}
		if len(sql) == 0 {
			return nil, bad(rec.line-1, "record without SQL")
		}
		rec.sql = strings.Join(sql, "\n")
		if i < len(lines) && lines[i] == "----" {
			if rec.kind == "statement" && !rec.wantErr {
				rec.hasNotices = true
			}
			i++
			for i < len(lines) && lines[i] != "" {
				switch {
				case rec.kind == "copy":
					rec.data = append(rec.data, lines[i])
				case rec.kind == "statement" && rec.wantErr:
					field, _, _ := strings.Cut(lines[i], " ")
					if _, ok := errorField(&pgconn.PgError{}, field); !ok {
						return nil, bad(i, "error field %q: DETAIL, HINT or CONSTRAINT", field)
					}
					rec.errFields = append(rec.errFields, lines[i])
				case rec.kind == "statement":
					rec.notices = append(rec.notices, lines[i])
				case rec.kind == "query":
					rec.rows = append(rec.rows, lines[i])
				}
				i++
			}
		} else if rec.kind == "copy" {
			return nil, bad(rec.line-1, "copy without ---- and data")
		}
		recs = append(recs, rec)
	}
	flushText()
	return recs, nil
}

// formatLogicFile renders records back into a file, with each record's
// outcome when it has one.
func formatLogicFile(recs []*logicRecord) string {
	var b strings.Builder
	for i, rec := range recs {
		if rec.kind == "" {
			b.WriteString(rec.text)
			b.WriteString("\n")
			continue
		}
		if i > 0 && recs[i-1].kind != "" && !recs[i-1].oneLine() {
			b.WriteString("\n") // records always end with a blank line
		}
		for _, c := range rec.conds {
			b.WriteString(c + "\n")
		}
		switch rec.kind {
		case "connection":
			fmt.Fprintf(&b, "connection %s\n", rec.conn)
			continue
		case "tier":
			fmt.Fprintf(&b, "tier %s\n", strings.Join(rec.tables, " "))
			continue
		case "restart":
			b.WriteString("restart")
			if rec.mirrors != "" {
				b.WriteString(" mirrors=" + rec.mirrors)
			}
			b.WriteString("\n")
			continue
		}
		if rec.got != nil {
			rec.apply(rec.got)
		}
		switch {
		case rec.wantErr:
			fmt.Fprintf(&b, "%s error %s", rec.kind, rec.code)
			if rec.hasMsg {
				b.WriteString(" " + rec.message)
			}
			b.WriteString("\n" + rec.sql + "\n")
			if rec.kind == "copy" {
				b.WriteString("----\n" + strings.Join(rec.data, "\n") + "\n")
			} else if len(rec.errFields) > 0 {
				b.WriteString("----\n" + strings.Join(rec.errFields, "\n") + "\n")
			}
		case rec.kind == "copy":
			fmt.Fprintf(&b, "copy ok %d\n%s\n----\n%s\n", rec.count, rec.sql, strings.Join(rec.data, "\n"))
		case rec.kind == "statement":
			b.WriteString("statement ok")
			if rec.tag != "" {
				b.WriteString(" " + rec.tag)
			}
			b.WriteString("\n" + rec.sql + "\n")
			if rec.hasNotices {
				b.WriteString("----\n")
				for _, n := range rec.notices {
					b.WriteString(n + "\n")
				}
			}
		case rec.kind == "query":
			b.WriteString("query")
			if rec.types != "" {
				b.WriteString(" " + rec.types)
			}
			if rec.rowsort {
				b.WriteString(" rowsort")
			}
			if rec.colname {
				b.WriteString(" colnames")
			}
			if rec.catalogTypes {
				b.WriteString(" catalogtypes")
			}
			b.WriteString("\n" + rec.sql + "\n----\n")
			for _, r := range rec.rows {
				b.WriteString(r + "\n")
			}
		}
	}
	out := b.String()
	return strings.TrimRight(out, "\n") + "\n"
}

// oneLine reports whether the record is a one-line directive (no SQL, no
// blank line after it).
func (rec *logicRecord) oneLine() bool {
	return rec.kind == "connection" || rec.kind == "restart" || rec.kind == "tier"
}

// apply turns a record's expectation into what it got.
func (rec *logicRecord) apply(got *logicOutcome) {
	if got.err != nil {
		if !rec.wantErr {
			rec.hasMsg = true
		}
		rec.wantErr, rec.code = true, got.err.Code
		if rec.hasMsg {
			rec.message = oneLine(got.err.Message)
		}
		for i, line := range rec.errFields {
			field, _, _ := strings.Cut(line, " ")
			v, _ := errorField(got.err, field)
			rec.errFields[i] = field + " " + oneLine(v)
		}
		if rec.kind == "query" {
			rec.kind = "statement"
		}
		return
	}
	rec.wantErr = false
	switch rec.kind {
	case "copy":
		rec.count, _ = strconv.ParseInt(strings.TrimPrefix(got.tag, "COPY "), 10, 64)
	case "statement":
		if rec.tag != "" {
			rec.tag = got.tag
		}
		rec.notices = got.notices
	case "query":
		rec.types = got.types
		rec.rows = nil
		if rec.colname {
			rec.rows = append(rec.rows, strings.Join(got.names, " | "))
		}
		rec.rows = append(rec.rows, got.rows...)
	}
}

// logicRunner runs one file in one mode.
type logicRunner struct {
	t     *testing.T
	mode  logicMode
	url   string
	conns map[string]*pgconn.PgConn
	cur   string
	// notices collects the notices of the statement running.
	notices []string
	pg      bool
	drop    func()
	tmap    *pgtype.Map
	// node is the running node (mink only), on dataDir; direct is whether
	// it runs with the engine's mirrors off.
	node    *minktest.Node
	dataDir string
	direct  bool
}

func newLogicRunner(t *testing.T, file string, mode logicMode) *logicRunner {
	r := &logicRunner{t: t, mode: mode, conns: map[string]*pgconn.PgConn{}, cur: "default", tmap: pgtype.NewMap()}
	if *logicPG == "" {
		r.dataDir = t.TempDir()
		r.startNode()
		return r
	}
	// A fresh database on PostgreSQL, in UTC like mink's default.
	r.pg = true
	ctx := context.Background()
	admin, err := pgconn.Connect(ctx, *logicPG)
	if err != nil {
		t.Fatal(err)
	}
	db := "logic_" + strings.ReplaceAll(file, "-", "_") + "_" + string(mode)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db).ReadAll(); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgconn.ParseConfig(*logicPG)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(cfg.User, cfg.Password), Host: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		Path: "/" + db, RawQuery: "sslmode=disable&timezone=UTC"}
	if cfg.Password == "" {
		u.User = url.User(cfg.User)
	}
	r.url = u.String()
	r.drop = func() {
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)").ReadAll()
		admin.Close(ctx)
	}
	return r
}

// startNode starts a node on r.dataDir.
func (r *logicRunner) startNode() {
	n, err := minktest.StartNode(minktest.Options{DataDir: r.dataDir, Tweak: func(cfg *server.Config) {
		cfg.TieringFreshness = time.Hour // rounds run on tier only
		cfg.DisableSQLMirrors = r.direct
	}}, r.t.TempDir)
	if err != nil {
		r.t.Fatalf("start a node on %s: %v", r.dataDir, err)
	}
	r.node, r.url = n, n.URL
}

func (r *logicRunner) closeConns() {
	for name, c := range r.conns {
		c.Close(context.Background())
		delete(r.conns, name)
	}
}

func (r *logicRunner) close() {
	r.closeConns()
	if r.node != nil {
		r.node.Server.Close()
		r.node = nil
	}
	if r.drop != nil {
		r.drop()
	}
}

// restart stops the node cleanly and starts it again on the same data
// directory (see the file comment); on PostgreSQL it only reconnects.
func (r *logicRunner) restart(rec *logicRecord) {
	r.closeConns()
	if r.pg {
		return
	}
	if err := r.node.Server.Close(); err != nil {
		r.t.Fatalf("line %d: restart: close the node: %v", rec.line, err)
	}
	r.node = nil
	switch rec.mirrors {
	case "on":
		r.direct = false
	case "off":
		r.direct = true
	}
	r.startNode()
}

// tier runs a tiering round of each of the record's tables, at once, and
// waits for them (mink only).
func (r *logicRunner) tier(rec *logicRecord) {
	if r.pg {
		return
	}
	admin := server.NewAdminClient(r.node.Config.AdminAddr)
	errs := make([]error, len(rec.tables))
	var wg sync.WaitGroup
	for i, table := range rec.tables {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tierTable(admin, table)
		}()
	}
	wg.Wait()
	failed := false
	for i, err := range errs {
		if err != nil {
			r.t.Errorf("line %d: tier %s: %v", rec.line, rec.tables[i], err)
			failed = true
		}
	}
	if failed {
		r.t.FailNow()
	}
}

// tierTable runs a round of table and waits for it, retrying while no node
// holds the coordinator lease (right after a start), and while rows are
// left untiered: a round tiers up to the committed end, and acknowledged
// rows reach it when the leader uploads them, later on a loaded machine.
func tierTable(admin *server.AdminClient, table string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var lag uint64
		err := admin.TieringRun(ctx, table, true, func(ev server.TieringRunEvent) {
			if ev.Type == "done" {
				lag = ev.LagRows
			}
		})
		cancel()
		switch {
		case err == nil && lag != 0 && time.Now().After(deadline):
			return fmt.Errorf("%d rows left untiered, with nothing writing", lag)
		case err == nil && lag != 0:
		case err == nil:
			return nil
		case !strings.Contains(err.Error(), "retry") || time.Now().After(deadline):
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *logicRunner) conn() *pgconn.PgConn {
	if c, ok := r.conns[r.cur]; ok {
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgconn.ParseConfig(r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		r.notices = append(r.notices, fmt.Sprintf("%s %s %s", n.Severity, n.Code, oneLine(n.Message)))
	}
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		r.t.Fatalf("connect %s: %v", r.cur, err)
	}
	r.conns[r.cur] = c
	return c
}

func (r *logicRunner) run(rec *logicRecord) {
	t := r.t
	t.Helper()
	if rec.kind == "" {
		return
	}
	target := "mink"
	if r.pg {
		target = "pg"
	}
	if (rec.onlyif != "" && rec.onlyif != target) || rec.skipif == target {
		return
	}
	switch rec.kind {
	case "connection":
		r.cur = rec.conn
		return
	case "restart":
		r.restart(rec)
		return
	case "tier":
		r.tier(rec)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got *logicOutcome
	var descTypes string
	r.notices = nil
	switch {
	case rec.kind == "copy":
		got = r.copy(ctx, rec)
	case r.mode == modeSimple:
		got = r.simple(ctx, rec.sql)
	default:
		got, descTypes = r.extended(ctx, rec.sql)
	}
	got.notices = r.notices
	where := fmt.Sprintf("line %d (%s)", rec.line, firstLine(rec.sql))
	if got.err == nil && got.isQuery && rec.rowsort {
		sort.Strings(got.rows)
	}
	if *logicRewrite {
		// PostgreSQL's answers are the expected output; mink's only for
		// records that run on mink alone.
		if r.pg || rec.onlyif == "mink" {
			rec.got = got
		}
		return
	}
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	defer func() {
		switch {
		case rec.knownbug != "" && !r.pg && len(failures) > 0:
			t.Logf("%s: KNOWN BUG (%s), mink still differs from PostgreSQL: %s", where, rec.knownbug, strings.Join(failures, "; "))
		case rec.knownbug != "" && !r.pg:
			t.Logf("%s: known bug %q does not show in this mode", where, rec.knownbug)
		default:
			for _, f := range failures {
				t.Error(f)
			}
		}
	}()
	if rec.wantErr {
		if got.err == nil {
			fail("%s: want error %s %s, got success %q", where, rec.code, rec.message, got.tag)
			return
		}
		if got.err.Code != rec.code || (rec.hasMsg && oneLine(got.err.Message) != rec.message) {
			fail("%s: want error %s %s\n got error %s %s", where, rec.code, rec.message, got.err.Code, got.err.Message)
		}
		for _, line := range rec.errFields {
			field, want, _ := strings.Cut(line, " ")
			if v, _ := errorField(got.err, field); oneLine(v) != want {
				fail("%s: error %s %q, want %q", where, field, v, want)
			}
		}
		return
	}
	if got.err != nil {
		fail("%s: unexpected error %s %s", where, got.err.Code, got.err.Message)
		return
	}
	switch rec.kind {
	case "statement":
		if rec.tag != "" && got.tag != rec.tag {
			fail("%s: tag %q, want %q", where, got.tag, rec.tag)
		}
		if rec.hasNotices && strings.Join(got.notices, "\n") != strings.Join(rec.notices, "\n") {
			fail("%s: notices differ\n got:\n%s\nwant:\n%s", where, indent(got.notices), indent(rec.notices))
		}
	case "copy":
		if want := fmt.Sprintf("COPY %d", rec.count); got.tag != want {
			fail("%s: tag %q, want %q", where, got.tag, want)
		}
	case "query":
		if !got.isQuery {
			fail("%s: the statement returned no rows (tag %q)", where, got.tag)
			return
		}
		if got.types != rec.types && !(rec.catalogTypes && !r.pg && catalogTypesMatch(got.types, rec.types)) {
			fail("%s: column types %s, want %s", where, got.types, rec.types)
		}
		if descTypes != "" && descTypes != got.types {
			fail("%s: Describe said column types %s, the portal %s", where, descTypes, got.types)
		}
		want := rec.rows
		if rec.colname {
			if len(want) == 0 {
				fail("%s: colnames without a names line", where)
				return
			}
			if names := strings.Join(got.names, " | "); names != want[0] {
				fail("%s: column names\n got %s\nwant %s", where, names, want[0])
			}
			want = want[1:]
		}
		gotRows := got.rows
		if r.mode == modeBinary {
			want = r.canonicalRows(rec, want, got)
			if rec.rowsort {
				sort.Strings(want)
			}
		}
		if strings.Join(gotRows, "\n") != strings.Join(want, "\n") {
			fail("%s: rows differ\n got:\n%s\nwant:\n%s", where, indent(gotRows), indent(want))
		}
	}
}

// errorField is the field of an error a statement error's ---- section
// names.
func errorField(err *pgconn.PgError, field string) (string, bool) {
	switch field {
	case "DETAIL":
		return err.Detail, true
	case "HINT":
		return err.Hint, true
	case "CONSTRAINT":
		return err.ConstraintName, true
	}
	return "", false
}

// oneLine writes a message's line breaks and tabs as \n and \t, so that it
// fits on a record's header line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 60 {
		line = line[:60] + "…"
	}
	return line
}

func indent(rows []string) string {
	if len(rows) == 0 {
		return "    (no rows)"
	}
	return "    " + strings.Join(rows, "\n    ")
}

func asPgError(err error) *pgconn.PgError {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return &pgconn.PgError{Code: "client", Message: err.Error()}
}

func (r *logicRunner) simple(ctx context.Context, sql string) *logicOutcome {
	mrr := r.conn().Exec(ctx, sql)
	got := &logicOutcome{}
	results := 0
	for mrr.NextResult() {
		results++
		rr := mrr.ResultReader()
		// The row description, also of a result without rows.
		if fields := rr.FieldDescriptions(); fields != nil {
			got.isQuery = true
			got.types, got.names = describeFields(fields)
		}
		for rr.NextRow() {
			got.rows = append(got.rows, renderTextRow(rr.Values()))
		}
		tag, err := rr.Close()
		if err != nil {
			got.err = asPgError(err)
			break
		}
		got.tag = tag.String()
	}
	if err := mrr.Close(); err != nil || got.err != nil {
		if got.err == nil {
			got.err = asPgError(err)
		}
		return got
	}
	if results != 1 {
		r.t.Fatalf("%q: %d results; a record holds one statement", sql, results)
	}
	return got
}

// extended prepares the unnamed statement and executes it, in text or, in
// binary mode, binary results. descTypes are the column types the
// statement's Describe announced.
func (r *logicRunner) extended(ctx context.Context, sql string) (got *logicOutcome, descTypes string) {
	c := r.conn()
	desc, err := c.Prepare(ctx, "", sql, nil)
	if err != nil {
		return &logicOutcome{err: asPgError(err)}, ""
	}
	descTypes, _ = describeFields(desc.Fields)
	// Binary mode asks for binary results of the types pgx can decode and
	// for text of the others (regproc, …), as pgx itself does.
	formats := []int16{pgtype.TextFormatCode}
	if r.mode == modeBinary {
		formats = make([]int16, len(desc.Fields))
		for i, f := range desc.Fields {
			if _, ok := r.tmap.TypeForOID(f.DataTypeOID); ok {
				formats[i] = pgtype.BinaryFormatCode
			}
		}
	}
	rr := c.ExecPrepared(ctx, "", nil, nil, formats)
	got = &logicOutcome{}
	fields := rr.FieldDescriptions()
	got.fieldDescs = fields
	var rows [][][]byte
	for rr.NextRow() {
		vals := rr.Values()
		row := make([][]byte, len(vals))
		for i, v := range vals {
			if v != nil {
				row[i] = append([]byte{}, v...)
			}
		}
		rows = append(rows, row)
	}
	tag, err := rr.Close()
	if err != nil {
		got.err = asPgError(err)
		return got, descTypes
	}
	got.tag = tag.String()
	if len(fields) > 0 || len(desc.Fields) > 0 {
		got.isQuery = true
		got.types, got.names = describeFields(fields)
		for _, row := range rows {
			if r.mode == modeBinary {
				got.rows = append(got.rows, r.canonicalRow(fields, row, pgtype.BinaryFormatCode))
			} else {
				got.rows = append(got.rows, renderTextRow(row))
			}
		}
	}
	return got, descTypes
}

func (r *logicRunner) copy(ctx context.Context, rec *logicRecord) *logicOutcome {
	data := strings.Join(rec.data, "\n") + "\n"
	tag, err := r.conn().CopyFrom(ctx, strings.NewReader(data), rec.sql)
	return &logicOutcome{err: asPgError(err), tag: tag.String()}
}

// typeLetters maps type OIDs to the letters of a query's TYPES.
var typeLetters = map[uint32]byte{
	16: 'B', 21: 'S', 23: 'I', 20: 'L', 700: 'F', 701: 'R', 1700: 'N', 25: 'T', 1043: 'V', 1042: 'C',
	17: 'X', 1082: 'D', 1083: 'M', 1114: 'P', 1184: 'Z', 1186: 'E', 2950: 'U', 114: 'J', 3802: 'K', 26: 'O',
}

// arrayOIDs are the array types of the scalars above.
var arrayOIDs = map[uint32]bool{
	1000: true, 1005: true, 1007: true, 1016: true, 1021: true, 1022: true, 1231: true, 1009: true, 1015: true,
	1014: true, 1001: true, 1182: true, 1183: true, 1115: true, 1185: true, 1187: true, 2951: true, 199: true, 3807: true,
}

// catalogTypesMatch reports whether mink's column types got match want,
// PostgreSQL's, but for the columns of catalog types mink describes as
// text (name, "char", regproc, pg_node_tree, …: T), as an array
// (aclitem[], int2vector, oidvector, …: Y) or as oid (xid, cid: O), which
// PostgreSQL's letters show as ? (docs/sql-catalog.md).
func catalogTypesMatch(got, want string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] && !(want[i] == '?' && strings.IndexByte("TYO", got[i]) >= 0) {
			return false
		}
	}
	return true
}

func describeFields(fields []pgconn.FieldDescription) (types string, names []string) {
	var b strings.Builder
	for _, f := range fields {
		l, ok := typeLetters[f.DataTypeOID]
		switch {
		case ok:
		case arrayOIDs[f.DataTypeOID]:
			l = 'Y'
		default:
			l = '?'
		}
		b.WriteByte(l)
		names = append(names, f.Name)
	}
	return b.String(), names
}

func renderTextRow(row [][]byte) string {
	parts := make([]string, len(row))
	for i, v := range row {
		parts[i] = renderText(v)
	}
	return strings.Join(parts, " | ")
}

func renderText(v []byte) string {
	switch {
	case v == nil:
		return "NULL"
	case len(v) == 0:
		return "(empty)"
	}
	return strings.ReplaceAll(string(v), "\n", `\n`)
}

// unrenderText is the inverse of renderText.
func unrenderText(s string) []byte {
	switch s {
	case "NULL":
		return nil
	case "(empty)":
		return []byte{}
	}
	return []byte(strings.ReplaceAll(s, `\n`, "\n"))
}

// canonicalRows decodes expected text rows with the result's column types
// and renders them the way canonicalRow renders binary results.
func (r *logicRunner) canonicalRows(rec *logicRecord, want []string, got *logicOutcome) []string {
	out := make([]string, 0, len(want))
	fields := got.fieldDescs
	for _, line := range want {
		parts := strings.Split(line, " | ")
		if len(parts) != len(fields) {
			out = append(out, line) // will not match: shows the raw line
			continue
		}
		row := make([][]byte, len(parts))
		for i, p := range parts {
			row[i] = unrenderText(p)
		}
		out = append(out, r.canonicalRow(fields, row, pgtype.TextFormatCode))
	}
	return out
}

// canonicalRow renders decoded values so that the binary and the text form
// of the same value render the same.
func (r *logicRunner) canonicalRow(fields []pgconn.FieldDescription, row [][]byte, format int16) string {
	parts := make([]string, len(row))
	for i, v := range row {
		if v == nil {
			parts[i] = "NULL"
			continue
		}
		oid := fields[i].DataTypeOID
		typ, ok := r.tmap.TypeForOID(oid)
		if !ok {
			parts[i] = string(v) // text in either mode (extended)
			continue
		}
		val, err := typ.Codec.DecodeValue(r.tmap, oid, format, v)
		if err != nil {
			parts[i] = fmt.Sprintf("undecodable(%v)", err)
			continue
		}
		parts[i] = canonicalValue(oid, val)
	}
	return strings.Join(parts, " | ")
}

func canonicalValue(oid uint32, v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		if oid == 1082 {
			return x.Format("2006-01-02")
		}
		return x.UTC().Format("2006-01-02T15:04:05.999999Z")
	case pgtype.Numeric:
		switch {
		case x.NaN:
			return "NaN"
		case x.InfinityModifier == pgtype.Infinity:
			return "Infinity"
		case x.InfinityModifier == pgtype.NegativeInfinity:
			return "-Infinity"
		case x.Int == nil:
			return "NULL"
		}
		rat := new(big.Rat).SetInt(x.Int)
		exp := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs32(x.Exp))), nil)
		if x.Exp >= 0 {
			rat.Mul(rat, new(big.Rat).SetInt(exp))
		} else {
			rat.Quo(rat, new(big.Rat).SetInt(exp))
		}
		return rat.RatString()
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case pgtype.Time:
		return fmt.Sprintf("time(%dus)", x.Microseconds)
	case pgtype.Interval:
		return fmt.Sprintf("interval(%dmon %dd %dus)", x.Months, x.Days, x.Microseconds)
	case [16]byte:
		return hex.EncodeToString(x[:])
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case pgtype.InfinityModifier:
		return x.String()
	case string, bool, int16, int32, int64, uint32:
		if oid == 114 || oid == 3802 {
			break
		}
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = canonicalValue(0, e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if oid == 114 || oid == 3802 {
		b, err := json.Marshal(v)
		if err == nil {
			return string(b)
		}
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

func abs32(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}
