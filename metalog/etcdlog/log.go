package etcdlog

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minkdb/mink/metalog/internal/backoff"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/metalog"
)

// DefaultCluster is the default cluster name, the first element of every key
// mink writes to etcd.
const DefaultCluster = "mink"

const (
	// SnapshotChunkBytes is the size of one snapshot chunk key, well under
	// etcd's default request limit.
	SnapshotChunkBytes = 1 << 20

	// tailPageSize is the number of entries per range read while catching up.
	tailPageSize = 256
	// truncateBatch is the number of log keys deleted per request.
	truncateBatch = 1000
)

// Log is the metadata log in etcd. Under the prefix /<cluster>/ it uses:
//
//	log/<index, 20 digits>               one entry per key; index 1, 2, 3, ...
//	log-head                             the last index, decimal
//	log-truncated                        entries at or below it may be gone, decimal
//	snapshot                             pointer to the current snapshot (JSON, written last)
//	snapshot/<index>/<writer>/<chunk>    the snapshot's bytes in chunks of SnapshotChunkBytes
//
// Append is one transaction that compares log-head and writes log-head and the
// entry together. SaveSnapshot writes the chunks, then the pointer (moving
// log-truncated to the previous snapshot's index in the same transaction),
// deletes older chunks and the truncated entries, and compacts etcd's history
// to the current revision.
//
// Log starts no goroutines; it is safe for concurrent use.
type Log struct {
	client *clientv3.Client
	keys   etcdKeys
	// head is the highest head seen, the guess for the next Append.
	head atomic.Uint64
	// chunkBytes is SnapshotChunkBytes except in tests.
	chunkBytes int
}

type etcdKeys struct {
	prefix      string // "/<cluster>/"
	logPrefix   string // "/<cluster>/log/"
	head        string
	truncated   string
	snapshot    string // the pointer
	snapPrefix  string // "/<cluster>/snapshot/"
	livePrefix  string // "/<cluster>/live/"
	coordinator string // "/<cluster>/coordinator/" (election prefix)
}

func keysFor(cluster string) etcdKeys {
	if cluster == "" {
		cluster = DefaultCluster
	}
	p := "/" + cluster + "/"
	return etcdKeys{
		prefix:      p,
		logPrefix:   p + "log/",
		head:        p + "log-head",
		truncated:   p + "log-truncated",
		snapshot:    p + "snapshot",
		snapPrefix:  p + "snapshot/",
		livePrefix:  p + "live/",
		coordinator: p + "coordinator/",
	}
}

func (k etcdKeys) entry(index uint64) string {
	return fmt.Sprintf("%s%020d", k.logPrefix, index)
}

func (k etcdKeys) entryIndex(key []byte) (uint64, error) {
	s, ok := strings.CutPrefix(string(key), k.logPrefix)
	if !ok {
		return 0, fmt.Errorf("key %q is not a log entry", key)
	}
	return strconv.ParseUint(s, 10, 64)
}

// New returns the log of cluster ("" means DefaultCluster) in the etcd
// reached by client. The caller keeps ownership of client.
func New(client *clientv3.Client, cluster string) *Log {
	return &Log{client: client, keys: keysFor(cluster), chunkBytes: SnapshotChunkBytes}
}

func (l *Log) observeHead(h uint64) {
	for {
		cur := l.head.Load()
		if h <= cur || l.head.CompareAndSwap(cur, h) {
			return
		}
	}
}

func parseIndex(kvs []*mvccpb.KeyValue, what string) (uint64, error) {
	if len(kvs) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s %q: %w", what, kvs[0].Value, err)
	}
	return n, nil
}

