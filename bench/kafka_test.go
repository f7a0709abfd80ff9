package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// installKafka installs the broker if needed (about 10 s from Maven
// Central), so that the Kafka test never skips: without the peer it fails.
func installKafka(t *testing.T) {
	t.Helper()
	if out, err := InstallKafka(t.Context()); err != nil {
		t.Fatalf("install the Kafka peer: %v\n%s", err, out)
	}
}

// TestRunKafka runs the Kafka benchmark with a few thousand records on
// one 4-partition topic per system: Apache Kafka (page cache and
// flush.messages=1, read back) and a mink node built from this module,
// so that the peer's start-up, the topic set-up on both, the producer,
// the checking consumer and the report stay working. It measures
// nothing useful; a failure on either system fails it.
func TestRunKafka(t *testing.T) {
	installKafka(t)
	cfg := KafkaConfig{Dir: t.TempDir(), Records: 3000, Partitions: []int{4}, Runs: 1, PhaseTimeout: time.Minute,
		LatencyRecords: 500}
	rep, err := MeasureKafka(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteKafkaReport(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Skipped) > 0 {
		t.Errorf("not measured: %v", rep.Skipped)
	}
	systems := map[string]bool{}
	for _, r := range rep.Results {
		systems[r.System] = true
		if r.Err != "" || r.Produced != 3000 || r.Consumed != 3000 {
			t.Errorf("%s: produced %d, consumed %d, err %q; want 3000 and 3000", r.Name, r.Produced, r.Consumed, r.Err)
		}
		if r.P50 <= 0 || r.P99 < r.P50 || r.RateP50 <= 0 || r.RateP99 < r.RateP50 {
			t.Errorf("%s: p50 %v p99 %v, paced p50 %v p99 %v", r.Name, r.P50, r.P99, r.RateP50, r.RateP99)
		}
	}
	for _, s := range []string{KafkaSystemDefault, KafkaSystemFsync, KafkaSystemMink} {
		if !systems[s] {
			t.Errorf("no result for %s", s)
		}
	}
	if !strings.Contains(out.String(), "flush.messages=1") {
		t.Errorf("the report does not name the fsync'd peer")
	}
}
