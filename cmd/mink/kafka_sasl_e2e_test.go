package main

// End-to-end tests of SASL and privileges on the Kafka listener
// (docs/kafka.md, "Security"): a node with --superuser-password-file,
// franz-go with SASL/PLAIN and SASL/SCRAM-SHA-256, roles made in SQL, and
// kcat (librdkafka) over SASL_PLAINTEXT and SASL_SSL.

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func scramSHA256(user, password string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())
}

func saslPlain(user, password string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism())
}

// metadataErr sends one Metadata request naming topic and returns the
// client's error or the topic's.
func metadataErr(cl *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
}

// produceOne produces value to partition 0 of topic and returns the error.
func produceOne(cl *kgo.Client, topic, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr()
}

// pollUntil polls cl until it has n records or, if fail is set, a fetch
// error matching fail; it returns the records' values and the fetch
// errors seen.
func pollUntil(t *testing.T, cl *kgo.Client, n int, fail error, timeout time.Duration) (values []string, errs []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for len(values) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return values, errs
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, err)
			}
		})
		for _, r := range fs.Records() {
			values = append(values, string(r.Value))
		}
		if fail != nil && slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, fail) }) {
			return values, errs
		}
	}
	return values, errs
}

// The superuser and a role made in SQL, over SCRAM and PLAIN: a wrong
// password is SASL_AUTHENTICATION_FAILED; a role with SELECT only
// consumes and gets TOPIC_AUTHORIZATION_FAILED when it produces; a GRANT
// and a REVOKE hold for open clients from their next request; a client
// without SASL gets nothing; kcat produces and consumes with SCRAM.
func TestKafkaSASL(t *testing.T) {
	n := startSecureNode(t, t.TempDir(), "root pw")
	addr := n.kafkaAddr()
	seeds := []string{addr}
	ctx := context.Background()
	db, err := n.login(ctx, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)

	// The superuser, over SCRAM: creates a topic and produces to it.
	super := kafkaClient(t, seeds, scramSHA256("mink", "root pw"))
	createTopic(t, super, "ks", 1)
	for _, v := range []string{"a", "b", "c"} {
		if err := produceOne(super, "ks", v); err != nil {
			t.Fatalf("mink produces: %v", err)
		}
	}
	mustExec(t, db, "CREATE ROLE alice LOGIN PASSWORD 'alice pw'")
	mustExec(t, db, "GRANT SELECT ON ks TO alice")

	t.Run("wrong password", func(t *testing.T) {
		for name, opt := range map[string]kgo.Opt{
			"SCRAM mink": scramSHA256("mink", "nope"), "PLAIN mink": saslPlain("mink", "nope"),
			"SCRAM alice": scramSHA256("alice", "root pw"), "PLAIN nobody": saslPlain("nobody", "alice pw"),
		} {
			err := metadataErr(kafkaClient(t, seeds, opt, kgo.RequestRetries(0)), "ks")
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("%s: got %v, want SASL_AUTHENTICATION_FAILED", name, err)
			}
		}
		if log := n.log(); !strings.Contains(log, "login failed") || !strings.Contains(log, "listener=kafka") || strings.Contains(log, "nope") {
			t.Errorf("the failed Kafka logins are not logged, or their passwords are:\n%s", lastLines(log, 20))
		}
	})

	t.Run("no SASL", func(t *testing.T) {
		cl := kafkaClient(t, seeds, kgo.RequestRetries(0), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ks": {0: kgo.NewOffset().AtStart()}}))
		if err := metadataErr(cl, "ks"); err == nil {
			t.Fatal("Metadata answered without SASL")
		}
		if values, _ := pollUntil(t, cl, 1, nil, 3*time.Second); len(values) > 0 {
			t.Fatalf("a client without SASL consumed %v", values)
		}
	})

	// alice, over PLAIN, with SELECT only: consumes, cannot produce.
	alice := kafkaClient(t, seeds, saslPlain("alice", "alice pw"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ks": {0: kgo.NewOffset().AtStart()}}))
	if values, errs := pollUntil(t, alice, 3, nil, 20*time.Second); !slices.Equal(values, []string{"a", "b", "c"}) {
		t.Fatalf("alice consumed %v (fetch errors %v), want a b c", values, errs)
	}
	if err := produceOne(alice, "ks", "by-alice"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice, with SELECT only, produces: %v; want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The same client produces once granted INSERT.
	mustExec(t, db, "GRANT INSERT ON ks TO alice")
	if err := produceOne(alice, "ks", "d"); err != nil {
		t.Fatalf("alice, granted INSERT, produces: %v", err)
	}
	if values, errs := pollUntil(t, alice, 1, nil, 20*time.Second); !slices.Equal(values, []string{"d"}) {
		t.Fatalf("alice consumed %v (fetch errors %v), want d", values, errs)
	}
	// And stops consuming once SELECT is revoked.
	mustExec(t, db, "REVOKE SELECT ON ks FROM alice")
	if err := produceOne(super, "ks", "e"); err != nil {
		t.Fatal(err)
	}
	if values, errs := pollUntil(t, alice, 1, kerr.TopicAuthorizationFailed, 20*time.Second); len(values) > 0 || !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, kerr.TopicAuthorizationFailed) }) {
		t.Fatalf("alice, SELECT revoked, consumed %v with fetch errors %v; want TOPIC_AUTHORIZATION_FAILED", values, errs)
	}

	// kcat (librdkafka) over SASL_PLAINTEXT, as a role with SELECT and
	// INSERT on a topic mink made.
	kcat := kcatPath(t)
	createTopic(t, super, "kcs", 1)
	mustExec(t, db, "CREATE ROLE kc LOGIN PASSWORD 'kc pw'")
	mustExec(t, db, "GRANT SELECT, INSERT ON kcs TO kc")
	kcatSASL(t, kcat, addr, "kcs", []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.username=kc", "-X", "sasl.password=kc pw"})
	// A wrong password fails kcat.
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wrong := []string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=kc", "-X", "sasl.password=nope", "-m", "5", "-L", "-t", "kcs"}
	out, err := exec.CommandContext(kctx, kcat, wrong...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SASL authentication error: Authentication failed: Invalid username or password") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
	n.stop()
}

// kcatSASL produces three records to topic (one partition, empty) and
// consumes them with kcat, given its security flags, once per mechanism.
func kcatSASL(t *testing.T, kcat, addr, topic string, security []string) {
	t.Helper()
	var want []string
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		args := append(slices.Clone(security), "-X", "sasl.mechanisms="+mech)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", addr}, append(args, "-P", "-t", topic)...)...)
		cmd.Stdin = strings.NewReader(mech + "-1\n" + mech + "-2\n" + mech + "-3\n")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kcat -P with %s: %v\n%s", mech, err, out)
		}
		want = append(want, mech+"-1", mech+"-2", mech+"-3")
		got := runKcat(t, kcat, addr, "", append(args, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")...)
		if got != strings.Join(want, "\n")+"\n" {
			t.Fatalf("kcat with %s consumed %q, want %q", mech, got, want)
		}
	}
}

// SASL_SSL: SCRAM over the TLS Kafka listener, with franz-go and kcat.
func TestKafkaSASLSSL(t *testing.T) {
	pki := newTLSPKI(t, "sasl-ca")
	certFile, keyFile := pki.issue(t, "node", 2001, []string{"localhost"}, "127.0.0.1")
	pwFile := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(pwFile, []byte("root pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, nodeOpts{extra: append(pki.flags(certFile, keyFile), "--superuser-password-file", pwFile)})
	n.start()
	n.waitHealthyTLS(pki.pool())
	addr := n.kafkaAddr()
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool()})
	super := kafkaClient(t, []string{addr}, tlsOpt, scramSHA256("mink", "root pw"))
	createTopic(t, super, "kss", 1)
	if err := produceOne(super, "kss", "over-tls"); err != nil {
		t.Fatalf("SCRAM over TLS: %v", err)
	}
	if err := metadataErr(kafkaClient(t, []string{addr}, tlsOpt, scramSHA256("mink", "nope"), kgo.RequestRetries(0)), "kss"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password over TLS: %v", err)
	}
	createTopic(t, super, "kcss", 1)
	kcatSASL(t, kcatPath(t), addr, "kcss", []string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + pki.caFile,
		"-X", "sasl.username=mink", "-X", "sasl.password=root pw"})
}

// runKcat runs kcat against addr and returns its standard output; a
// failure fails the test with its output.
func runKcat(t *testing.T, kcat, addr, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", addr}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %v: %v\n%s%s", redact(args), err, out, stderr.String())
	}
	return string(out)
}

// redact hides sasl.password values in a command line for the log.
func redact(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if strings.HasPrefix(a, "sasl.password=") {
			out[i] = "sasl.password=…"
		}
	}
	return out
}
