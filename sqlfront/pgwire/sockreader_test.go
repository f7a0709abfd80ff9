package pgwire

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestPipelinedBehindLongQuery: messages a client pipelines behind a query
// that runs long enough for the socket watcher to start (and more of them
// than the watcher reads ahead) are all answered, in order, and nothing is
// lost or repeated between what the watcher read and what the protocol
// goroutine reads after it.
func TestPipelinedBehindLongQuery(t *testing.T) {
	ts := startServer(t, Config{})
	c := connectRaw(t, ts.addr, nil)
	// Each Query is padded so that the pipelined bytes exceed the
	// watcher's read-ahead several times over.
	pad := strings.Repeat(" ", 1000)
	n := 3 * watchReadAhead / (len(pad) + 20)
	sent := make(chan error, 1)
	go func() {
		for _, ms := range []int{50, 20} { // two long queries, two watchers
			c.fe.Send(&pgproto3.Query{String: "select pg_sleep(" + itoa(int64(ms)) + ")"})
			for i := 0; i < n; i++ {
				c.fe.Send(&pgproto3.Query{String: "create table x" + pad})
			}
		}
		sent <- c.fe.Flush()
	}()
	for round := range 2 {
		msgs := c.receiveUntil("ReadyForQuery")
		if got := formatMessages(msgs); got != "CommandComplete SELECT 0\nReadyForQuery I\n" {
			t.Fatalf("round %d: sleep answered with %s", round, got)
		}
		for i := 0; i < n; i++ {
			msgs := c.receiveUntil("ReadyForQuery")
			if got := formatMessages(msgs); got != "CommandComplete CREATE TABLE\nReadyForQuery I\n" {
				t.Fatalf("round %d: pipelined query %d of %d answered with %s", round, i, n, got)
			}
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// And the connection still serves a plain round trip.
	c.send(&pgproto3.Query{String: "create table x"})
	if got := formatMessages(c.receiveUntil("ReadyForQuery")); got != "CommandComplete CREATE TABLE\nReadyForQuery I\n" {
		t.Fatalf("after the pipeline: %s", got)
	}
}

// TestDisconnectBehindPipelined: a client that pipelines a message behind a
// long query and then closes its socket still cancels the query (the
// watcher reads the message, then the end of the socket).
func TestDisconnectBehindPipelined(t *testing.T) {
	h := &testHandler{sleeping: make(chan struct{}, 1)}
	ts := startServer(t, Config{Handler: h})
	c := connectRaw(t, ts.addr, nil)
	c.send(&pgproto3.Query{String: "select pg_sleep"}, &pgproto3.Query{String: "create table x"})
	<-h.sleeping
	time.Sleep(2 * watchDelay) // let the watcher start and read the second Query
	c.nc.Close()
	waitFor(t, "the sleeping session to close", func() bool { return h.sessions.Load() == 0 })
}

// TestDisconnectTLS: over TLS, a client that closes its socket mid-query
// cancels the query, and a query shorter and one longer than the watcher's
// delay both leave the TLS stream intact for the next round trip.
func TestDisconnectTLS(t *testing.T) {
	ctx := testCtx(t)
	h := &testHandler{sleeping: make(chan struct{}, 1)}
	ts := startServer(t, Config{Handler: h, TLSConfig: selfSignedTLS(t), Users: map[string]string{"mink": "pw"}})
	u := strings.Replace(ts.url("mink:pw", ""), "sslmode=disable", "sslmode=require", 1)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgx over TLS: %v", err)
	}
	for _, q := range []string{"select pg_sleep(1)", "select pg_sleep(30)", "select 1", "select pg_sleep(30)"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var one int32
		if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("select 1 after %s: %d %v", q, one, err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "select pg_sleep")
		done <- err
	}()
	<-h.sleeping
	conn.PgConn().Conn().Close()
	waitFor(t, "the sleeping session to close", func() bool { return h.sessions.Load() == 0 })
	if err := <-done; err == nil {
		t.Fatal("query on a closed connection succeeded")
	}
}

// TestCopyAfterWatcher: a COPY FROM STDIN that starts reading after the
// socket watcher started (the statement took longer than watchDelay to
// begin) gets the CopyData the watcher read first, then the rest from the
// socket, and stores every row.
func TestCopyAfterWatcher(t *testing.T) {
	h := &testHandler{copyDelay: 10 * watchDelay}
	ts := startServer(t, Config{Handler: h})
	c := connectRaw(t, ts.addr, nil)
	c.send(&pgproto3.Query{String: "copy c from stdin"},
		&pgproto3.CopyData{Data: []byte("1\ta\t1\n2\tb\t2\n")},
		&pgproto3.CopyData{Data: []byte("3\tc\t3\n")})
	time.Sleep(20 * watchDelay) // the COPY runs and waits for more
	c.send(&pgproto3.CopyData{Data: []byte("4\td\t4\n")}, &pgproto3.CopyDone{})
	got := formatMessages(c.receiveUntil("ReadyForQuery"))
	if !strings.HasPrefix(got, "CopyInResponse") || !strings.HasSuffix(got, "CommandComplete COPY 4\nReadyForQuery I\n") {
		t.Fatalf("COPY answered with:\n%s", got)
	}
	if rows := h.committed(); len(rows) != 4 {
		t.Fatalf("%d rows stored, want 4: %v", len(rows), rows)
	}
}
