package kafka

import (
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// Table options that topic configs map to (sqlfront accepts the same in
// CREATE TABLE … WITH).
const (
	optionLogRetention    = "log_retention"
	optionMaxMessageBytes = "max_message_bytes"
)

// ignoredConfigs tune Kafka's local log segments, flushing and leader
// elections, which mink does not have: a batch is durable in the object
// store when it is acknowledged, whatever they say. They are accepted and
// have no effect.
var ignoredConfigs = map[string]bool{
	"segment.bytes": true, "segment.ms": true, "segment.jitter.ms": true, "segment.index.bytes": true,
	"flush.messages": true, "flush.ms": true, "index.interval.bytes": true, "file.delete.delay.ms": true,
	"preallocate": true, "unclean.leader.election.enable": true, "delete.retention.ms": true,
	"min.compaction.lag.ms": true, "max.compaction.lag.ms": true, "min.cleanable.dirty.ratio": true,
	"message.downconversion.enable": true, "follower.replication.throttled.replicas": true,
	"leader.replication.throttled.replicas": true, "local.retention.ms": true, "local.retention.bytes": true,
	"message.timestamp.difference.max.ms": true, "message.timestamp.before.max.ms": true,
	"message.timestamp.after.max.ms": true,
}

// topicOptions maps CreateTopics configs to table options. A config mink
// cannot honour is refused (INVALID_CONFIG) rather than silently dropped.
func topicOptions(configs []kmsg.CreateTopicsRequestTopicConfig) (map[string]string, *batchError) {
	opts := map[string]string{}
	invalid := func(format string, args ...any) (map[string]string, *batchError) {
		return nil, batchErrorf(kerr.InvalidConfig, format, args...)
	}
	for _, c := range configs {
		if c.Value == nil {
			continue // the broker default
		}
		v := strings.TrimSpace(*c.Value)
		switch name := c.Name; {
		case name == "cleanup.policy":
			if v != "delete" {
				return invalid("cleanup.policy %q: mink topics are not compacted (a primary-key table keeps the latest row per key); use delete", v)
			}
		case name == "retention.ms":
			ms, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil || ms < -1 || ms == 0:
				return invalid("retention.ms %q: want -1 (keep everything) or a positive number of milliseconds", v)
			case ms > 0:
				opts[optionLogRetention] = (time.Duration(ms) * time.Millisecond).String()
			}
		case name == "retention.bytes":
			if v != "-1" {
				return invalid("retention.bytes %q: mink retains by time (retention.ms), not by size; use -1", v)
			}
		case name == "max.message.bytes":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return invalid("max.message.bytes %q: want a positive number of bytes", v)
			}
			opts[optionMaxMessageBytes] = strconv.Itoa(n)
		case name == "compression.type":
			switch v {
			case "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd":
				// Batches are stored as Arrow columns and fetched
				// uncompressed whatever this says.
			default:
				return invalid("compression.type %q: want producer, uncompressed, gzip, snappy, lz4 or zstd", v)
			}
		case name == "message.timestamp.type":
			if v != "CreateTime" {
				return invalid("message.timestamp.type %q: mink keeps the producer's timestamps (CreateTime)", v)
			}
		case name == "min.insync.replicas":
			if v != "1" {
				return invalid("min.insync.replicas %q: a mink topic has one replica, durable in the object store; use 1", v)
			}
		case ignoredConfigs[name]:
		default:
			return invalid("unknown topic config name: %s", name)
		}
	}
	return opts, nil
}

// topicConfig is one config of a topic as DescribeConfigs and CreateTopics
// report it.
type topicConfig struct {
	name, value string
	isDefault   bool
}

// topicConfigs describes a table's topic configs from its options.
func (s *Server) topicConfigs(t *catalog.Table) []topicConfig {
	out := []topicConfig{
		{name: "cleanup.policy", value: "delete", isDefault: true},
		{name: "compression.type", value: "producer", isDefault: true},
		{name: "message.timestamp.type", value: "CreateTime", isDefault: true},
		{name: "min.insync.replicas", value: "1", isDefault: true},
		{name: "retention.bytes", value: "-1", isDefault: true},
	}
	retention := topicConfig{name: "retention.ms", value: "-1", isDefault: true}
	if r, ok := t.Spec.Options[optionLogRetention]; ok {
		if d, err := time.ParseDuration(r); err == nil {
			retention = topicConfig{name: "retention.ms", value: strconv.FormatInt(d.Milliseconds(), 10)}
		}
	}
	maxBytes := topicConfig{name: "max.message.bytes", value: strconv.Itoa(s.cfg.MaxRequestBytes), isDefault: true}
	if m, ok := t.Spec.Options[optionMaxMessageBytes]; ok {
		maxBytes = topicConfig{name: "max.message.bytes", value: m}
	}
	return append(out, retention, maxBytes)
}

// maxMessageBytes is the largest record batch a produce to t may send
// (0: no limit beyond the request size).
func maxMessageBytes(t *catalog.Table) int {
	n, _ := strconv.Atoi(t.Spec.Options[optionMaxMessageBytes])
	return n
}

func checkBatchSizes(raw []byte, limit int) *batchError {
	if limit <= 0 {
		return nil
	}
	for len(raw) >= 12 {
		n := 12 + int(int32(uint32(raw[8])<<24|uint32(raw[9])<<16|uint32(raw[10])<<8|uint32(raw[11])))
		if n > limit {
			return batchErrorf(kerr.MessageTooLarge, "a record batch of %d bytes is larger than the topic's max.message.bytes (%d)", n, limit)
		}
		if n <= 12 || n > len(raw) {
			return nil // parseBatches reports it
		}
		raw = raw[n:]
	}
	return nil
}

func describedConfigs(cs []topicConfig) []kmsg.DescribeConfigsResponseResourceConfig {
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(cs))
	for _, c := range cs {
		dc := kmsg.NewDescribeConfigsResponseResourceConfig()
		dc.Name = c.name
		dc.Value = kmsg.StringPtr(c.value)
		dc.ReadOnly = c.name != "retention.ms" && c.name != "max.message.bytes"
		dc.IsDefault = c.isDefault
		dc.Source = kmsg.ConfigSourceDynamicTopicConfig
		if c.isDefault {
			dc.Source = kmsg.ConfigSourceDefaultConfig
		}
		out = append(out, dc)
	}
	return out
}

func createdConfigs(cs []topicConfig) []kmsg.CreateTopicsResponseTopicConfig {
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(cs))
	for _, c := range cs {
		cc := kmsg.NewCreateTopicsResponseTopicConfig()
		cc.Name = c.name
		cc.Value = kmsg.StringPtr(c.value)
		cc.ReadOnly = c.name != "retention.ms" && c.name != "max.message.bytes"
		cc.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		if c.isDefault {
			cc.Source = int8(kmsg.ConfigSourceDefaultConfig)
		}
		out = append(out, cc)
	}
	return out
}
