package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// Native tables: DuckDB's own storage, for data the caller appends to and
// never changes otherwise (mink's log tables). A query over a native table
// gets what DuckDB cannot have over a Source: column statistics (min/max,
// string lengths), so perfect-hash joins and aggregates, compressed string
// keys, zone-map skipping, filter pushdown into the scan, late
// materialisation, and count(*) from the row count.
//
// A native table lives in the DB (schema mink_native), visible to every
// Conn. Appends are DuckDB transactions: a statement that starts after an
// append sees all of it, one that started before sees none of it.

// NativeSchema is the DuckDB schema of the native tables.
const NativeSchema = "mink_native"

// ErrNativeDisabled is returned by NativeTable.Update for a table that was
// disabled (see Disable).
var ErrNativeDisabled = errors.New("sqlfront/engine: native table disabled")

// NativeTable is a native table fed by appends. Its methods are safe for
// concurrent use; updates of all native tables of a DB are serialised.
type NativeTable struct {
	db     *DB
	key    string
	schema *arrow.Schema
	// progress and disabled are guarded by db.natives.mu.
	progress map[uint64]uint64
	disabled bool
}

// natives are a DB's native tables and the connection that appends to them.
type natives struct {
	mu     sync.Mutex
	conn   *Conn
	tables map[string]*NativeTable
	off    bool
}

// SetNativeTables turns native tables on (the default) or off: while off,
// NativeTable fails with ErrNativeDisabled and no table is created. Tests
// use it to exercise what callers do without them.
func (db *DB) SetNativeTables(on bool) {
	db.natives.mu.Lock()
	defer db.natives.mu.Unlock()
	db.natives.off = !on
}

// NativeTable returns the native table under key, creating it empty with
// the columns of schema if there is none. A table of the same key but
// another schema is replaced.
func (db *DB) NativeTable(ctx context.Context, key string, schema *arrow.Schema) (*NativeTable, error) {
	db.natives.mu.Lock()
	defer db.natives.mu.Unlock()
	if db.natives.off {
		return nil, ErrNativeDisabled
	}
	if t := db.natives.tables[key]; t != nil && t.schema.Equal(schema) {
		return t, nil
	}
	conn, err := db.nativeConnLocked(ctx)
	if err != nil {
		return nil, err
	}
	release, err := conn.RegisterRecords(ctx, "mink_native_source", schema, nil)
	if err != nil {
		return nil, err
	}
	defer release()
	t := &NativeTable{db: db, key: key, schema: schema, progress: map[uint64]uint64{}}
	q := "CREATE OR REPLACE TABLE " + t.Name() + " AS SELECT * FROM mink_native_source LIMIT 0"
	if err := conn.Exec(ctx, q); err != nil {
		return nil, fmt.Errorf("create native table %s: %w", key, err)
	}
	if db.natives.tables == nil {
		db.natives.tables = map[string]*NativeTable{}
	}
	db.natives.tables[key] = t
	return t, nil
}

// nativeConnLocked returns the connection that writes native tables.
// REQUIRES: db.natives.mu held.
func (db *DB) nativeConnLocked(ctx context.Context) (*Conn, error) {
	if db.natives.conn != nil {
		return db.natives.conn, nil
	}
	conn, err := db.Conn(ctx, ConnOptions{})
	if err != nil {
		return nil, err
	}
	if err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+NativeSchema); err != nil {
		conn.Close()
		return nil, err
	}
	db.natives.conn = conn
	return conn, nil
}

// Name is the table's name in SQL.
func (t *NativeTable) Name() string { return NativeSchema + "." + quoteIdent(t.key) }

// Update lets fn append to the table: appendRows appends batches (with the
// table's schema) in one DuckDB transaction each. progress is the caller's
// record of what the table holds, kept with the table (for example the
// offset up to which each input was appended); fn updates it after each
// append that succeeded. An error of fn is returned as it is. fn runs
// under the lock of all native tables: it must not do I/O other than
// appending (read the rows before, see Progress).
func (t *NativeTable) Update(ctx context.Context, fn func(progress map[uint64]uint64, appendRows func([]arrow.RecordBatch) error) error) error {
	db := t.db
	db.natives.mu.Lock()
	defer db.natives.mu.Unlock()
	if t.disabled || db.natives.tables[t.key] != t {
		return ErrNativeDisabled
	}
	conn, err := db.nativeConnLocked(ctx)
	if err != nil {
		return err
	}
	appendRows := func(batches []arrow.RecordBatch) error {
		if len(batches) == 0 {
			return nil
		}
		release, err := conn.RegisterRecords(ctx, "mink_native_source", t.schema, batches)
		if err != nil {
			return err
		}
		defer release()
		return conn.Exec(ctx, "INSERT INTO "+t.Name()+" SELECT * FROM mink_native_source")
	}
	return fn(t.progress, appendRows)
}

// Progress returns a copy of the table's progress record (see Update).
func (t *NativeTable) Progress() map[uint64]uint64 {
	t.db.natives.mu.Lock()
	defer t.db.natives.mu.Unlock()
	out := make(map[uint64]uint64, len(t.progress))
	for k, v := range t.progress {
		out[k] = v
	}
	return out
}

// Disable drops the table's rows and makes every later Update fail with
// ErrNativeDisabled (for example when DuckDB's memory is too small for it).
// A later NativeTable call with the same key does not bring it back.
func (t *NativeTable) Disable(ctx context.Context) error {
	db := t.db
	db.natives.mu.Lock()
	defer db.natives.mu.Unlock()
	t.disabled = true
	return db.dropNativeLocked(ctx, t.key, false)
}

// Disabled reports whether Disable was called.
func (t *NativeTable) Disabled() bool {
	t.db.natives.mu.Lock()
	defer t.db.natives.mu.Unlock()
	return t.disabled
}

// DropNativeTables drops the native tables whose keys keep rejects.
func (db *DB) DropNativeTables(ctx context.Context, keep func(key string) bool) error {
	db.natives.mu.Lock()
	defer db.natives.mu.Unlock()
	for key := range db.natives.tables {
		if !keep(key) {
			if err := db.dropNativeLocked(ctx, key, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// NativeTableKeys returns the keys of the native tables.
func (db *DB) NativeTableKeys() []string {
	db.natives.mu.Lock()
	defer db.natives.mu.Unlock()
	keys := make([]string, 0, len(db.natives.tables))
	for k := range db.natives.tables {
		keys = append(keys, k)
	}
	return keys
}

// dropNativeLocked drops the DuckDB table of key, and forgets key if
// forget. REQUIRES: db.natives.mu held.
func (db *DB) dropNativeLocked(ctx context.Context, key string, forget bool) error {
	t := db.natives.tables[key]
	if t == nil {
		return nil
	}
	if forget {
		delete(db.natives.tables, key)
	}
	conn, err := db.nativeConnLocked(ctx)
	if err != nil {
		return err
	}
	return conn.Exec(ctx, "DROP TABLE IF EXISTS "+t.Name())
}