func (l *Log) headIs(h uint64) clientv3.Cmp {
	if h == 0 {
		return clientv3.Compare(clientv3.CreateRevision(l.keys.head), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(l.keys.head), "=", strconv.FormatUint(h, 10))
}

// Append implements Log.
func (l *Log) Append(ctx context.Context, data []byte) (uint64, error) {
	return l.AppendBatch(ctx, [][]byte{data})
}

// AppendBatch implements Log. It writes the entries at head+1, head+2, ...
// and the new head in one transaction that compares the head, retrying at the
// new head after a conflict.
//
// When the transaction fails ambiguously (etcd timed out, the leader changed,
// the connection broke), the attempt at head h may still commit. AppendBatch
// then stays at h: it retries the same conditional write (which cannot
// commit twice) until it sees the head move past h, and then reads entry h+1
// to see whether the winner was its own attempt. So when it returns with ctx
// still live, no attempt of it is in flight. If ctx ends first, the error
// leaves the outcome unknown.
func (l *Log) AppendBatch(ctx context.Context, entries [][]byte) (uint64, error) {
	return l.appendBatch(ctx, nil, entries)
}

// guardCmps is the condition of a guard made by NewGuard.
type guardCmps []clientv3.Cmp

// NewGuard returns a guard for Log: every cmp must hold in the append's
// transaction. desc names the condition in errors.
func NewGuard(desc string, cmps ...clientv3.Cmp) metalog.Guard {
	return metalog.NewGuard(desc, guardCmps(cmps))
}

// AppendGuarded implements metalog.GuardedLog. The guard is one made by
// NewGuard: its
// comparisons join the head comparison in the append's transaction, and when
// the transaction fails, a nested transaction in its else branch tells
// whether the guard held. The ambiguity handling is AppendBatch's: after an
// ambiguous failure the same conditional write is retried, and a guard seen
// false with the head still at h means no attempt committed (nor can one
// later: a guard does not become true again).
func (l *Log) AppendGuarded(ctx context.Context, guard metalog.Guard, data []byte) (uint64, error) {
	if cmps, _ := guard.Condition().(guardCmps); len(cmps) == 0 {
		return 0, fmt.Errorf("etcd log append: %v is not an etcdlog guard: %w", guard, metalog.ErrNotAppended)
	}
	return l.appendBatch(ctx, &guard, [][]byte{data})
}

func (l *Log) appendBatch(ctx context.Context, guard *metalog.Guard, entries [][]byte) (uint64, error) {
	size := 0
	for _, e := range entries {
		size += len(e)
	}
	switch {
	case len(entries) == 0:
		return 0, fmt.Errorf("etcd log append: no entries: %w", metalog.ErrNotAppended)
	case len(entries) > metalog.MaxAppendEntries || size > metalog.MaxAppendBytes:
		return 0, fmt.Errorf("etcd log append: %d entries of %d bytes exceed %d entries or %d bytes: %w",
			len(entries), size, metalog.MaxAppendEntries, metalog.MaxAppendBytes, metalog.ErrNotAppended)
	}
	n := uint64(len(entries))
	h := l.head.Load()
	// pending: an attempt at head h failed ambiguously and may still commit.
	pending := false
	var lastErr error
	for attempt := 1; ; attempt++ {
		puts := make([]clientv3.Op, 0, len(entries)+1)
		puts = append(puts, clientv3.OpPut(l.keys.head, strconv.FormatUint(h+n, 10)))
		for i, e := range entries {
			puts = append(puts, clientv3.OpPut(l.keys.entry(h+1+uint64(i)), string(e)))
		}
		cmps := []clientv3.Cmp{l.headIs(h)}
		elses := []clientv3.Op{clientv3.OpGet(l.keys.head)}
		if guard != nil {
			cmps = append(cmps, guard.Condition().(guardCmps)...)
			elses = append(elses, clientv3.OpTxn(guard.Condition().(guardCmps), nil, nil))
		}
		resp, err := l.client.Txn(ctx).If(cmps...).Then(puts...).Else(elses...).Commit()
		var cur uint64
		switch {
		case err == nil && resp.Succeeded:
			l.observeHead(h + n)
			return h + 1, nil
		case err == nil:
			if cur, err = parseIndex(resp.Responses[0].GetResponseRange().Kvs, "log head"); err != nil {
				return 0, fmt.Errorf("etcd log append: %w: %w", metalog.ErrNotAppended, err)
			}
			if guard != nil && !resp.Responses[1].GetResponseTxn().GetSucceeded() {
				if pending && cur > h {
					// An earlier attempt at h may have committed while
					// the guard still held.
					got, err := l.resolve(ctx, h+1, entries[0])
					if err != nil {
						return 0, fmt.Errorf("etcd log append at %d: outcome unknown: %w (after %v)", h+1, err, lastErr)
					}
					if got {
						l.observeHead(cur)
						return h + 1, nil
					}
				}
				l.observeHead(cur)
				return 0, fmt.Errorf("etcd log append: %v: %w: %w", guard, metalog.ErrGuardFailed, metalog.ErrNotAppended)
			}
		default:
			lastErr = err
			if ctx.Err() != nil {
				return 0, fmt.Errorf("etcd log append at %d: %w", h+1, err)
			}
			if !pending && definiteEtcdError(err) {
				return 0, fmt.Errorf("etcd log append: %w: %w", metalog.ErrNotAppended, err)
			}
			pending = true
			if err := backoff.Sleep(ctx, backoff.Delay(attempt)); err != nil {
				return 0, fmt.Errorf("etcd log append at %d: outcome unknown: %w (after %v)", h+1, err, lastErr)
			}
			if cur, err = l.Head(ctx); err != nil {
				continue // retry the same conditional write
			}
			if cur == h {
				continue // nothing committed at h+1 yet: retry the same write
			}
		}
		if pending && cur > h {
			// The attempt at h either won h+1 or can never commit.
			got, err := l.resolve(ctx, h+1, entries[0])
			if err != nil {
				return 0, fmt.Errorf("etcd log append at %d: outcome unknown: %w (after %v)", h+1, err, lastErr)
			}
			if got {
				l.observeHead(cur)
				return h + 1, nil
			}
			pending = false
		}
		l.observeHead(cur)
		h = cur
	}
}

// resolve reports whether entry index holds data, retrying reads until ctx
// ends. A truncated entry cannot be resolved.
func (l *Log) resolve(ctx context.Context, index uint64, data []byte) (bool, error) {
	for attempt := 1; ; attempt++ {
		resp, err := l.client.Get(ctx, l.keys.entry(index))
		if err == nil {
			if len(resp.Kvs) == 0 {
				return false, fmt.Errorf("entry %d was truncated before it could be compared", index)
			}
			return bytes.Equal(resp.Kvs[0].Value, data), nil
		}
		if err := backoff.Sleep(ctx, backoff.Delay(attempt)); err != nil {
			return false, err
		}
	}
}

// definiteEtcdError reports whether err means etcd refused the request before
// it could be applied (so it was not, and never will be).
func definiteEtcdError(err error) bool {
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.ResourceExhausted, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition:
		return true
	}
	return false
}

