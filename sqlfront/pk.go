package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// kvBucket is what SQL uses of a primary-key bucket: a local
// buckets.KVBucket, or one led by another node, reached through Remote.
type kvBucket interface {
	Codec() *kvcodec.Codec
	// Write applies writes as one atomic batch (buckets.KVBucket.Write).
	Write(ctx context.Context, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, uint64, error)
	// Get returns the row of key in the acknowledged state.
	Get(ctx context.Context, key []byte) ([]byte, bool, error)
	// Scan returns the acknowledged state, in key order, from one
	// consistent snapshot. The caller releases the batches.
	Scan(ctx context.Context) ([]arrow.RecordBatch, error)
	// Changelog returns every acknowledged changelog batch
	// (_change_type, then the columns). The caller releases them.
	Changelog(ctx context.Context) ([]buckets.Batch, error)
}

// errNoKVBuckets: this build's bucket manager serves no primary-key buckets.
var errNoKVBuckets = errors.New("primary-key buckets are not served by this node")

// localKVBucket returns the primary-key bucket id if this node leads it
// (errors like buckets.Manager.Bucket). pk_local.go sets it.
var localKVBucket = func(m *buckets.Manager, id catalog.BucketID) (kvBucket, error) {
	return nil, errNoKVBuckets
}

// kvWriteHook, set only by tests (pk_export_test.go), wraps every write to
// a primary-key bucket: write does the real write; the hook decides whether
// to call it and what the statement sees, to fail a statement half-way.
var kvWriteHook func(id catalog.BucketID, write func() error) error

// hookedKV applies kvWriteHook to a bucket's writes.
type hookedKV struct {
	kvBucket
	id catalog.BucketID
}

