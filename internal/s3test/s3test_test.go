package s3test_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minkdb/mink/internal/s3test"
)

func TestStartStop(t *testing.T) {
	srv := s3test.Start(t)
	if srv.Version != s3test.Version {
		t.Errorf("running versitygw %q, want %s (run scripts/install-versitygw.sh)", srv.Version, s3test.Version)
	}
	if info, err := os.Stat(filepath.Join(srv.Dir, srv.Bucket)); err != nil || !info.IsDir() {
		t.Fatalf("bucket directory: %v", err)
	}
	resp, err := http.Get(srv.Endpoint + "/")
	if err != nil {
		t.Fatalf("server not answering: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned request: got %s, want 403", resp.Status)
	}
	srv.Stop()
	srv.Stop() // idempotent
	client := &http.Client{Timeout: time.Second}
	if resp, err := client.Get(srv.Endpoint + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("server still answering after Stop: %s", resp.Status)
	}
}

// TestTwoServers checks that servers started side by side get their own
// ports, directories and credentials.
func TestTwoServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if os.Getenv(s3test.SkipEnv) == "1" {
		t.Skipf("%s=1", s3test.SkipEnv)
	}
	a, err := s3test.StartProcess(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	b, err := s3test.StartProcess(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if a.Endpoint == b.Endpoint || a.Dir == b.Dir || a.SecretKey == b.SecretKey {
		t.Fatalf("servers share state: %+v and %+v", a, b)
	}
}