// Head implements Log with a linearizable read of log-head.
func (l *Log) Head(ctx context.Context) (uint64, error) {
	resp, err := l.client.Get(ctx, l.keys.head)
	if err != nil {
		return 0, fmt.Errorf("etcd log head: %w", err)
	}
	h, err := parseIndex(resp.Kvs, "log head")
	if err != nil {
		return 0, err
	}
	l.observeHead(h)
	return h, nil
}

// Truncated returns the index at or below which entries may have been
// deleted.
func (l *Log) Truncated(ctx context.Context) (uint64, error) {
	resp, err := l.client.Get(ctx, l.keys.truncated)
	if err != nil {
		return 0, fmt.Errorf("etcd log truncation point: %w", err)
	}
	return parseIndex(resp.Kvs, "log truncation point")
}

// errRestartTail makes Tail go back to a range read (after a compacted or
// broken watch).
var errRestartTail = errors.New("restart tail")

// Tail implements Log: a range read from the next index at one revision,
// then a watch from the revision after it. A watch that fails (compaction,
// lost leader) is replaced by a new range read from where it stopped.
// fn must not modify data.
func (l *Log) Tail(ctx context.Context, from uint64, fn func(index uint64, data []byte) error) error {
	if from == 0 {
		from = 1
	}
	next := from
	for {
		rev, err := l.readFrom(ctx, &next, fn)
		if errors.Is(err, errRestartTail) {
			continue
		}
		if err != nil {
			return err
		}
		err = l.watchFrom(ctx, &next, rev+1, fn)
		if errors.Is(err, errRestartTail) {
			continue
		}
		return err
	}
}

