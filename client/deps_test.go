package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoStorageEngineDependency: a client program does not link the storage
// engine or the metadata store; the client encodes keys with kv/kvcodec.
func TestNoStorageEngineDependency(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/minkdb/mink/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/cockroachdb/pebble", "go.etcd.io/etcd/server", "github.com/minkdb/mink/kv\x00"} {
			if strings.HasPrefix(dep+"\x00", banned) {
				t.Errorf("the client depends on %s", dep)
			}
		}
	}
}
