// Package flightsvc is a node's Arrow Flight service (docs/flight.md): the
// public bulk-data API and the transport between mink nodes.
//
// Service implements the Flight RPCs over the node's metadata view and
// bucket manager. A table-addressed DoPut is split by partition and bucket
// on the receiving node; parts whose bucket is led elsewhere are forwarded
// to the leader over Flight (bucket-addressed DoPut) through a Pool, which
// also implements Transport for the SQL front end.
//
// With an access.Guard (Config.Access) every call is authenticated: the
// basic-auth Handshake issues bearer tokens, and interceptors admit only
// calls that carry one (auth.go); each RPC then checks the caller's table
// privileges (privileges.go). The Pool's calls carry a forwarding token
// for the identity in their context, so the node that receives them acts
// for the same role and checks it again.
//
// DoGet sends each batch's Arrow buffers from where they are: a
// recordWriter hands them to gRPC as the pieces of a flightwire.DataMessage,
// which flightwire.Codec writes to the connection without encoding them
// into a protobuf buffer first (writer.go). The bytes on the wire are those
// of arrow-go's flight.Writer.
//
// Goroutines: Serve runs the gRPC server until Close, which stops it
// (gracefully, then forcibly after a timeout) and waits. Each DoPut starts
// one goroutine that acknowledges batches and one per remote bucket it
// forwards to; all end before the RPC returns. Service and Pool are safe for
// concurrent use.
package flightsvc
