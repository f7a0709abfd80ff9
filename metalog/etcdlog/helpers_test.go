package etcdlog

import (
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Helpers of the driver's tests in package metalog, for the same tests run
// against an etcd log here.

func testOptions(every uint64) metalog.Options {
	return metalog.Options{SnapshotEvery: every, Logger: quietLogger(), TestingKnobs: metalog.TestingKnobs{SnapshotJitter: -1}}
}

func openCatalog(t *testing.T, l metalog.Log, opts metalog.Options) *metalog.Catalog {
	t.Helper()
	c, err := metalog.Open(testContext(t, 30*time.Second), l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testTable(name string) catalog.CreateTable {
	return catalog.CreateTable{Spec: catalog.TableSpec{
		Name:    name,
		Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}},
		Buckets: 2,
	}}
}

func encodeView(t testing.TB, v *catalog.View) []byte {
	t.Helper()
	b, err := catalog.EncodeView(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countApplies records how often each entry (by index and by bytes) is
// applied by a catalog.
type applyLog struct {
	mu      sync.Mutex
	indexes []uint64
	entries map[string]int
}

func (a *applyLog) hook(index uint64, entry []byte, out catalog.Outcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.indexes = append(a.indexes, index)
	if a.entries == nil {
		a.entries = map[string]int{}
	}
	a.entries[string(entry)]++
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkLeader(t *testing.T, e metalog.Election, want catalog.NodeID) {
	t.Helper()
	got, ok, err := e.Leader(testContext(t, 10*time.Second))
	if err != nil || !ok || got != want {
		t.Fatalf("Leader = %d, %v, %v; want %d", got, ok, err, want)
	}
}

func registerNode(t *testing.T, c *metalog.Catalog, node catalog.NodeID) uint64 {
	t.Helper()
	out, err := c.Propose(testContext(t, 10*time.Second), catalog.RegisterNode{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return out.Epoch
}

func coordinatorOf(c *metalog.Catalog) (co catalog.Coordinator) {
	c.Read(func(v *catalog.View) { co = v.Coordinator })
	return co
}
