package main

// End-to-end tests of the Kafka listener with two more real clients, run as
// processes: confluent-kafka (Python, with the librdkafka its wheel bundles)
// and kafkajs (Node.js, its own implementation of the protocol). Each runs
// test/clients/kafka_<client>.* against a real node: it creates a topic
// through its admin client, produces, consumes in a consumer group and
// commits, produces more, and consumes again in the same group. The
// programs print what they were acknowledged and what they read, one JSON
// object per line; this file checks it. scripts/install-test-deps.sh
// installs both clients under ~/.cache/mink.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The shape of every run: a topic of kafkaClientPartitions partitions, N
// records, a commit, then M more.
const (
	kafkaClientPartitions = 3
	kafkaClientN          = 40
	kafkaClientM          = 7
	kafkaClientBaseTS     = 1700000000000 // record i's timestamp is this + i ms
)

// kafkaClientCache is where install-test-deps.sh installs the clients:
// ${XDG_CACHE_HOME:-$HOME/.cache}/mink.
func kafkaClientCache(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "mink")
}

// confluent-kafka produces with an idempotent zstd producer, consumes in a
// group, and a second consumer of the group resumes after the commit.
func TestKafkaConfluent(t *testing.T) {
	python := filepath.Join(kafkaClientCache(t), "venv", "bin", "python")
	if out, err := exec.Command(python, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Fatalf("confluent-kafka is not installed in %s (%v: %s): %s", python, err, out, installHint)
	}
	testKafkaClient(t, "confluent_events", nil, func(addr, topic, group string, args ...string) *exec.Cmd {
		return exec.Command(python, append([]string{"../../test/clients/kafka_confluent.py", addr, topic, group}, args...)...)
	})
}

