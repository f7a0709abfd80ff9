package pgwire

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestProtocol runs the scripts in testdata/protocol: each sends frontend
// messages over a raw connection to a server with the test handler and
// prints what comes back. Rewrite the expectations with -rewrite.
//
// Commands:
//
//	connect [conn=a]                  open a connection (trust startup)
//	send [conn=a] [until=Type] [n=N]  send the messages of the input, one per
//	                                  line, then print the replies up to the
//	                                  N-th message of type Type (default:
//	                                  ReadyForQuery, N = number of Query and
//	                                  Sync messages sent; until=none reads
//	                                  nothing)
//	counters                          the handler's executions, prepares,
//	                                  committed rows of c and COPY aborts
//
// A message line is "Type" or "Type {json}" with pgproto3's JSON field names,
// except CopyData, which takes a Go-quoted string or 0x-prefixed hex.
func TestProtocol(t *testing.T) {
	datadriven.Walk(t, "testdata/protocol", func(t *testing.T, path string) {
		ts := startServer(t, Config{})
		conns := map[string]*rawClient{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			name := "a"
			d.MaybeScanArgs(t, "conn", &name)
			switch d.Cmd {
			case "connect":
				conns[name] = connectRaw(t, ts.addr, nil)
				return "ok\n"
			case "send":
				c := conns[name]
				if c == nil {
					d.Fatalf(t, "no connection %q", name)
				}
				c.t = t
				until, want := "ReadyForQuery", 0
				for _, line := range strings.Split(d.Input, "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					msg, err := parseFrontendMessage(line)
					if err != nil {
						d.Fatalf(t, "%s: %v", line, err)
					}
					switch msg.(type) {
					case *pgproto3.Query, *pgproto3.Sync:
						want++
					}
					c.fe.Send(msg)
				}
				if err := c.fe.Flush(); err != nil {
					d.Fatalf(t, "send: %v", err)
				}
				d.MaybeScanArgs(t, "until", &until)
				d.MaybeScanArgs(t, "n", &want)
				if until == "none" || want == 0 {
					return ""
				}
				var out strings.Builder
				for seen := 0; seen < want; {
					m, err := c.receive()
					if err != nil {
						fmt.Fprintf(&out, "error: %v\n", err)
						break
					}
					out.WriteString(formatMessage(m) + "\n")
					if msgType(m) == until {
						seen++
					}
				}
				return out.String()
			case "counters":
				h := ts.h
				return fmt.Sprintf("executions=%d prepares=%d rows_in_c=%d copy_aborts=%d\n",
					h.executions.Load(), h.prepares.Load(), len(h.committed()), len(h.aborts()))
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// parseFrontendMessage parses "Type" or "Type {json}".
func parseFrontendMessage(line string) (pgproto3.FrontendMessage, error) {
	typ, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	var msg pgproto3.FrontendMessage
	switch typ {
	case "Query":
		msg = &pgproto3.Query{}
	case "Parse":
		msg = &pgproto3.Parse{}
	case "Bind":
		msg = &pgproto3.Bind{}
	case "Describe":
		msg = &pgproto3.Describe{}
	case "Execute":
		msg = &pgproto3.Execute{}
	case "Close":
		msg = &pgproto3.Close{}
	case "Sync":
		return &pgproto3.Sync{}, nil
	case "Flush":
		return &pgproto3.Flush{}, nil
	case "Terminate":
		return &pgproto3.Terminate{}, nil
	case "CopyDone":
		return &pgproto3.CopyDone{}, nil
	case "CopyFail":
		msg = &pgproto3.CopyFail{}
	case "FunctionCall":
		msg = &pgproto3.FunctionCall{}
	case "CopyData":
		if strings.HasPrefix(arg, "0x") {
			b, err := hex.DecodeString(arg[2:])
			return &pgproto3.CopyData{Data: b}, err
		}
		s, err := strconv.Unquote(arg)
		return &pgproto3.CopyData{Data: []byte(s)}, err
	default:
		return nil, fmt.Errorf("unknown message type %q", typ)
	}
	if arg != "" {
		if err := json.Unmarshal([]byte(arg), msg); err != nil {
			return nil, err
		}
	}
	return msg, nil
}
