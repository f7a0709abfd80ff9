package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	duck "github.com/duckdb/duckdb-go-bindings"
)

// errNoArrow is returned by Open in a build without the duckdb_arrow tag.
var errNoArrow = errors.New("sqlfront/engine: built without -tags duckdb_arrow, so DuckDB has no Arrow interface (see the Makefile)")

// ErrClosed is returned by every method of a closed DB or Conn.
var ErrClosed = errors.New("sqlfront/engine: closed")

// Options configure the embedded DuckDB.
type Options struct {
	// Threads is the number of DuckDB worker threads shared by all queries
	// (DuckDB's threads setting). 0 means runtime.NumCPU().
	Threads int
	// MemoryLimit caps DuckDB's buffer memory in bytes (memory_limit).
	// Beyond it, DuckDB spills to TempDir or fails with SQLSTATE 53200.
	// 0 keeps DuckDB's default, 80% of physical memory.
	MemoryLimit int64
	// TempDir is where DuckDB spills (temp_directory). Empty disables
	// spilling.
	TempDir string
	// AllowedDirectories are the only directories SQL may read or write
	// files in (read_parquet and friends), e.g. the local cache of lake
	// files. Everything else on the file system, and the network, is closed
	// to SQL: a session cannot read_csv('/etc/passwd'). The setting cannot
	// be changed after Open.
	AllowedDirectories []string
}

// DB is one embedded, in-memory DuckDB. A node has one. Its methods are safe
// for concurrent use; each SQL session uses its own Conn.
type DB struct {
	duck    duck.Database
	threads int
	// conv is a connection that never runs a statement. Scans use it to
	// convert Arrow batches into DuckDB chunks, from DuckDB's worker threads,
	// concurrently: the conversion only reads its configuration.
	conv duck.Connection
	// self is the slot through which the mink_scan callbacks find this DB.
	self unsafe.Pointer
	// natives are the native tables (native.go).
	natives natives

	mu struct {
		sync.Mutex
		closed bool
		// sources maps a mink_scan key to its registration.
		sources map[string]*registration
		conns   map[*Conn]struct{}
	}
}

// Open starts an embedded DuckDB.
func Open(opts Options) (*DB, error) {
	if !arrowEnabled {
		return nil, errNoArrow
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	settings := [][2]string{
		{"threads", strconv.Itoa(threads)},
		// No downloads at run time: parquet, json and icu are built in.
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		{"allow_community_extensions", "false"},
	}
	if opts.MemoryLimit > 0 {
		settings = append(settings, [2]string{"memory_limit", strconv.FormatInt(opts.MemoryLimit, 10) + "B"})
	}
	settings = append(settings, [2]string{"temp_directory", opts.TempDir})

	var config duck.Config
	if duck.CreateConfig(&config) == duck.StateError {
		return nil, errors.New("sqlfront/engine: create DuckDB config")
	}
	defer duck.DestroyConfig(&config)
	for _, kv := range settings {
		if duck.SetConfig(config, kv[0], kv[1]) == duck.StateError {
			return nil, fmt.Errorf("sqlfront/engine: DuckDB setting %s = %q rejected", kv[0], kv[1])
		}
	}
	db := &DB{threads: threads}
	var errMsg string
	if duck.OpenExt(":memory:", &db.duck, config, &errMsg) == duck.StateError {
		return nil, fmt.Errorf("sqlfront/engine: open DuckDB: %s", errMsg)
	}
	if duck.Connect(db.duck, &db.conv) == duck.StateError {
		duck.Close(&db.duck)
		return nil, errors.New("sqlfront/engine: connect to DuckDB")
	}
	db.mu.sources = make(map[string]*registration)
	db.mu.conns = make(map[*Conn]struct{})
	db.self = newSlot(db)
	if err := db.setup(opts); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// setup registers mink_scan and closes external access. It runs on the
// conversion connection before any scan can use it.
func (db *DB) setup(opts Options) error {
	if err := registerScanFunction(db); err != nil {
		return err
	}
	var stmts []string
	if len(opts.AllowedDirectories) > 0 {
		quoted := make([]string, len(opts.AllowedDirectories))
		for i, d := range opts.AllowedDirectories {
			quoted[i] = quoteString(d)
		}
		stmts = append(stmts, "SET allowed_directories = ["+strings.Join(quoted, ", ")+"]")
	}
	stmts = append(stmts, "SET enable_external_access = false")
	for _, s := range stmts {
		if err := execSimple(db.conv, s); err != nil {
			return fmt.Errorf("sqlfront/engine: %s: %w", s, err)
		}
	}
	return nil
}

// Close closes every Conn still open (which must not be in use) and shuts
// DuckDB down.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.mu.closed {
		db.mu.Unlock()
		return nil
	}
	db.mu.closed = true
	conns := make([]*Conn, 0, len(db.mu.conns))
	for c := range db.mu.conns {
		conns = append(conns, c)
	}
	db.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	duck.Disconnect(&db.conv)
	duck.Close(&db.duck)
	freeSlot(db.self)
	return nil
}

