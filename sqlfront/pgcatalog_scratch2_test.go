package sqlfront_test

import (
	"os"
	"testing"
	"time"

	"github.com/minkdb/mink/internal/minktest"
)

func TestScratchServe(t *testing.T) {
	if os.Getenv("MINK_SCRATCH_SERVE") == "" {
		t.Skip()
	}
	n := minktest.Start(t, minktest.Options{})
	os.WriteFile("/tmp/pgcat-work/dsn", []byte(n.DSN), 0o644)
	for {
		if _, err := os.Stat("/tmp/pgcat-work/stop"); err == nil {
			os.Remove("/tmp/pgcat-work/stop")
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