func (h hookedKV) Write(ctx context.Context, writes []kvcodec.Write) (recs []kvcodec.ChangeRecord, first uint64, err error) {
	err = kvWriteHook(h.id, func() (err error) {
		recs, first, err = h.kvBucket.Write(ctx, writes)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return recs, first, nil
}

// remoteKV is a primary-key bucket led by another node. Calls that fail
// because the bucket is opening or moving (so nothing happened) are
// retried for up to wait.
type remoteKV struct {
	r     Remote
	addr  string
	id    catalog.BucketID
	codec *kvcodec.Codec
	wait  time.Duration
	// leader is the Flight address of the bucket's leader in the current
	// view ("" if none). A retry goes there: the leader at addr may have
	// died and the bucket moved, and a dead node sends no redirect.
	leader func() string
}

func (b *remoteKV) retry(ctx context.Context, fn func(addr string) error) error {
	addr := b.addr
	return buckets.Retry(ctx, b.wait, func() (bool, error) {
		err := fn(addr)
		if err == nil || errors.Is(err, buckets.ErrUnknownOutcome) {
			return true, err
		}
		if b.leader != nil {
			if to := b.leader(); to != "" {
				addr = to
			}
		}
		return false, err
	})
}

func (b *remoteKV) Codec() *kvcodec.Codec { return b.codec }
func (b *remoteKV) Write(ctx context.Context, writes []kvcodec.Write) (recs []kvcodec.ChangeRecord, first uint64, err error) {
	err = b.retry(ctx, func(addr string) (err error) {
		recs, first, err = b.r.WriteKV(ctx, addr, b.id, writes)
		return err
	})
	return recs, first, err
}
func (b *remoteKV) Get(ctx context.Context, key []byte) (row []byte, ok bool, err error) {
	err = b.retry(ctx, func(addr string) (err error) {
		row, ok, err = b.r.GetKV(ctx, addr, b.id, key)
		return err
	})
	return row, ok, err
}
func (b *remoteKV) Scan(ctx context.Context) (out []arrow.RecordBatch, err error) {
	err = b.retry(ctx, func(addr string) (err error) {
		out, err = b.r.ScanKV(ctx, addr, b.id)
		return err
	})
	return out, err
}
func (b *remoteKV) Changelog(ctx context.Context) (out []buckets.Batch, err error) {
	err = b.retry(ctx, func(addr string) (err error) {
		out, err = b.r.ReadChangelog(ctx, addr, b.id)
		return err
	})
	return out, err
}

// leaderFlightAddr is the Flight address of bucket id's leader in the view,
// or "" if it has none.
func (f *Frontend) leaderFlightAddr(id catalog.BucketID) string {
	var addr string
	f.cfg.Meta.Read(func(v *catalog.View) {
		if b, ok := v.Buckets[id]; ok {
			if n, ok := v.Nodes[b.Leader]; ok {
				addr = n.Addrs.Flight
			}
		}
	})
	return addr
}

// codecOf returns the codec of the primary-key table of bucket id.
func (f *Frontend) codecOf(id catalog.BucketID) (*kvcodec.Codec, error) {
	var spec *catalog.TableSpec
	f.cfg.Meta.Read(func(v *catalog.View) {
		if b, ok := v.Buckets[id]; ok {
			if t, ok := v.Tables[b.Table]; ok {
				sp := t.Spec
				spec = &sp
			}
		}
	})
	if spec == nil {
		return nil, fmt.Errorf("bucket %d: %w", id, buckets.ErrNoSuchBucket)
	}
	return buckets.NewKVCodec(*spec)
}

// retryWindow bounds the optimistic retries of a read-modify-write
// statement (UPDATE, DELETE, ON CONFLICT DO UPDATE) on one bucket before it
// fails with 40001.
const retryWindow = 10 * time.Second

// conflictRetry is the retry state of one read-modify-write statement.
type conflictRetry struct {
	deadline time.Time
	attempt  int
}

func newConflictRetry() *conflictRetry {
	return &conflictRetry{deadline: time.Now().Add(retryWindow)}
}

// again waits before the next attempt, after a conflict: a write of
// another session to the same rows is usually still waiting for its append
// to be acknowledged, and the rows read before that is over would conflict
// again. It fails with 40001 once the window is over.
func (r *conflictRetry) again(ctx context.Context) error {
	r.attempt++
	if time.Now().After(r.deadline) {
		return serializationFailure()
	}
	d := time.Millisecond << min(r.attempt, 6)
	d = d/2 + time.Duration(rand.Int64N(int64(d)))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// isPK reports whether the table is a primary-key table.
func (t *tableInfo) isPK() bool { return len(t.spec.PrimaryKey) > 0 }

// pkCols are the primary-key column indexes, in key order.
func (t *tableInfo) pkCols() []int {
	out := make([]int, len(t.spec.PrimaryKey))
	for i, k := range t.spec.PrimaryKey {
		out[i] = t.colIdx[k]
	}
	return out
}

// constraintName is PostgreSQL's default name of the table's primary key.
func (t *tableInfo) pkeyName() string { return t.name + "_pkey" }

// kvBucket returns the primary-key bucket id on this node, waiting up to
// BucketWait for one that is opening or moving.
func (f *Frontend) kvBucket(ctx context.Context, id catalog.BucketID) (kvBucket, error) {
	var out kvBucket
	err := buckets.Retry(ctx, f.cfg.BucketWait, func() (bool, error) {
		m := f.cfg.Buckets()
		if m == nil {
			return false, buckets.ErrRegistering
		}
		b, err := localKVBucket(m, id)
		if err == nil {
			if kvWriteHook != nil {
				out = hookedKV{b, id}
			} else {
				out = b
			}
			return true, nil
		}
		if to, ok := f.ledElsewhere(err); ok {
			// Another node leads it: reach it through Flight (the Pool
			// follows redirects if it moves again).
			codec, err := f.codecOf(id)
			if err != nil {
				return true, err
			}
			out = &remoteKV{r: f.cfg.Remote, addr: to, id: id, codec: codec, wait: f.cfg.BucketWait,
				leader: func() string { return f.leaderFlightAddr(id) }}
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bucketPart is the rows of a statement that go to one bucket.
type bucketPart struct {
	id  catalog.BucketID
	rec arrow.RecordBatch
}

// routeParts splits batches (with the table's schema) by partition and
// bucket. Parts of one bucket are merged, in row order. Release the parts'
// records.
func (s *session) routeParts(ctx context.Context, table *tableInfo, batches []arrow.RecordBatch) ([]bucketPart, error) {
	var order []catalog.BucketID
	byID := map[catalog.BucketID][]arrow.RecordBatch{}
	add := func(id catalog.BucketID, rec arrow.RecordBatch) {
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		rec.Retain()
		byID[id] = append(byID[id], rec)
	}
	cleanup := func() {
		for _, rs := range byID {
			releaseAll(rs)
		}
	}
	split := func(ids []catalog.BucketID, rec arrow.RecordBatch) error {
		return eachBucket(ctx, rec, table.keyCols, len(ids), func(i int, part arrow.RecordBatch) error {
			add(ids[i], part)
			return nil
		})
	}
	for _, rec := range batches {
		if rec.NumRows() == 0 {
			continue
		}
		if table.partCol < 0 {
			var ids []catalog.BucketID
			s.f.cfg.Meta.Read(func(v *catalog.View) {
				if t, ok := v.Tables[table.id]; ok {
					ids = t.Buckets
				}
			})
			if len(ids) == 0 {
				cleanup()
				return nil, undefinedTable(table.name)
			}
			if err := split(ids, rec); err != nil {
				cleanup()
				return nil, err
			}
			continue
		}
		parts, err := routing.SplitByPartition(ctx, rec, table.partCol)
		if err != nil {
			cleanup()
			return nil, err
		}
		for _, p := range parts {
			ids, err := s.f.ensurePartition(ctx, table, p.Value)
			if err == nil {
				err = split(ids, p.Record)
			}
			if err != nil {
				for _, q := range parts {
					q.Record.Release()
				}
				cleanup()
				return nil, err
			}
		}
		for _, q := range parts {
			q.Record.Release()
		}
	}
	out := make([]bucketPart, 0, len(order))
	for _, id := range order {
		merged, err := coalesce(table.schema, byID[id], 1<<62)
		if err != nil {
			releaseAll(partRecords(out))
			cleanup()
			return nil, err
		}
		out = append(out, bucketPart{id: id, rec: merged[0]})
	}
	cleanup()
	return out, nil
}

// eachBucket is routing.EachBucket with the node's round-robin.
func eachBucket(ctx context.Context, rec arrow.RecordBatch, keyCols []int, n int, fn func(bucket int, part arrow.RecordBatch) error) error {
	return routing.EachBucket(ctx, rec, keyCols, n, &roundRobin, fn)
}

func partRecords(parts []bucketPart) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, len(parts))
	for i, p := range parts {
		out[i] = p.rec
	}
	return out
}

func releaseParts(parts []bucketPart) {
	for _, p := range parts {
		p.rec.Release()
	}
}

// duplicateKey is PostgreSQL's 23505 for the row i of rec; loc is the
// session's time zone.
func duplicateKey(table *tableInfo, rec arrow.RecordBatch, i int, loc *time.Location) *pgwire.Error {
	return &pgwire.Error{Code: pgwire.CodeUniqueViolation,
		Message:        fmt.Sprintf("duplicate key value violates unique constraint %q", table.pkeyName()),
		Detail:         fmt.Sprintf("Key (%s)=(%s) already exists.", strings.Join(table.spec.PrimaryKey, ", "), keyText(table, rec, i, loc)),
		SchemaName:     "public",
		TableName:      table.name,
		ConstraintName: table.pkeyName()}
}

// keyText renders the primary-key values of row i as PostgreSQL does in
// the detail of a unique violation (the values uncut).
func keyText(table *tableInfo, rec arrow.RecordBatch, i int, loc *time.Location) string {
	text, ok := rowText(table.cols, rec, i, table.pkCols(), loc, 0)
	if !ok {
		return "?"
	}
	return text
}

// pkWrite applies writes made from rec (one write per row, in row order)
// to bucket b, mapping kv's errors to PostgreSQL's.
func (s *session) pkWrite(ctx context.Context, table *tableInfo, b kvBucket, rec arrow.RecordBatch, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, error) {
	records, _, err := b.Write(ctx, writes)
	var dup *kv.DuplicateKeyError
	if errors.As(err, &dup) {
		return nil, duplicateKey(table, rec, dup.Write, s.sessionLocation())
	}
	return records, err
}

// checkAbsent fails with 23505 if any key of the parts exists. A statement
// that writes several buckets checks every key before writing any, so that
// a duplicate key stores none of its rows (a concurrent insert of the same
// key between the check and the write can still fail it half-way).
func (s *session) checkAbsent(ctx context.Context, table *tableInfo, parts []bucketPart) error {
	for _, p := range parts {
		b, err := s.kvBucket(ctx, p.id, table)
		if err != nil {
			return err
		}
		codec := b.Codec()
		var key []byte
		for i := 0; i < int(p.rec.NumRows()); i++ {
			key, err = codec.AppendKey(key[:0], p.rec, i)
			if err != nil {
				return err
			}
			if _, ok, err := b.Get(ctx, key); err != nil {
				return err
			} else if ok {
				return duplicateKey(table, p.rec, i, s.sessionLocation())
			}
		}
	}
	return nil
}

// checkNoDuplicates fails with 23505 if two rows of rec (bound for one
// bucket: one key always routes to one bucket) have the same key; loc is
// the session's time zone.
func checkNoDuplicates(table *tableInfo, codec *kvcodec.Codec, rec arrow.RecordBatch, loc *time.Location) error {
	seen := map[string]bool{}
	var key []byte
	for i := 0; i < int(rec.NumRows()); i++ {
		var err error
		if key, err = codec.AppendKey(key[:0], rec, i); err != nil {
			return err
		}
		if seen[string(key)] {
			return duplicateKey(table, rec, i, loc)
		}
		seen[string(key)] = true
	}
	return nil
}

// changedRows decodes the rows of the records of the given types, in
// record order, as one batch of the table's schema.
func changedRows(codec *kvcodec.Codec, records []kvcodec.ChangeRecord, types ...kvcodec.ChangeType) (arrow.RecordBatch, error) {
	var rows [][]byte
	for _, r := range records {
		for _, t := range types {
			if r.Type == t {
				rows = append(rows, r.Row)
			}
		}
	}
	return codec.DecodeRows(memory.DefaultAllocator, rows)
}

// countType counts the records of type t.
func countType(records []kvcodec.ChangeRecord, t kvcodec.ChangeType) int {
	n := 0
	for _, r := range records {
		if r.Type == t {
			n++
		}
	}
	return n
}

// serializationFailure is the error of a read-modify-write that kept
// conflicting with concurrent writes.
func serializationFailure() *pgwire.Error {
	return &pgwire.Error{Code: pgwire.CodeSerializationFailure, Message: "could not serialize access due to concurrent update",
		Hint: "Other sessions kept changing the same rows; retry the statement."}
}