// ConnOptions are a session's settings.
type ConnOptions struct {
	// TimeZone is the session's time zone (an IANA name), in which DuckDB
	// interprets timestamptz literals and computes timestamptz → date,
	// date_trunc and the like. Empty means UTC. Values of timestamptz
	// columns are instants whatever the zone. See Conn.SetTimeZone.
	TimeZone string
}

// sessionSettings make DuckDB behave like PostgreSQL where a setting can.
var sessionSettings = []string{
	// Errors as JSON: exception type, subtype, position and object name,
	// which newDuckDBError maps to SQLSTATEs.
	"SET errors_as_json = true",
	// integer / integer is integer division, as in PostgreSQL (DuckDB's
	// default is floating-point division).
	"SET integer_division = true",
	// ORDER BY … ASC puts NULLs last, DESC first, as in PostgreSQL.
	"SET default_null_order = 'nulls_last_on_asc_first_on_desc'",
	// The divisor of x / y and x % y, which sqlfront routes through this
	// macro: PostgreSQL raises 22012 where DuckDB returns NULL.
	"CREATE TEMP MACRO mink_divisor(x) AS CASE WHEN x = 0 THEN error('division by zero') ELSE x END",
	// jsonb's key-exists operators ?, ?| and ?&, which sqlfront calls under
	// these names: the keys of an object, the string elements of an array,
	// or a string scalar itself, compared as JSON strings (so the number 1
	// is no key '1', as in PostgreSQL).
	`CREATE TEMP MACRO mink_jsonb_keys(j) AS json_extract(CASE json_type(j) WHEN 'OBJECT' THEN to_json(json_keys(j))
		WHEN 'ARRAY' THEN j ELSE json_array(j) END, '$[*]')`,
	"CREATE TEMP MACRO mink_jsonb_exists(j, k) AS CASE WHEN j IS NULL OR k IS NULL THEN NULL ELSE list_contains(mink_jsonb_keys(j), to_json(CAST(k AS VARCHAR))) END",
	"CREATE TEMP MACRO mink_jsonb_exists_any(j, ks) AS CASE WHEN j IS NULL OR ks IS NULL THEN NULL ELSE list_has_any(mink_jsonb_keys(j), json_extract(to_json(CAST(ks AS VARCHAR[])), '$[*]')) END",
	"CREATE TEMP MACRO mink_jsonb_exists_all(j, ks) AS CASE WHEN j IS NULL OR ks IS NULL THEN NULL ELSE list_has_all(mink_jsonb_keys(j), json_extract(to_json(CAST(ks AS VARCHAR[])), '$[*]')) END",
	// PostgreSQL's array_remove and three-argument array_to_string (NULL
	// elements as n), which sqlfront calls under these names.
	"CREATE TEMP MACRO mink_array_remove(a, x) AS list_filter(a, lambda e: e IS DISTINCT FROM x)",
	"CREATE TEMP MACRO mink_array_to_string(a, sep, n) AS array_to_string(list_transform(a, lambda e: coalesce(CAST(e AS VARCHAR), n)), sep)",
	// PostgreSQL's initcap: the first letter or digit of each run of
	// letters and digits upper case, the rest lower case.
	`CREATE TEMP MACRO mink_initcap(s) AS array_to_string(list_transform(string_split(s, ''),
		lambda c, i: CASE WHEN i > 1 AND regexp_full_match(string_split(s, '')[i - 1], '[\pL\pN]') THEN lower(c) ELSE upper(c) END), '')`,
	// PostgreSQL's justify_days, justify_hours and justify_interval, on
	// an interval's months, days and microseconds (m, d, us); integer
	// division and remainder truncate toward zero, as in PostgreSQL.
	"CREATE TEMP MACRO mink_iv_months(i) AS CAST(datepart('year', i) AS BIGINT) * 12 + datepart('month', i)",
	"CREATE TEMP MACRO mink_iv_micros(i) AS CAST(datepart('hour', i) AS BIGINT) * 3600000000 + CAST(datepart('minute', i) AS BIGINT) * 60000000 + datepart('microseconds', i)",
	"CREATE TEMP MACRO mink_iv(m, d, us) AS to_months(CAST(m AS INTEGER)) + to_days(CAST(d AS INTEGER)) + to_microseconds(CAST(us AS BIGINT))",
	`CREATE TEMP MACRO mink_iv_days_sign(m, d, us) AS CASE WHEN m > 0 AND d < 0 THEN mink_iv(m - 1, d + 30, us)
		WHEN m < 0 AND d > 0 THEN mink_iv(m + 1, d - 30, us) ELSE mink_iv(m, d, us) END`,
	`CREATE TEMP MACRO mink_iv_time_sign(m, d, us) AS CASE WHEN d > 0 AND us < 0 THEN mink_iv(m, d - 1, us + 86400000000)
		WHEN d < 0 AND us > 0 THEN mink_iv(m, d + 1, us - 86400000000) ELSE mink_iv(m, d, us) END`,
	`CREATE TEMP MACRO mink_justify_days(i) AS mink_iv_days_sign(mink_iv_months(i) + datepart('day', i) // 30,
		datepart('day', i) % 30, mink_iv_micros(i))`,
	`CREATE TEMP MACRO mink_justify_hours(i) AS mink_iv_time_sign(mink_iv_months(i), datepart('day', i) + mink_iv_micros(i) // 86400000000,
		mink_iv_micros(i) % 86400000000)`,
	`CREATE TEMP MACRO mink_iv_justified(m, d, us) AS CASE
		WHEN m > 0 AND (d < 0 OR d = 0 AND us < 0) THEN mink_iv_time_sign(m - 1, d + 30, us)
		WHEN m < 0 AND (d > 0 OR d = 0 AND us > 0) THEN mink_iv_time_sign(m + 1, d - 30, us)
		ELSE mink_iv_time_sign(m, d, us) END`,
	`CREATE TEMP MACRO mink_iv_days_justified(m, d, us) AS mink_iv_justified(m + d // 30, d % 30, us)`,
	`CREATE TEMP MACRO mink_justify_interval(i) AS mink_iv_days_justified(mink_iv_months(i),
		datepart('day', i) + mink_iv_micros(i) // 86400000000, mink_iv_micros(i) % 86400000000)`,
}

