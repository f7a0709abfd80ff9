package metalog

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyEtcdlogLinksEtcd: everything that imports etcd is in
// metalog/etcdlog. The driver itself, the state machine and the packages
// that use a View or a Catalog through an interface (kv, buckets/s3stream,
// tiering) do not link etcd; only the packages that wire a node up (server,
// cmd/mink) do, through etcdlog.
func TestOnlyEtcdlogLinksEtcd(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to list the dependencies with")
	}
	for _, pkg := range []string{"metalog", "catalog", "kv", "buckets/s3stream", "tiering"} {
		out, err := exec.Command(goTool, "list", "-deps", "github.com/minkdb/mink/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.etcd.io/") || dep == "github.com/minkdb/mink/metalog/etcdlog" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
