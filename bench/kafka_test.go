package bench

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// installKafka runs scripts/install-kafka.sh (idempotent: a no-op when the
// broker's jars are there; about 10 s from Maven Central when not), so
// that the Kafka tests never skip: without the peer they fail.
func installKafka(t *testing.T) {
	t.Helper()
	if KafkaInstalled() == nil {
		return
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "install-kafka.sh")
	out, err := exec.CommandContext(t.Context(), "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	if err := KafkaInstalled(); err != nil {
		t.Fatalf("after %s: %v\n%s", script, err, out)
	}
}

// TestRunKafkaPeer runs the Kafka benchmark against Apache Kafka alone
// with a few thousand records, so that the peer's start-up, topic
// creation (with flush.messages=1 read back), the producer, the checking
// consumer and the report stay working. It measures nothing useful.
func TestRunKafkaPeer(t *testing.T) {
	installKafka(t)
	cfg := KafkaConfig{Dir: t.TempDir(), Records: 3000, Partitions: []int{4}, Runs: 1, SkipMink: true,
		PhaseTimeout: time.Minute}
	rep, err := MeasureKafka(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteKafkaReport(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2 (Kafka default and fsync'd)", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Err != "" || r.Produced != 3000 || r.Consumed != 3000 {
			t.Errorf("%s: produced %d, consumed %d, err %q; want 3000 and 3000", r.Name, r.Produced, r.Consumed, r.Err)
		}
		if r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("%s: p50 %v p99 %v", r.Name, r.P50, r.P99)
		}
	}
	if !strings.Contains(out.String(), "flush.messages=1") {
		t.Errorf("the report does not name the fsync'd peer")
	}
}