// Conn opens a connection for one SQL session.
func (db *DB) Conn(ctx context.Context, opts ConnOptions) (*Conn, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return nil, ErrClosed
	}
	c := &Conn{db: db}
	c.mu.views = make(map[string]*registration)
	if duck.Connect(db.duck, &c.duck) == duck.StateError {
		return nil, errors.New("sqlfront/engine: connect to DuckDB")
	}
	tz := opts.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	for _, s := range append(sessionSettings, "SET TimeZone = "+quoteString(tz)) {
		if err := execSimple(c.duck, s); err != nil {
			duck.Disconnect(&c.duck)
			return nil, fmt.Errorf("sqlfront/engine: %s: %w", s, err)
		}
	}
	db.mu.conns[c] = struct{}{}
	return c, nil
}

func (db *DB) forgetConn(c *Conn) {
	db.mu.Lock()
	delete(db.mu.conns, c)
	db.mu.Unlock()
}

// execSimple runs one statement that returns nothing of interest.
func execSimple(conn duck.Connection, sql string) error {
	var res duck.Result
	defer duck.DestroyResult(&res)
	if duck.Query(conn, sql, &res) == duck.StateError {
		return newDuckDBError(sql, duck.ResultError(&res))
	}
	return nil
}

// quoteString quotes s as a SQL string literal.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// quoteIdent quotes s as a SQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
