package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
)

// PutTable upserts the rows of rec into a primary-key table and returns
// once every row is durable: each row replaces the row of its key, or
// inserts it (a bulk INSERT … ON CONFLICT (key) DO UPDATE of every
// column). Within one call a later row of a key wins.
//
// rec has every column of the table, matched by name, with the Arrow types
// of docs/sql-types.md. Rows are routed as the server routes them (by
// partition value, creating new partitions, then by the hash of the bucket
// key) and each bucket's part is sent to the bucket's leader as one atomic
// write (a bucket-addressed DoPut); the parts are sent in parallel and are
// independent: on error, some parts may be stored. Redirects, Unavailable
// and the retry rules are AppendTable's: a part is retried only when
// nothing of it can have been applied, and an error wrapping
// ErrUnknownOutcome means that part may or may not have been.
//
// A row with a null key column fails its part with an InvalidArgument
// status; a log table fails with ErrWrongKind.
func (c *Client) PutTable(ctx context.Context, table string, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	m, err := c.table(ctx, table, false)
	if err != nil {
		return err
	}
	if len(m.info.PrimaryKey) == 0 {
		return fmt.Errorf("table %q has no primary key (use AppendTable): %w", table, ErrWrongKind)
	}
	return c.writeParts(ctx, m, rec)
}

// codec returns the key and row codec of a primary-key table. Rows stored
// before a column was added (ALTER TABLE … ADD COLUMN) read with its
// missing value, which the codec needs to know, with which columns were
// added (columnAdded). Rows hold the dropped columns too (ALTER TABLE …
// DROP COLUMN), which the codec skips.
func (m *tableMeta) codec() (*kvcodec.Codec, error) {
	m.codecOnce.Do(func() {
		info := m.info
		stored := info.StoredColumns()
		cols := make([]sqltypes.Column, len(stored))
		idx := map[string]int{}
		created := 0
		for i, col := range stored {
			typ, err := sqltypes.Parse(col.Type)
			if err != nil {
				m.codecErr = fmt.Errorf("table %q column %q: %w", info.Name, col.Name, err)
				return
			}
			added, missing := columnAdded(col)
			cols[i] = sqltypes.Column{Name: col.Name, Type: typ, NotNull: col.NotNull, Missing: missing, Dropped: col.Dropped}
			idx[col.Name] = i
			if !added {
				created = i + 1
			}
		}
		keyCols := make([]int, len(info.PrimaryKey))
		for i, name := range info.PrimaryKey {
			j, ok := idx[name]
			if !ok {
				m.codecErr = fmt.Errorf("table %q: primary-key column %q does not exist", info.Name, name)
				return
			}
			keyCols[i] = j
		}
		m.kvCodec, m.codecErr = kvcodec.NewTableCodec(cols, created, keyCols)
	})
	return m.kvCodec, m.codecErr
}

// columnAdded reports whether a column was added after its table was
// created, and the value rows stored without it read as (nil: NULL).
func columnAdded(col flightwire.Column) (added bool, missing *string) {
	return col.Added, col.Missing
}