// readFrom delivers the entries from *next to the head at one revision, which
// it returns.
func (l *Log) readFrom(ctx context.Context, next *uint64, fn func(uint64, []byte) error) (int64, error) {
	end := clientv3.WithRange(clientv3.GetPrefixRangeEnd(l.keys.logPrefix))
	resp, err := l.client.Txn(ctx).Then(
		clientv3.OpGet(l.keys.truncated),
		clientv3.OpGet(l.keys.entry(*next), end, clientv3.WithLimit(tailPageSize)),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd log read from %d: %w", *next, err)
	}
	rev := resp.Header.Revision
	truncated, err := parseIndex(resp.Responses[0].GetResponseRange().Kvs, "log truncation point")
	if err != nil {
		return 0, err
	}
	if *next <= truncated {
		return 0, fmt.Errorf("etcd log read from %d (truncated through %d): %w", *next, truncated, metalog.ErrTruncated)
	}
	page := resp.Responses[1].GetResponseRange()
	for {
		for _, kv := range page.Kvs {
			if err := l.deliver(next, kv, fn); err != nil {
				return 0, err
			}
		}
		if !page.More {
			return rev, nil
		}
		r, err := l.client.Get(ctx, l.keys.entry(*next), end, clientv3.WithLimit(tailPageSize), clientv3.WithRev(rev))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return 0, errRestartTail
		}
		if err != nil {
			return 0, fmt.Errorf("etcd log read from %d: %w", *next, err)
		}
		page = (*etcdserverpb.RangeResponse)(r)
	}
}

func (l *Log) deliver(next *uint64, kv *mvccpb.KeyValue, fn func(uint64, []byte) error) error {
	index, err := l.keys.entryIndex(kv.Key)
	if err != nil {
		return err
	}
	if index != *next {
		// Entries are dense: a hole means a concurrent truncation (the next
		// read reports it) or a damaged log (every retry reports it).
		return fmt.Errorf("etcd log: expected entry %d, found %d", *next, index)
	}
	if err := fn(index, kv.Value); err != nil {
		return err
	}
	*next = index + 1
	// The next Append of this node then starts at the right head instead of
	// paying a conflict for every entry other nodes appended meanwhile.
	l.observeHead(index)
	return nil
}

func (l *Log) watchFrom(ctx context.Context, next *uint64, rev int64, fn func(uint64, []byte) error) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range l.client.Watch(wctx, l.keys.logPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if resp.Canceled || resp.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errRestartTail
		}
		for _, ev := range resp.Events {
			if ev.Type != mvccpb.PUT {
				continue // truncation
			}
			index, err := l.keys.entryIndex(ev.Kv.Key)
			if err != nil {
				return err
			}
			if index < *next {
				continue
			}
			if index > *next {
				return errRestartTail
			}
			if err := l.deliver(next, ev.Kv, fn); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errRestartTail
}

// snapshotPointer is the value of the snapshot key. It is written after all
// chunks, so a reader that finds it finds the chunks.
type snapshotPointer struct {
	Index  uint64 `json:"index"`
	Bytes  int    `json:"bytes"`
	Chunks int    `json:"chunks"`
	SHA256 string `json:"sha256"`
	// Prefix is the key prefix of the chunks: snapshot/<index>/<writer>/.
	Prefix string    `json:"prefix"`
	Saved  time.Time `json:"saved"`
}

func chunkKey(prefix string, i int) string { return fmt.Sprintf("%s%06d", prefix, i) }

func (l *Log) readPointer(ctx context.Context) (*snapshotPointer, *clientv3.GetResponse, error) {
	resp, err := l.client.Get(ctx, l.keys.snapshot)
	if err != nil {
		return nil, nil, fmt.Errorf("read snapshot pointer: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp, nil
	}
	var p snapshotPointer
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return nil, nil, fmt.Errorf("decode snapshot pointer %q: %w", resp.Kvs[0].Value, err)
	}
	return &p, resp, nil
}

// LoadSnapshot implements Log. The chunks are read at the pointer's revision,
// so a concurrent save cannot mix two snapshots.
func (l *Log) LoadSnapshot(ctx context.Context) (uint64, []byte, error) {
	for attempt := 1; ; attempt++ {
		p, resp, err := l.readPointer(ctx)
		if err != nil || p == nil {
			return 0, nil, err
		}
		data, err := l.readChunks(ctx, p, resp.Header.Revision)
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 5 {
			continue // a newer snapshot replaced this one while we read it
		}
		if err != nil {
			return 0, nil, fmt.Errorf("load snapshot at index %d: %w", p.Index, err)
		}
		return p.Index, data, nil
	}
}