// kafkajs produces with an idempotent gzip producer to the partitions it
// names, consumes in a group, and a second consumer of the group resumes
// after the commit.
func TestKafkaJS(t *testing.T) {
	node := requireCommand(t, "node")
	modules := filepath.Join(kafkaClientCache(t), "node", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed in %s (%v): %s", modules, err, installHint)
	}
	partitionOf := func(i int) int32 { return int32(i % kafkaClientPartitions) }
	testKafkaClient(t, "kafkajs_events", partitionOf, func(addr, topic, group string, args ...string) *exec.Cmd {
		cmd := exec.Command(node, append([]string{"../../test/clients/kafka_kafkajs.js", addr, topic, group}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		return cmd
	})
}

// clientLine is one line a client program prints.
type clientLine struct {
	Phase      string      `json:"phase"`
	Partitions int         `json:"partitions"` // created
	Partition  int32       `json:"partition"`
	Offset     int64       `json:"offset"`
	Key        *string     `json:"key"`   // hex; nil for a null key
	Value      *string     `json:"value"` // hex; nil for a null value
	Headers    [][]*string `json:"headers"`
	Timestamp  int64       `json:"timestamp"`
	Low, High  int64       // watermarks
}

// clientRecord is record i as the client programs produce it (their doc
// comments): the key, value, headers and timestamp, bytes in hex.
func clientRecord(i int) clientLine {
	hexOf := func(s string) *string { h := hex.EncodeToString([]byte(s)); return &h }
	r := clientLine{
		Key:       hexOf(fmt.Sprintf("key-%d", i)),
		Value:     hexOf(strings.Repeat(fmt.Sprintf("value-%d;", i), 20)),
		Headers:   [][]*string{{kafkaStrPtr("seq"), hexOf(strconv.Itoa(i))}, {kafkaStrPtr("bin"), hexOf(string([]byte{0, 0xff, byte(i)}))}},
		Timestamp: kafkaClientBaseTS + int64(i),
	}
	if i == 1 {
		r.Key = nil
	}
	if i == 2 {
		r.Value = nil
	}
	return r
}

func kafkaStrPtr(s string) *string { return &s }

func showHex(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// seq is the record number of a line, from its seq header.
func (l clientLine) seq() (int, error) {
	if len(l.Headers) == 0 || len(l.Headers[0]) != 2 || l.Headers[0][0] == nil || *l.Headers[0][0] != "seq" || l.Headers[0][1] == nil {
		return 0, fmt.Errorf("no seq header first: %s", l.describe())
	}
	b, err := hex.DecodeString(*l.Headers[0][1])
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

func (l clientLine) describe() string {
	var hs []string
	for _, h := range l.Headers {
		var kv []string
		for _, p := range h {
			kv = append(kv, showHex(p))
		}
		hs = append(hs, strings.Join(kv, "="))
	}
	return fmt.Sprintf("partition %d offset %d key %s value %s headers [%s] timestamp %d",
		l.Partition, l.Offset, showHex(l.Key), showHex(l.Value), strings.Join(hs, " "), l.Timestamp)
}

// sameRecord reports how l differs from record i as it was produced.
func (l clientLine) sameRecord(i int) error {
	want := clientRecord(i)
	want.Partition, want.Offset = l.Partition, l.Offset
	if got, want := l.describe(), want.describe(); got != want {
		return fmt.Errorf("record %d: got %s, want %s", i, got, want)
	}
	return nil
}

// testKafkaClient runs a client program (command gets the Kafka address,
// topic, group and then partitions, N, M) against a new node and checks
// what it printed and what SQL sees. partitionOf, if not nil, is the
// partition the client sends record i to.
func testKafkaClient(t *testing.T, topic string, partitionOf func(int) int32, command func(addr, topic, group string, args ...string) *exec.Cmd) {
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	group := topic + "_group"

	cmd := command(n.kafkaAddr(), topic, group, fmt.Sprint(kafkaClientPartitions), fmt.Sprint(kafkaClientN), fmt.Sprint(kafkaClientM))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The programs give each phase 20 s; this only stops one that hangs
	// regardless.
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	t.Logf("%s ran for %v", filepath.Base(cmd.Args[1]), time.Since(start).Round(time.Millisecond))
	if stderr.Len() > 0 {
		t.Logf("its stderr:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	phases := map[string][]clientLine{}
	for _, raw := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var l clientLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("line %q of the client's output: %v", raw, err)
		}
		phases[l.Phase] = append(phases[l.Phase], l)
	}
	if len(phases["done"]) != 1 {
		t.Fatalf("the client did not finish:\n%s", stdout.String())
	}
	if c := phases["created"]; len(c) != 1 || c[0].Partitions != kafkaClientPartitions {
		t.Fatalf("the client's admin created %+v, want one topic of %d partitions", c, kafkaClientPartitions)
	}

	// Every record is acknowledged once, unchanged, at offsets dense from
	// 0 in each partition; the second batch continues them.
	acked := map[int]clientLine{} // by record number
	perPart := map[int32]int64{}  // records acknowledged per partition
	checkProduced := func(phase string, from, to int) {
		t.Helper()
		lines := phases[phase]
		if len(lines) != to-from {
			t.Fatalf("%s: %d delivery reports, want %d", phase, len(lines), to-from)
		}
		offs := map[int32][]int64{}
		for _, l := range lines {
			i, err := l.seq()
			if err != nil {
				t.Fatalf("%s: %v", phase, err)
			}
			if _, dup := acked[i]; dup || i < from || i >= to {
				t.Fatalf("%s: a report of record %d (%s); want each of %d..%d once", phase, i, l.describe(), from, to-1)
			}
			if err := l.sameRecord(i); err != nil {
				t.Fatalf("%s: %v", phase, err)
			}
			if partitionOf != nil && l.Partition != partitionOf(i) {
				t.Fatalf("%s: record %d acknowledged on partition %d, sent to %d", phase, i, l.Partition, partitionOf(i))
			}
			acked[i] = l
			offs[l.Partition] = append(offs[l.Partition], l.Offset)
		}
		for p, list := range offs {
			sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
			for k, o := range list {
				if o != perPart[p]+int64(k) {
					t.Fatalf("%s: partition %d: acknowledged offsets %v, want dense from %d", phase, p, list, perPart[p])
				}
			}
			perPart[p] += int64(len(list))
		}
	}
	// Every record is consumed exactly once, where it was acknowledged,
	// unchanged; the group's second consumer reads only what is new.
	checkConsumed := func(phase string, from, to int) {
		t.Helper()
		lines := phases[phase]
		seen := map[int]bool{}
		for _, l := range lines {
			i, err := l.seq()
			if err != nil {
				t.Fatalf("%s: %v", phase, err)
			}
			if seen[i] || i < from || i >= to {
				t.Fatalf("%s: consumed record %d (%s); want each of %d..%d once:\n%s", phase, i, l.describe(), from, to-1, stdout.String())
			}
			seen[i] = true
			if err := l.sameRecord(i); err != nil {
				t.Fatalf("%s: %v", phase, err)
			}
			if a := acked[i]; l.Partition != a.Partition || l.Offset != a.Offset {
				t.Fatalf("%s: record %d consumed at %d/%d, acknowledged at %d/%d", phase, i, l.Partition, l.Offset, a.Partition, a.Offset)
			}
		}
		if len(seen) != to-from {
			t.Fatalf("%s: consumed %d records, want %d", phase, len(seen), to-from)
		}
	}
	checkProduced("produce1", 0, kafkaClientN)
	checkConsumed("consume1", 0, kafkaClientN)
	checkProduced("produce2", kafkaClientN, kafkaClientN+kafkaClientM)
	checkConsumed("consume2", kafkaClientN, kafkaClientN+kafkaClientM)

	// The group's committed offsets are the ends of the partitions.
	committed := map[int32]int64{}
	for _, l := range phases["committed"] {
		committed[l.Partition] = l.Offset
	}
	for p := int32(0); p < kafkaClientPartitions; p++ {
		if want, ok := perPart[p]; ok && committed[p] != want {
			t.Fatalf("group %s: committed offsets %v, want %v (the end of each partition)", group, committed, perPart)
		}
	}

	// The partitions' watermarks: from 0 to the end.
	watermarks := map[int32][2]int64{}
	for _, l := range phases["watermarks"] {
		watermarks[l.Partition] = [2]int64{l.Low, l.High}
	}
	for p := int32(0); p < kafkaClientPartitions; p++ {
		if w := watermarks[p]; len(watermarks) != kafkaClientPartitions || w != [2]int64{0, perPart[p]} {
			t.Fatalf("watermarks %v, want [0 end] for each partition, ends %v", watermarks, perPart)
		}
	}

	// The records are rows of the log table.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, nullKeys, nullValues int
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE key IS NULL), count(*) FILTER (WHERE value IS NULL) FROM %s", topic)).
		Scan(&rows, &nullKeys, &nullValues); err != nil {
		t.Fatal(err)
	}
	if rows != kafkaClientN+kafkaClientM || nullKeys != 1 || nullValues != 1 {
		t.Fatalf("SELECT count(*) FROM %s: %d rows, %d null keys, %d null values; want %d, 1, 1", topic, rows, nullKeys, nullValues, kafkaClientN+kafkaClientM)
	}
	var value []byte
	var headers string
	var ts time.Time
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT value, headers::text, ts FROM %s WHERE key = 'key-5'::bytea", topic)).Scan(&value, &headers, &ts); err != nil {
		t.Fatal(err)
	}
	if string(value) != strings.Repeat("value-5;", 20) || headers != `[{"key": "seq", "value": "5"}, {"key": "bin", "value_base64": "AP8F"}]` ||
		!ts.Equal(time.UnixMilli(kafkaClientBaseTS+5)) {
		t.Fatalf("the row of record 5: value %q, headers %s, ts %v", value, headers, ts)
	}
	n.stop()
}
