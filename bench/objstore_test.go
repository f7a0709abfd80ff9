package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRunObjstore runs the benchmark with tiny sizes so it stays compiled
// and working; it measures nothing useful.
func TestRunObjstore(t *testing.T) {
	cfg := ObjstoreConfig{
		Dir:         t.TempDir(),
		Sizes:       []int{1 << 10, 64 << 10},
		Concurrency: 2,
		Ops:         16,
	}
	if os.Getenv("MINK_SKIP_S3") == "1" {
		cfg.Backends = []string{BackendRaw, BackendDir}
	}
	var out bytes.Buffer
	if err := RunObjstore(t.Context(), &out, cfg); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	rows := 0
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| backend") {
			rows++
		}
	}
	backends := 3
	if len(cfg.Backends) > 0 {
		backends = len(cfg.Backends)
	}
	if want := backends * len(cfg.Sizes) * 2; rows != want {
		t.Fatalf("table has %d rows, want %d:\n%s", rows, want, out.String())
	}
	// Everything the run created is gone.
	if entries, err := os.ReadDir(cfg.Dir); err != nil || len(entries) != 0 {
		t.Fatalf("bench dir after run: %v, %v; want empty", entries, err)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if got := percentile(d, 50); got != 50 {
		t.Errorf("p50 = %d", got)
	}
	if got := percentile(d, 99); got != 99 {
		t.Errorf("p99 = %d", got)
	}
	if got := percentile(d[:1], 99); got != 1 {
		t.Errorf("p99 of one = %d", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of none = %d", got)
	}
}

// BenchmarkObjstore runs RunObjstore with its defaults and prints the
// table. Run it once, as the table is the result:
//
//	go test ./bench -run '^$' -bench BenchmarkObjstore -benchtime 1x
func BenchmarkObjstore(b *testing.B) {
	for range b.N {
		if err := RunObjstore(b.Context(), os.Stdout, ObjstoreConfig{Dir: b.TempDir()}); err != nil {
			b.Fatal(err)
		}
	}
}