func (l *Log) readChunks(ctx context.Context, p *snapshotPointer, rev int64) ([]byte, error) {
	data := make([]byte, 0, p.Bytes)
	for i := range p.Chunks {
		resp, err := l.client.Get(ctx, chunkKey(p.Prefix, i), clientv3.WithRev(rev))
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return nil, fmt.Errorf("chunk %s is missing", chunkKey(p.Prefix, i))
		}
		data = append(data, resp.Kvs[0].Value...)
	}
	sum := sha256.Sum256(data)
	if len(data) != p.Bytes || hex.EncodeToString(sum[:]) != p.SHA256 {
		return nil, fmt.Errorf("snapshot is %d bytes with sha256 %x, pointer says %d bytes with %s",
			len(data), sum, p.Bytes, p.SHA256)
	}
	return data, nil
}

// SaveSnapshot implements Log.
//
//  1. If the pointer names a snapshot at index or above, do nothing.
//  2. Write the chunks under snapshot/<index>/<writer>/ (writer is random, so
//     two nodes saving the same index never mix chunks).
//  3. In one transaction, if the pointer is unchanged since step 1: write the
//     pointer and set log-truncated to the previous snapshot's index. If the
//     pointer changed, start over from step 1 (deleting our chunks if ours is
//     no longer newer).
//  4. Delete older chunks, delete the entries at or below log-truncated in
//     batches of truncateBatch, and compact etcd's history to the current
//     revision.
//
// Keeping the entries of one snapshot interval lets nodes that lag by less
// than that keep tailing instead of reloading the snapshot.
func (l *Log) SaveSnapshot(ctx context.Context, index uint64, data []byte) error {
	p, resp, err := l.readPointer(ctx)
	if err != nil {
		return err
	}
	if p != nil && p.Index >= index {
		return nil
	}
	var writer [8]byte
	rand.Read(writer[:])
	sum := sha256.Sum256(data)
	ours := snapshotPointer{
		Index:  index,
		Bytes:  len(data),
		SHA256: hex.EncodeToString(sum[:]),
		Prefix: fmt.Sprintf("%s%020d/%x/", l.keys.snapPrefix, index, writer),
		Saved:  time.Now().UTC(),
	}
	for off := 0; off < len(data); off += l.chunkBytes {
		chunk := data[off:min(off+l.chunkBytes, len(data))]
		if _, err := l.client.Put(ctx, chunkKey(ours.Prefix, ours.Chunks), string(chunk)); err != nil {
			l.deleteChunks(ctx, ours.Prefix)
			return fmt.Errorf("save snapshot at %d: write chunk %d: %w", index, ours.Chunks, err)
		}
		ours.Chunks++
	}
	value, err := json.Marshal(ours)
	if err != nil {
		return err
	}

	var prevIndex uint64
	for {
		cmp := clientv3.Compare(clientv3.CreateRevision(l.keys.snapshot), "=", 0)
		if p != nil {
			prevIndex = p.Index
			cmp = clientv3.Compare(clientv3.ModRevision(l.keys.snapshot), "=", resp.Kvs[0].ModRevision)
		}
		tr, err := l.client.Txn(ctx).If(cmp).Then(
			clientv3.OpPut(l.keys.snapshot, string(value)),
			clientv3.OpPut(l.keys.truncated, strconv.FormatUint(prevIndex, 10)),
		).Commit()
		if err != nil {
			// Ambiguous: the pointer may name our chunks, so keep them.
			return fmt.Errorf("save snapshot at %d: write pointer: %w", index, err)
		}
		if tr.Succeeded {
			break
		}
		if p, resp, err = l.readPointer(ctx); err != nil {
			return err
		}
		if p != nil && p.Index >= index {
			l.deleteChunks(ctx, ours.Prefix)
			return nil
		}
	}

	// Everything before our chunks is older (or a losing writer's).
	if _, err := l.client.Delete(ctx, l.keys.snapPrefix, clientv3.WithRange(ours.Prefix)); err != nil {
		return fmt.Errorf("save snapshot at %d: delete older chunks: %w", index, err)
	}
	rev, err := l.truncate(ctx, prevIndex)
	if err != nil {
		return fmt.Errorf("save snapshot at %d: truncate through %d: %w", index, prevIndex, err)
	}
	if _, err := l.client.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("save snapshot at %d: compact etcd at revision %d: %w", index, rev, err)
	}
	return nil
}

// deleteChunks removes the chunks of a snapshot that lost (best effort: the
// next successful save deletes everything older than itself anyway).
func (l *Log) deleteChunks(ctx context.Context, prefix string) {
	l.client.Delete(ctx, prefix, clientv3.WithPrefix())
}

