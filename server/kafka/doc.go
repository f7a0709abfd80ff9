// Package kafka is a node's Kafka protocol listener (docs/kafka.md): log
// tables are topics, bucket i of a table (of all its partitions, in
// partition creation order) is partition i, and a record's Kafka offset is
// its row offset in the bucket.
//
// The listener answers for the buckets this node leads, as the Flight
// service does: Produce, Fetch and ListOffsets for a partition led
// elsewhere get NOT_LEADER_OR_FOLLOWER, and Metadata maps every partition to
// the node that leads its bucket now, so clients go there. A produce is
// acknowledged only once its batch is durable in the bucket's stream, under
// the bucket's leader epoch; a fenced leader acknowledges nothing.
// Idempotent producers get per-partition sequence checks whose state is kept
// in the stream entries themselves (buckets.ProducerMark), so a new leader
// rebuilds it from the stream. Consumer groups are answered by the groups
// subpackage. Rows that retention trimmed from a stream after tiering are
// fetched from the lake snapshot (Config.Lake, tiering.LakeReader), and the
// log start offset stays 0 (fetch.go, logStart).
//
// With a guard (Config.Access) a connection authenticates with SASL/PLAIN
// or SASL/SCRAM-SHA-256 against the roles of the metadata log (sasl.go);
// unless the node trusts every client, any other request before that
// closes the connection. Each request is then checked against the role's
// table privileges, read from the view of that request (authz.go).
//
// Wire messages are github.com/twmb/franz-go/pkg/kmsg's; record batches are
// magic v2 only, with gzip, snappy, lz4 and zstd compression.
//
// Goroutines: Serve runs an accept loop until Close; each connection runs a
// reader, which parses and handles requests one at a time in order (as a
// Kafka broker does), and a writer, which waits for each response in turn
// (a produce's durability) and writes it. Close closes the listener and
// every connection and waits for all of them. Server is safe for
// concurrent use.
package kafka
