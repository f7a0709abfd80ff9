package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunS3Stream runs the s3stream benchmark at a tiny size so that it
// stays compiled and working; it asserts the table, not the numbers.
func TestRunS3Stream(t *testing.T) {
	var buf bytes.Buffer
	cfg := S3StreamConfig{Dir: t.TempDir(), Backends: []string{BackendDir}, Streams: []int{2}, Depth: 2,
		EntryBytes: 1024, Duration: 200 * time.Millisecond}
	if err := RunS3Stream(context.Background(), &buf, cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| local-dir | 2 |") {
		t.Fatalf("table:\n%s", buf.String())
	}
}
