// Package flightsql is mink's Arrow Flight SQL service (docs/flight.md,
// "Flight SQL"): SQL statements over Flight, run by the SQL front end
// (sqlfront's Arrow sessions) as the caller's role, with results streamed
// as Arrow batches.
//
// It is served on the node's Flight listener beside server/flightsvc:
// Route wraps the flightsvc.Service, sends every RPC that carries a Flight
// SQL command (an Any of arrow.flight.protocol.sql in the descriptor,
// ticket or DoPut descriptor, or a Flight SQL action type) to the Flight
// SQL server, and everything else — mink's table and bucket descriptors
// and tickets, Handshake, its own actions — to the Service. flightsvc's
// interceptors authenticate every call, so each request here carries the
// caller's identity (access.FromContext).
//
// State: a statement query is stateless (its ticket holds the SQL, and
// DoGet plans and runs it again in a fresh session); a prepared statement
// owns a session of its own until ClosePreparedStatement or until it has
// been idle for Config.IdleTimeout.
//
// Goroutines: New starts one janitor that closes idle prepared statements;
// Close stops it and closes every prepared statement. Each DoGet starts one
// goroutine that reads the result and ends when the result ends or the
// call's context is done. Server is safe for concurrent use; calls on one
// prepared statement run one at a time.
package flightsql