// truncate deletes the entries at or below through, in batches, starting at
// the oldest entry still present (an earlier truncation may have stopped
// half-way). It returns the revision after the last delete.
func (l *Log) truncate(ctx context.Context, through uint64) (int64, error) {
	first, err := l.client.Get(ctx, l.keys.logPrefix, clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	rev := first.Header.Revision
	if len(first.Kvs) == 0 {
		return rev, nil
	}
	lo, err := l.keys.entryIndex(first.Kvs[0].Key)
	if err != nil {
		return 0, err
	}
	for ; lo <= through; lo += truncateBatch {
		hi := min(lo+truncateBatch, through+1) // exclusive
		resp, err := l.client.Delete(ctx, l.keys.entry(lo), clientv3.WithRange(l.keys.entry(hi)))
		if err != nil {
			return 0, err
		}
		rev = resp.Header.Revision
	}
	return rev, nil
}

// Close implements Log. Log holds nothing but the caller's client.
func (l *Log) Close() error { return nil }

// DefaultDialTimeout is how long Dial retries an unreachable etcd by default.
const DefaultDialTimeout = 30 * time.Second

// Dial connects to etcd at endpoints and checks that it answers a
// linearizable read (so it has a leader), retrying with a log line per
// failure until timeout. The error after the last attempt names the
// endpoints: "etcd at 127.0.0.1:2379 unreachable after 30s: ...".
func Dial(ctx context.Context, endpoints []string, logger *slog.Logger, timeout time.Duration) (*clientv3.Client, error) {
	return DialWith(ctx, endpoints, logger, timeout, Credentials{})
}

// Credentials are what an etcd with authentication or TLS asks of its
// clients: a user and password (etcd's auth), and a TLS configuration
// (server verification and a client certificate) for https endpoints.
type Credentials struct {
	User, Password string
	TLS            *tls.Config
}

// DialWith is Dial with credentials. Credentials etcd refuses fail at
// once, without retries: "etcd at …: the credentials are refused: …".
func DialWith(ctx context.Context, endpoints []string, logger *slog.Logger, timeout time.Duration, creds Credentials) (*clientv3.Client, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	where := strings.Join(endpoints, ",")
	if len(endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		// The client's own log lines repeat what the errors say.
		Logger:   zap.NewNop(),
		Username: creds.User,
		Password: creds.Password,
		TLS:      creds.TLS,
	})
	if err != nil {
		if authError(err) {
			return nil, fmt.Errorf("etcd at %s: the credentials are refused: %w", where, err)
		}
		return nil, fmt.Errorf("etcd at %s: %w", where, err)
	}
	deadline := time.Now().Add(timeout)
	perTry := min(2*time.Second, max(timeout/4, 200*time.Millisecond))
	for attempt := 1; ; attempt++ {
		probeCtx, cancel := context.WithTimeout(ctx, min(perTry, time.Until(deadline)))
		_, err = client.Get(probeCtx, "health")
		cancel()
		if err == nil {
			return client, nil
		}
		if authError(err) {
			client.Close()
			if creds.User == "" {
				return nil, fmt.Errorf("etcd at %s requires authentication (give --etcd-user and --etcd-password-file): %w", where, err)
			}
			return nil, fmt.Errorf("etcd at %s: the credentials are refused: %w", where, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// Say why: a refused connection is clearer than a deadline.
			if dialErr := probeTCP(endpoints); dialErr != nil {
				err = dialErr
			}
		}
		if ctx.Err() != nil {
			client.Close()
			return nil, fmt.Errorf("etcd at %s: %w (last error: %v)", where, ctx.Err(), err)
		}
		if time.Until(deadline) <= 0 {
			client.Close()
			return nil, fmt.Errorf("etcd at %s unreachable after %v: %w", where, timeout, err)
		}
		logger.Warn("etcd unreachable, retrying", "endpoints", endpoints, "attempt", attempt, "err", err)
		if backoff.Sleep(ctx, min(backoff.Delay(attempt+3), time.Until(deadline))) != nil {
			continue // reported on the next pass
		}
	}
}

// authError reports whether err is etcd refusing a client's credentials
// (or their absence): retrying cannot help.
func authError(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied,
		rpctypes.ErrInvalidAuthToken, rpctypes.ErrUserNotFound} {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}

// probeTCP dials each endpoint and returns the first error, or nil if one
// answers.
func probeTCP(endpoints []string) error {
	var first error
	for _, ep := range endpoints {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}
