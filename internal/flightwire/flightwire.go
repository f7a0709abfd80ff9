// Package flightwire is the wire contract of mink's Arrow Flight service
// (docs/flight.md): how descriptors, tickets, per-message metadata, action
// bodies and error details are encoded, and how a request follows the
// NotLeader redirects they carry (Redirects). The server (server/flightsvc)
// and the Go client (client) both use it, so they cannot drift apart.
// Codec, the gRPC codec of both sides (ServerOptions, DialOptions), moves
// FlightData bodies without protobuf's copies (codec.go).
//
// Everything here is safe for concurrent use and starts no goroutines;
// only the Flight calls (PutBatches, GetStream, DoAction) do I/O. The
// package imports no storage code, so that the public client stays light.
package flightwire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// Command is the JSON body of a CMD descriptor. A PATH descriptor is a
// shorthand for the common cases:
//
//	[<table>]                    {"table": <table>}
//	[<table>, "bucket", "<id>"]  {"table": <table>, "bucket": <id>}
//
// Table names a table; Bucket, when nonzero, addresses one bucket (Table may
// then be omitted). Partitions restricts a partitioned table to the listed
// partition values (their canonical text, routing.PartitionValue); nil
// means all. Columns projects, in the given order; nil means every column.
type Command struct {
	Table      string   `json:"table,omitempty"`
	Bucket     uint64   `json:"bucket,omitempty"`
	Partitions []string `json:"partitions,omitempty"`
	Columns    []string `json:"columns,omitempty"`
}

// ParseDescriptor decodes a descriptor into a Command.
func ParseDescriptor(d *flight.FlightDescriptor) (Command, error) {
	if d == nil {
		return Command{}, fmt.Errorf("no flight descriptor")
	}
	switch d.Type {
	case flight.DescriptorPATH:
		// A table of a schema other than public is [schema, table], which
		// Command.Table names as "schema.table".
		path := d.Path
		table := ""
		switch {
		case len(path) == 1 || len(path) == 3:
			table, path = path[0], path[1:]
		case len(path) == 2 || len(path) == 4:
			if path[0] != "" && path[1] != "" {
				table = path[0] + "." + path[1]
			}
			path = path[2:]
		}
		switch {
		case table == "":
		case len(path) == 0:
			return Command{Table: table}, nil
		case path[0] == "bucket":
			id, err := strconv.ParseUint(path[1], 10, 64)
			if err != nil || id == 0 {
				return Command{}, fmt.Errorf("descriptor path %q: bad bucket id %q", d.Path, path[1])
			}
			return Command{Table: table, Bucket: id}, nil
		}
		return Command{}, fmt.Errorf("descriptor path %q: want [table], [schema, table], or either followed by \"bucket\", id", d.Path)
	case flight.DescriptorCMD:
		var c Command
		dec := json.NewDecoder(strings.NewReader(string(d.Cmd)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return Command{}, fmt.Errorf("descriptor command: %w", err)
		}
		if c.Table == "" && c.Bucket == 0 {
			return Command{}, fmt.Errorf("descriptor command names neither a table nor a bucket")
		}
		return c, nil
	}
	return Command{}, fmt.Errorf("descriptor type %v: want PATH or CMD", d.Type)
}

// Descriptor encodes c, as a PATH when that says everything, else as a CMD.
func (c Command) Descriptor() *flight.FlightDescriptor {
	if len(c.Partitions) == 0 && len(c.Columns) == 0 && c.Table != "" {
		if c.Bucket == 0 {
			return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{c.Table}}
		}
		return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{c.Table, "bucket", strconv.FormatUint(c.Bucket, 10)}}
	}
	cmd, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("flightwire: encode %+v: %v", c, err))
	}
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}
}

// TicketVersion is the version of the ticket encoding.
const TicketVersion = 1

