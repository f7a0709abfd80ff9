package buckets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// A node restarts after a crash and one WAL object of its previous epoch is
// corrupt. The bucket whose acknowledged write it held stays unavailable,
// at once and naming the object (not retryable: no 30 s wait); a bucket
// whose writes continue after it opens with every row; once the object is
// restored the first bucket opens too, with every row.
func TestManagerCorruptWALObject(t *testing.T) {
	defer func(d time.Duration) { unrecoverableRetry = d }(unrecoverableRetry)
	unrecoverableRetry = 50 * time.Millisecond
	mem := objstore.NewMem()
	// No flush during the test: the rows stay in the WAL only.
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: mem, flushInterval: time.Hour}
	self := func(catalog.NodeID) bool { return true }
	m, cat := env.startNode(1, self)
	ctx := context.Background()
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 2}})
	if err != nil {
		t.Fatal(err)
	}
	damaged, intact := out.Buckets[0], out.Buckets[1]
	for _, id := range out.Buckets {
		if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// One WAL object per append, in this order: seq 0 holds damaged's row,
	// seq 1 intact's.
	for i, id := range []catalog.BucketID{damaged, intact} {
		b := waitBucket(t, m, id)
		rec := rowsRecord(int64(i))
		if _, err := b.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	m.Close() // crash

	key := fmt.Sprintf("wal/1/%020d/%020d", 1, 0)
	orig, err := mem.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(orig)
	bad[len(bad)/2] ^= 0x40
	mem.Delete(ctx, key)
	mem.PutIfAbsent(ctx, key, bad)

	m2, _ := env.startNode(1, self)
	if got := readIDs(t, waitBucket(t, m2, intact)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("the intact bucket after restart: %v, want [1]", got)
	}
	var berr error
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, berr = m2.Bucket(damaged)
		if errors.Is(berr, s3stream.ErrCorrupt) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(berr, s3stream.ErrCorrupt) || !errors.Is(berr, ErrUnavailable) || Retryable(berr) || !strings.Contains(berr.Error(), key) {
		t.Fatalf("the bucket with a corrupt WAL object: %v, want ErrCorrupt and ErrUnavailable, not retryable, naming %s", berr, key)
	}
	b, err := m2.Bucket(intact)
	if err != nil {
		t.Fatal(err)
	}
	rec := rowsRecord(7)
	_, err = b.Append(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatalf("append to the intact bucket: %v", err)
	}

	mem.Delete(ctx, key)
	mem.PutIfAbsent(ctx, key, orig)
	if got := readIDs(t, waitBucket(t, m2, damaged)); !slices.Equal(got, []int64{0}) {
		t.Fatalf("the damaged bucket once its WAL object was restored: %v, want [0]", got)
	}
}

func TestSplitWALCorrupt(t *testing.T) {
	wc := &s3stream.WALCorruptError{Node: 1, Epoch: 2, Streams: map[catalog.StreamID]error{3: s3stream.ErrCorrupt}}
	outage := errors.New("store unreachable")
	for _, c := range []struct {
		name     string
		err      error
		lost     int
		wantRest error
	}{
		{"nil", nil, 0, nil},
		{"corrupt", wc, 1, nil},
		{"wrapped corrupt", fmt.Errorf("epoch 2: %w", wc), 1, nil},
		{"outage", outage, 0, outage},
		{"both", errors.Join(wc, outage), 1, outage},
	} {
		var lost []*s3stream.WALCorruptError
		rest := splitWALCorrupt(c.err, &lost)
		if len(lost) != c.lost || !errors.Is(rest, c.wantRest) || (c.wantRest == nil) != (rest == nil) || errors.Is(rest, s3stream.ErrCorrupt) {
			t.Errorf("%s: lost %d, rest %v; want lost %d, rest %v", c.name, len(lost), rest, c.lost, c.wantRest)
		}
	}
}
