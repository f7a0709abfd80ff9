package metalogtest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Helpers of the tests of metalog.Catalog and of the Election and Liveness
// implementations, shared by metalog's tests (against the in-memory ones)
// and metalog/etcdlog's (against etcd).

// Context is a context that ends after d or with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Logger drops everything unless MINK_TEST_LOG is set; then it writes
// everything from debug up to stderr.
func Logger() *slog.Logger {
	if os.Getenv("MINK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Options are a test catalog's options: a snapshot every `every` entries
// (0: none), at once rather than after a random delay, logged by Logger.
func Options(every uint64) metalog.Options {
	return metalog.Options{SnapshotEvery: every, Logger: Logger(), TestingKnobs: metalog.TestingKnobs{SnapshotJitter: -1}}
}

// OpenCatalog opens a catalog on l, closed at the end of t.
func OpenCatalog(t *testing.T, l metalog.Log, opts metalog.Options) *metalog.Catalog {
	t.Helper()
	c, err := metalog.Open(Context(t, 30*time.Second), l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// CreateTable is the record that creates a two-bucket table name (id bigint
// not null, v text).
func CreateTable(name string) catalog.CreateTable {
	return catalog.CreateTable{Spec: catalog.TableSpec{
		Name:    name,
		Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}},
		Buckets: 2,
	}}
}

// EncodeView encodes v, to compare views byte for byte.
func EncodeView(t testing.TB, v *catalog.View) []byte {
	t.Helper()
	b, err := catalog.EncodeView(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ApplyLog records the indexes a catalog applies; install Hook as
// metalog.TestingKnobs.OnApply.
type ApplyLog struct {
	mu      sync.Mutex
	indexes []uint64 // guarded by mu
}

// Hook records an applied entry.
func (a *ApplyLog) Hook(index uint64, entry []byte, out catalog.Outcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.indexes = append(a.indexes, index)
}

// Indexes returns the indexes applied so far, in order of application.
func (a *ApplyLog) Indexes() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.indexes)
}

// WaitFor polls cond every 10ms and fails t if it does not hold within 20s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CheckLeader fails t unless e reports want as the leader.
func CheckLeader(t *testing.T, e metalog.Election, want catalog.NodeID) {
	t.Helper()
	got, ok, err := e.Leader(Context(t, 10*time.Second))
	if err != nil || !ok || got != want {
		t.Fatalf("Leader = %d, %v, %v; want %d", got, ok, err, want)
	}
}

// RegisterNode registers node through c and returns its epoch.
func RegisterNode(t *testing.T, c *metalog.Catalog, node catalog.NodeID) uint64 {
	t.Helper()
	out, err := c.Propose(Context(t, 10*time.Second), catalog.RegisterNode{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return out.Epoch
}

// Coordinator is the coordinator in c's view.
func Coordinator(c *metalog.Catalog) (co catalog.Coordinator) {
	c.Read(func(v *catalog.View) { co = v.Coordinator })
	return co
}
