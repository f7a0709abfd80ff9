package catalog_test

import (
	"os/exec"
	"strings"
	"testing"
)

// goList runs go list with args and returns its output's fields.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to list the dependencies with")
	}
	out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestStateMachineIsPure: catalog is the pure state machine. It imports
// nothing that does I/O, waits or starts goroutines (no context, sync, os,
// net, math/rand), and links neither the metadata driver (metalog) nor etcd
// or gRPC: a package that only reads a View must not link them.
func TestStateMachineIsPure(t *testing.T) {
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, "github.com/minkdb/mink/catalog") {
		switch imp {
		case "context", "sync", "sync/atomic", "os", "net", "math/rand", "math/rand/v2", "log", "log/slog":
			t.Errorf("catalog imports %s", imp)
		}
	}
	for _, dep := range goList(t, "-deps", "github.com/minkdb/mink/catalog") {
		for _, banned := range []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/minkdb/mink/metalog"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("catalog depends on %s", dep)
			}
		}
	}
}
