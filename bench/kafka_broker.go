package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaVersion is the Apache Kafka release the Kafka benchmark runs as its
// peer; scripts/install-kafka.sh assembles it from Maven Central.
const KafkaVersion = "4.1.1"

// ErrNoKafka is returned by StartKafka when the broker's jars are not
// installed.
var ErrNoKafka = errors.New("the Apache Kafka " + KafkaVersion + " broker is not installed: run scripts/install-kafka.sh")

// KafkaHome is where scripts/install-kafka.sh puts the broker: $KAFKA_HOME
// if set, else ~/.cache/mink/kafka-<KafkaVersion>. Its libs/ holds the jars.
func KafkaHome() string {
	if h := os.Getenv("KAFKA_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "mink", "kafka-"+KafkaVersion)
}

// KafkaInstalled reports whether StartKafka can run: the broker's jars and
// a java on PATH. The error says what is missing.
func KafkaInstalled() error {
	home := KafkaHome()
	if _, err := os.Stat(filepath.Join(home, "libs", "kafka_2.13-"+KafkaVersion+".jar")); err != nil {
		return fmt.Errorf("%w (looked in %s)", ErrNoKafka, home)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("%w: no java on PATH", ErrNoKafka)
	}
	return nil
}

// InstallKafka runs scripts/install-kafka.sh when the broker is not
// installed (a no-op otherwise) and returns its output. The script is
// found beside this source file, else under the working directory.
func InstallKafka(ctx context.Context) ([]byte, error) {
	if KafkaInstalled() == nil {
		return nil, nil
	}
	script := filepath.Join("scripts", "install-kafka.sh")
	if _, file, _, ok := runtime.Caller(0); ok {
		if p := filepath.Join(filepath.Dir(file), "..", "scripts", "install-kafka.sh"); fileExists(p) {
			script = p
		}
	}
	out, err := exec.CommandContext(ctx, "bash", script).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %w", script, err)
	}
	return out, KafkaInstalled()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Kafka is an Apache Kafka broker started for a benchmark run: one JVM in
// KRaft combined mode (broker and controller, node 1), storage formatted
// in a fresh directory, a PLAINTEXT listener on a free loopback port, the
// broker's default settings otherwise (so its log is flushed by the page
// cache; a topic created with flush.messages=1 is fsync'd on every
// append). Stop ends the JVM and removes the directory.
type Kafka struct {
	// Addr is the PLAINTEXT listener, "127.0.0.1:PORT".
	Addr    string
	Version string

	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// kafkaJVMOptions are what kafka-server-start.sh gives the broker by
// default (KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS).
var kafkaJVMOptions = []string{"-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

// StartKafka formats a KRaft log directory under a new directory in dir
// (default: the temp dir), starts the broker and waits until it answers a
// Metadata request. It returns an error wrapping ErrNoKafka when the
// broker is not installed.
func StartKafka(ctx context.Context, dir string) (*Kafka, error) {
	if err := KafkaInstalled(); err != nil {
		return nil, err
	}
	home := KafkaHome()
	base, err := os.MkdirTemp(dir, "mink-bench-kafka-")
	if err != nil {
		return nil, err
	}
	k := &Kafka{Version: KafkaVersion, dir: base, exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			k.shutdown()
			os.RemoveAll(base)
		}
	}()
	broker, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	controller, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	k.Addr = fmt.Sprintf("127.0.0.1:%d", broker)
	props := strings.Join([]string{
		"process.roles=broker,controller",
		"node.id=1",
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controller),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", broker, controller),
		"advertised.listeners=PLAINTEXT://" + k.Addr,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + filepath.Join(base, "logs"),
		// One broker: the internal topics cannot have three replicas.
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
		"",
	}, "\n")
	propsPath := filepath.Join(base, "server.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		return nil, err
	}
	java := func(args ...string) *exec.Cmd {
		all := append([]string{}, kafkaJVMOptions...)
		all = append(all, "-Dlog4j2.configurationFile="+filepath.Join(home, "log4j2.xml"),
			"-cp", filepath.Join(home, "libs", "*"))
		cmd := exec.Command("java", append(all, args...)...)
		cmd.Dir = base
		return cmd
	}
	// A fixed cluster id: the directory is new every run.
	format := java("kafka.tools.StorageTool", "format", "--config", propsPath, "--cluster-id", "mink-bench-kafka-0001")
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kafka storage format: %w\n%s", err, out)
	}
	logPath := filepath.Join(base, "broker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	k.cmd = java("kafka.Kafka", propsPath)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kafka: %w", err)
	}
	go func() {
		k.waitErr = k.cmd.Wait()
		close(k.exited)
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	deadline := time.Now().Add(90 * time.Second)
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(reqCtx, cl)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-k.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("kafka exited at start (%v):\n%s", k.waitErr, tail(string(log), 4000))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kafka did not answer Metadata within 90 s: %w", err)
		}
	}
	ok = true
	return k, nil
}

// Stop shuts the broker down (SIGTERM: a controlled shutdown) and removes
// its directory.
func (k *Kafka) Stop() error {
	err := k.shutdown()
	if rmErr := os.RemoveAll(k.dir); err == nil {
		err = rmErr
	}
	return err
}

func (k *Kafka) shutdown() error {
	if k.cmd == nil || k.cmd.Process == nil {
		return nil
	}
	select {
	case <-k.exited:
		return nil
	default:
	}
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
		return nil
	case <-time.After(30 * time.Second):
	}
	syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.exited
	return fmt.Errorf("kafka did not shut down within 30 s; killed")
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
