package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/internal/s3test"
)

// minkKafkaNode is a single mink server process with its Kafka listener
// for the Kafka benchmark: `mink server` with the embedded etcd and the
// defaults, every listener on a free loopback port, and its objects in a
// local directory or, with S3, on a versitygw of its own.
type minkKafkaNode struct {
	*procNode
	name  string
	kafka string
	s3    *s3test.Server
}

// startMinkKafkaNode starts the node in a new directory under dir and
// waits until it is healthy and its Kafka listener answers ApiVersions.
func startMinkKafkaNode(ctx context.Context, bin, dir string, onS3 bool) (_ *minkKafkaNode, err error) {
	store := "local"
	if onS3 {
		store = "s3"
	}
	base, err := os.MkdirTemp(dir, "mink-"+store+"-")
	if err != nil {
		return nil, err
	}
	n := &minkKafkaNode{procNode: &procNode{id: 1, logPath: filepath.Join(base, "node.log")}, name: "mink (local dir)"}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	etcdAddr, err := embedetcd.FreeAddrPair()
	if err != nil {
		return nil, err
	}
	for _, p := range []*string{&n.pg, &n.flight, &n.admin, &n.kafka} {
		if *p, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	n.args = []string{"server", "--node-id", "1", "--data-dir", filepath.Join(base, "data"),
		"--embedded-etcd-addr", etcdAddr, "--pg-addr", n.pg, "--flight-addr", n.flight, "--admin-addr", n.admin,
		"--kafka-addr", n.kafka, "--log-format", "json"}
	env := os.Environ()
	if onS3 {
		startCtx, cancel := context.WithTimeout(ctx, time.Minute)
		n.s3, err = s3test.StartProcess(startCtx, base)
		cancel()
		if err != nil {
			return nil, err
		}
		n.name = "mink (versitygw S3)"
		n.args = append(n.args, "--object-store", n.s3.URL("mink"), "--s3-endpoint", n.s3.Endpoint, "--s3-region", n.s3.Region)
		env = append(env, "AWS_ACCESS_KEY_ID="+n.s3.AccessKey, "AWS_SECRET_ACCESS_KEY="+n.s3.SecretKey)
	}
	logFile, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(bin, n.args...)
	n.cmd.Env = env
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() { n.cmd.Wait(); logFile.Close(); close(n.exited) }()
	if err := n.waitHealthy(ctx); err != nil {
		return nil, err
	}
	if err := n.waitKafka(ctx); err != nil {
		return nil, fmt.Errorf("%w; node log in %s", err, n.logPath)
	}
	return n, nil
}

// waitKafka waits up to 30 s for the Kafka listener to answer ApiVersions.
func (n *minkKafkaNode) waitKafka(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafka))
	if err != nil {
		return err
	}
	defer closeKafkaClient(cl)
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = kmsg.NewPtrApiVersionsRequest().RequestWith(reqCtx, cl)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("node exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("no Kafka listener on --kafka-addr %s after 30 s: ApiVersions: %v", n.kafka, last)
}

// createTopic makes the topic with CreateTopics; if the listener refuses,
// it creates the Kafka-shaped log table over SQL instead and says so (the
// refusal is then in the report).
func (n *minkKafkaNode) createTopic(ctx context.Context, topic string, partitions int) (string, error) {
	createErr := createKafkaTopic(ctx, n.kafka, topic, partitions, nil)
	if createErr == nil {
		return "", nil
	}
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", n.pg))
	if err != nil {
		return "", fmt.Errorf("%v; and over SQL: %w", createErr, err)
	}
	defer conn.Close(ctx)
	ddl := fmt.Sprintf("CREATE TABLE %s (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = %d)",
		pgx.Identifier{topic}.Sanitize(), partitions)
	if _, err := conn.Exec(ctx, ddl); err != nil {
		return "", fmt.Errorf("%v; and over SQL: %w", createErr, err)
	}
	return fmt.Sprintf("CreateTopics failed (%v); the table was created over SQL", createErr), nil
}

// stop interrupts the node (a clean shutdown), kills it after 15 s, and
// stops its versitygw.
func (n *minkKafkaNode) stop() {
	if n.cmd != nil && n.running() {
		n.cmd.Process.Signal(os.Interrupt)
		select {
		case <-n.exited:
		case <-time.After(15 * time.Second):
			n.kill()
		}
	}
	if n.s3 != nil {
		n.s3.Stop()
	}
}