// Lookup returns the rows of a primary-key table whose keys are the rows
// of keys: one row per key found, in the order of keys (a key given twice
// gives its row twice), with the table's columns; keys with no row are
// left out. The caller releases the batch.
//
// keys has the primary-key columns, matched by name, with exactly the Arrow
// types the table's schema has (docs/sql-types.md); other columns are
// ignored. Each bucket's keys are looked up at the bucket's leader with one
// `lookup` action and answered from one consistent state of that bucket
// (its acknowledged rows); different buckets are read independently.
// Lookups follow redirects and retry Unavailable and unreachable nodes
// until the call's deadline. A log table fails with ErrWrongKind.
func (c *Client) Lookup(ctx context.Context, table string, keys arrow.RecordBatch) (arrow.RecordBatch, error) {
	m, err := c.table(ctx, table, false)
	if err != nil {
		return nil, err
	}
	if len(m.info.PrimaryKey) == 0 {
		return nil, fmt.Errorf("table %q has no primary key: %w", table, ErrWrongKind)
	}
	codec, err := m.codec()
	if err != nil {
		return nil, err
	}
	schema := codec.Schema()
	keyArrs := make([]arrow.Array, len(m.info.PrimaryKey))
	for i, name := range m.info.PrimaryKey {
		j, err := columnIndex(keys.Schema(), name)
		if err != nil {
			return nil, fmt.Errorf("lookup in table %q: %w", table, err)
		}
		want := schema.Field(codec.KeyColumns()[i]).Type
		if got := keys.Column(j).DataType(); !arrow.TypeEqual(got, want) {
			return nil, fmt.Errorf("lookup in table %q: key column %q is %s, want %s", table, name, got, want)
		}
		keyArrs[i] = keys.Column(j)
	}
	n := int(keys.NumRows())
	// Route every key to its bucket, as rows are routed.
	bucketCols := make([]int, len(m.info.BucketKey))
	for i, name := range m.info.BucketKey {
		if bucketCols[i], err = columnIndex(keys.Schema(), name); err != nil {
			return nil, fmt.Errorf("lookup in table %q: %w", table, err)
		}
	}
	count := m.info.BucketCount
	if m.info.PartitionBy == "" {
		count = len(m.buckets)
	}
	if count == 0 {
		return nil, fmt.Errorf("table %q has no buckets", table)
	}
	index, err := routing.Buckets(keys, bucketCols, count)
	if err != nil {
		return nil, fmt.Errorf("lookup in table %q: %w", table, err)
	}
	partCol := -1
	if m.info.PartitionBy != "" {
		if partCol, err = columnIndex(keys.Schema(), m.info.PartitionBy); err != nil {
			return nil, fmt.Errorf("lookup in table %q: %w", table, err)
		}
	}
	type group struct {
		rows []int
		keys [][]byte
	}
	groups := map[uint64]*group{}
	refreshed := false
	for i := 0; i < n; i++ {
		ids := m.buckets
		if partCol >= 0 {
			v, err := routing.PartitionValue(keys.Column(partCol), i)
			if err != nil {
				return nil, fmt.Errorf("lookup in table %q: %w", table, err)
			}
			if ids = m.partitions[v]; ids == nil && !refreshed {
				// Refresh once a call: the partition may be newer than
				// the cache.
				if m, err = c.table(ctx, table, true); err != nil {
					return nil, err
				}
				refreshed = true
				ids = m.partitions[v]
			}
			if ids == nil {
				continue // no such partition: no row
			}
		}
		if len(ids) != count {
			return nil, fmt.Errorf("table %q: a partition has %d buckets, want %d", table, len(ids), count)
		}
		key, err := codec.AppendKeyOf(nil, keyArrs, i)
		if err != nil {
			return nil, fmt.Errorf("lookup in table %q: key %d: %w", table, i, err)
		}
		g := groups[ids[index[i]]]
		if g == nil {
			g = &group{}
			groups[ids[index[i]]] = g
		}
		g.rows = append(g.rows, i)
		g.keys = append(g.keys, key)
	}
	found := make([][]byte, n)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	stale := false // a node answered under another schema than the cached one
	for bucket, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, tag, err := c.lookupBucket(ctx, table, bucket, g.keys)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if tag != "" && tag != m.info.SchemaTag {
				stale = true
			}
			for k, row := range rows {
				found[g.rows[k]] = row
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var rows [][]byte
	for _, row := range found {
		if row != nil {
			rows = append(rows, row)
		}
	}
	out, err := codec.DecodeRows(memory.DefaultAllocator, rows)
	if stale || errors.Is(err, kvcodec.ErrNewerColumns) {
		// The table's columns changed (ALTER TABLE … ADD, DROP or RENAME
		// COLUMN) since its information was cached: decode with the
		// new; keys encode as before.
		if out != nil {
			out.Release()
		}
		if m, err = c.table(ctx, table, true); err != nil {
			return nil, err
		}
		if codec, err = m.codec(); err != nil {
			return nil, err
		}
		return codec.DecodeRows(memory.DefaultAllocator, rows)
	}
	return out, err
}

// lookupBucket runs one lookup action at the bucket's leader, following
// redirects and retrying Unavailable (a lookup changes nothing, so any
// failure to reach the leader is retried) until the call's deadline.
func (c *Client) lookupBucket(ctx context.Context, table string, bucket uint64, keys [][]byte) (rows [][]byte, schemaTag string, err error) {
	route := bucketRoute{table: table, bucket: bucket, noLeader: "has no leader yet"}
	err = c.atLeader(ctx, route, func(ctx context.Context, fc flight.FlightServiceClient, addr string) (bool, error) {
		var res flightwire.KVLookupResult
		if err := flightwire.DoAction(ctx, fc, flightwire.ActionLookup, flightwire.KVLookupRequest{Bucket: bucket, Keys: keys}, &res); err != nil {
			return false, err
		}
		if len(res.Rows) != len(keys) {
			return true, fmt.Errorf("bucket %d at %s: %d keys looked up, %d answers", bucket, addr, len(keys), len(res.Rows))
		}
		rows, schemaTag = res.Rows, res.SchemaTag
		return true, nil
	}, func(addr string, err error) (failStep, error) {
		retry := fmt.Errorf("lookup in bucket %d at %s: %w", bucket, addr, err)
		switch _, redirected := flightwire.RedirectOf(err); {
		case redirected:
			// Not followed: too many in a row, or to a bad location.
			return retryLeader, retry
		case flightwire.IsBucketUnavailable(err):
			// Opening here: retry here.
			return retryHere, retry
		case flightwire.IsUnavailable(err) && ctx.Err() == nil:
			// The node could not be reached, or the connection broke: ask
			// the cluster who leads the bucket now.
			return retryLeader, retry
		default:
			if flightwire.IsNotFound(err) {
				c.forgetTable(table)
			}
			return giveUp, retry
		}
	})
	if err != nil {
		return nil, "", err
	}
	return rows, schemaTag, nil
}

// changelogEndpoints returns one changelog ticket per bucket of a
// primary-key table (of the selected partitions), at the cached leaders,
// and the projected changelog schema.
func (c *Client) changelogEndpoints(ctx context.Context, table string, opts ScanOptions) ([]*flight.FlightEndpoint, *arrow.Schema, error) {
	m, err := c.table(ctx, table, true)
	if err != nil {
		return nil, nil, err
	}
	if len(m.info.PrimaryKey) == 0 {
		return nil, nil, fmt.Errorf("table %q has no primary key, so no changelog: %w", table, ErrWrongKind)
	}
	codec, err := m.codec()
	if err != nil {
		return nil, nil, err
	}
	schema := codec.ChangelogSchema()
	if opts.Columns != nil {
		fields := make([]arrow.Field, len(opts.Columns))
		for i, name := range opts.Columns {
			j := schema.FieldIndices(name)
			if len(j) == 0 {
				return nil, nil, fmt.Errorf("table %q: changelog column %q does not exist", table, name)
			}
			fields[i] = schema.Field(j[0])
		}
		schema = arrow.NewSchema(fields, nil)
	}
	var ids []uint64
	switch {
	case m.info.PartitionBy == "":
		if opts.Partitions != nil {
			return nil, nil, fmt.Errorf("table %q is not partitioned", table)
		}
		ids = m.buckets
	default:
		want := map[string]bool{}
		for _, p := range opts.Partitions {
			want[p] = true
		}
		for _, p := range m.info.Partitions {
			if opts.Partitions == nil || want[p.Value] {
				ids = append(ids, m.partitions[p.Value]...)
			}
		}
	}
	eps := make([]*flight.FlightEndpoint, len(ids))
	for i, id := range ids {
		t := flightwire.Ticket{Bucket: id, Columns: opts.Columns, Changelog: true}
		eps[i] = &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: t.Encode()}}
		if addr := c.leader(id); addr != "" {
			eps[i].Location = []*flight.Location{{Uri: flightwire.Location(addr)}}
		}
	}
	return eps, schema, nil
}