// Ticket is the JSON of a DoGet ticket: the rows of Bucket at offsets
// [From, To), projected to Columns (nil: all). A nil To means the bucket's
// acknowledged end when the DoGet starts. Tickets name no node: any node
// that can serve the bucket accepts them, so a client that is redirected
// resends the same ticket.
type Ticket struct {
	V       int      `json:"v"`
	Bucket  uint64   `json:"bucket"`
	From    uint64   `json:"from,omitempty"`
	To      *uint64  `json:"to,omitempty"`
	Columns []string `json:"columns,omitempty"`
	// Changelog, for a bucket of a primary-key table, reads its changelog
	// (_change_type, then the columns; one offset per record) over
	// [From, To) instead of its current state. A primary-key bucket's
	// ticket without it reads the current state (the leader only; From
	// and To do not apply).
	Changelog bool `json:"changelog,omitempty"`
	// Stored reads a log bucket's batches or a primary-key bucket's
	// changelog as stored, every stored column included: the columns
	// ALTER TABLE … DROP COLUMN dropped too (under catalog.DroppedName),
	// where Columns must be empty. Nodes
	// reading each other's buckets ask for it, since they widen the
	// batches themselves.
	Stored bool `json:"stored,omitempty"`
}

// Encode returns the ticket bytes.
func (t Ticket) Encode() []byte {
	t.V = TicketVersion
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("flightwire: encode ticket %+v: %v", t, err))
	}
	return b
}

// ParseTicket decodes ticket bytes.
func ParseTicket(b []byte) (Ticket, error) {
	var t Ticket
	if err := json.Unmarshal(b, &t); err != nil {
		return Ticket{}, fmt.Errorf("ticket: %w", err)
	}
	if t.V != TicketVersion {
		return Ticket{}, fmt.Errorf("ticket version %d: this server reads version %d", t.V, TicketVersion)
	}
	if t.Bucket == 0 {
		return Ticket{}, fmt.Errorf("ticket names no bucket")
	}
	if t.To != nil && *t.To < t.From {
		return Ticket{}, fmt.Errorf("ticket range [%d, %d) is backwards", t.From, *t.To)
	}
	return t, nil
}

// BatchMeta is the app_metadata of every DoGet message: the row offset, in
// its bucket, of the message's first row.
type BatchMeta struct {
	Offset uint64 `json:"offset"`
}

// PutAck is the app_metadata of a DoPut PutResult. A bucket-addressed DoPut
// acknowledges every batch, in order, once it is durable: Bucket, Offset
// (of its first row) and Rows. A table-addressed DoPut acknowledges once, at
// the end of the stream, when every row is durable: Rows is the total.
type PutAck struct {
	Bucket uint64  `json:"bucket,omitempty"`
	Offset *uint64 `json:"offset,omitempty"`
	Rows   int64   `json:"rows"`
}

// EndpointMeta is the app_metadata of a FlightInfo endpoint.
type EndpointMeta struct {
	Bucket    uint64 `json:"bucket"`
	Partition string `json:"partition,omitempty"`
	Leader    uint32 `json:"leader,omitempty"`
	// Lake marks the endpoint of a log-table bucket's rows below its
	// stream's start, which only the lake holds: any node serves it (the
	// endpoint has no location).
	Lake bool `json:"lake,omitempty"`
}

// Location is the Flight location URI of a host:port address.
func Location(addr string) string { return "grpc+tcp://" + addr }

// TLSLocation is the Flight location URI of a host:port address served
// over TLS.
func TLSLocation(addr string) string { return "grpc+tls://" + addr }

// ParseLocation returns host:port from a Flight location URI
// (grpc+tcp://, grpc+tls://, grpc://) or a bare host:port.
func ParseLocation(uri string) (string, error) {
	addr := uri
	for _, scheme := range []string{"grpc+tcp://", "grpc+tls://", "grpc://"} {
		if strings.HasPrefix(uri, scheme) {
			addr = strings.TrimPrefix(uri, scheme)
			break
		}
	}
	if strings.Contains(addr, "://") {
		return "", fmt.Errorf("location %q: only grpc+tcp:// and grpc+tls:// are served", uri)
	}
	if addr == "" || !strings.Contains(addr, ":") {
		return "", fmt.Errorf("location %q: want host:port", uri)
	}
	return strings.TrimSuffix(addr, "/"), nil
}
