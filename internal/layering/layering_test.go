package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/minkdb/mink/"

// layers lists every package of the module, lowest first. A package may
// import only packages of lower layers. Tests may import anything (a test
// of a low package may start a whole node), so only non-test imports count.
var layers = [][]string{
	// Leaves: encodings, types, wire helpers, the object store, test
	// servers.
	{"auth", "internal/sqltypes", "internal/flightwire", "internal/ipcbatch", "internal/testpki", "internal/s3test", "internal/embedetcd",
		"objstore", "buckets/routing", "metalog/internal/backoff"},
	// The pure metadata state machine, codecs and protocol layers that
	// depend only on leaves.
	{"catalog", "kv/kvcodec", "internal/sweep", "objstore/objstoretest", "sqlfront/pgwire", "sqlfront/engine",
		"sqlfront/pgtree", "sqlfront/temptable"},
	// What reads a catalog.View or writes objects: decisions, the metadata
	// log's driver, identities, KV tablets, streams; the public client.
	{"catalog/catalogtest", "plan", "metalog", "access", "kv", "buckets/s3stream", "client",
		"sqlfront/engine/internal/enginebench"},
	// The etcd backend; a node's buckets; the lake; the emulated catalogs.
	{"metalog/etcdlog", "metalog/metalogtest", "buckets", "tiering", "sqlfront/pgcatalog"},
	// PostgreSQL's SQL in the engine's terms.
	{"sqlfront/translate"},
	// The front ends over buckets and the lake.
	{"sqlfront", "server/flightsvc", "server/kafka/groups", "server/icebergrest"},
	{"server/kafka", "server/flightsql"},
	// A node: wiring, listeners, the coordinator.
	{"server"},
	// The binary, test harnesses and benchmarks over whole nodes.
	{"cmd/mink", "internal/minktest"},
	{"bench"},
	{"bench/cmd/minkbench", "bench/cmd/rustbench"},
}

// TestLayering: every package is in a layer, and imports only lower ones.
func TestLayering(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go tool to list the packages with:", err)
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	layer := map[string]int{}
	for i, pkgs := range layers {
		for _, p := range pkgs {
			if _, dup := layer[p]; dup {
				t.Errorf("%s is in two layers", p)
			}
			layer[p] = i
		}
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if pkg == "internal/layering" {
			continue
		}
		listed[pkg] = true
		own, ok := layer[pkg]
		if !ok {
			t.Errorf("%s is in no layer: add it to layers in %s", pkg, "internal/layering/layering_test.go")
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if l, known := layer[dep]; known && l >= own {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package may import only lower layers", pkg, own, dep, l)
			}
		}
	}
	for p := range layer {
		if !listed[p] {
			t.Errorf("layers names %s, which is no package of the module", p)
		}
	}
	if len(listed) < 30 || !slices.Contains(layers[len(layers)-1], "bench/cmd/minkbench") {
		t.Fatalf("go list found %d packages; the test reads nothing", len(listed))
	}
}

// cgoOwners names, for each cgo dependency, the one package that may
// import it: the rest reach the dependency through that package, so its
// build cost and its upgrades stay in one place. Tests count too.
var cgoOwners = map[string]string{
	"github.com/duckdb/duckdb-go-bindings": "sqlfront/engine",
	"github.com/pganalyze/pg_query_go/v6":  "sqlfront/pgtree",
}

// TestCgoOwners: each cgo dependency is imported by its owner alone.
func TestCgoOwners(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go tool to list the packages with:", err)
	}
	out, err := exec.Command(goTool, "list", "-f",
		"{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			for dep, owner := range cgoOwners {
				if imp != dep && !strings.HasPrefix(imp, dep+"/") {
					continue
				}
				if pkg != owner {
					t.Errorf("%s imports %s, which only %s may import", pkg, imp, owner)
				}
				seen[dep] = true
			}
		}
	}
	for dep, owner := range cgoOwners {
		if !seen[dep] {
			t.Errorf("no package imports %s: is %s still its owner?", dep, owner)
		}
	}
}
