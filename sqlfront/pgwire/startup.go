package pgwire

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // TimeZone names must resolve on hosts without a zoneinfo database.

	"github.com/jackc/pgx/v5/pgproto3"
)

// Request codes of the startup packet (the protocol version field).
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
	cancelRequestCode = 80877102

	maxStartupPacketLen = 10000 // PostgreSQL's MAX_STARTUP_PACKET_LENGTH
)

// startup runs the connection's startup phase: SSL/GSS negotiation, the
// startup packet, authentication, the session and the initial parameter
// statuses, up to the first ReadyForQuery. A CancelRequest is served here
// and ends the connection.
func (c *conn) startup(tooMany bool) error {
	c.nc.SetDeadline(time.Now().Add(c.srv.cfg.StartupTimeout))
	params, err := c.readStartupMessage()
	if err != nil {
		return err
	}

	c.reader = newSockReader(c.ctx, c.rw, c.nc, func() { c.stop(errClientGone) })
	c.be = pgproto3.NewBackend(c.reader, c.rw)
	c.be.SetMaxBodyLen(c.srv.cfg.MaxMessageSize)

	if tooMany {
		return c.sendFatal(Errorf(CodeTooManyConnections, "sorry, too many clients already"))
	}
	c.user = params["user"]
	if c.user == "" {
		return c.sendFatal(Errorf(CodeInvalidAuthorizationSpecification, "no PostgreSQL user name specified in startup packet"))
	}
	database := params["database"]
	if database == "" {
		database = c.user
	}
	if c.srv.auth != nil {
		r := AuthRequest{User: c.user, Database: database, RemoteAddr: c.nc.RemoteAddr(), TLS: c.tls}
		if tc, ok := c.rw.(*tls.Conn); ok {
			if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 {
				r.CertCN = st.PeerCertificates[0].Subject.CommonName
			}
		}
		if err := c.authenticate(r); err != nil {
			return err
		}
	}
	c.be.Send(&pgproto3.AuthenticationOk{})

	tzName := params["timezone"]
	if tzName == "" {
		tzName = "UTC"
	}
	loc, err := loadLocation(tzName)
	if err != nil {
		return c.sendFatal(Errorf(CodeInvalidParameterValue, "invalid value for parameter \"TimeZone\": %q", tzName))
	}
	c.codec = newCodec(loc)
	c.timeZone = tzName

	if !c.srv.register(c) {
		return c.sendFatal(&Error{Code: CodeAdminShutdown, Message: "the database system is shutting down"})
	}
	c.log = c.log.With("pid", c.pid, "user", c.user)
	info := SessionInfo{
		User:            c.user,
		Database:        database,
		ApplicationName: params["application_name"],
		Params:          params,
		RemoteAddr:      c.nc.RemoteAddr(),
		ProcessID:       c.pid,
		TLS:             c.tls,
	}
	session, err := c.srv.cfg.Handler.NewSession(c.ctx, info)
	if err != nil {
		return c.sendFatal(toError(canceled(c.ctx, err)))
	}
	c.session = session

	initial := map[string]string{
		"application_name":              info.ApplicationName,
		"client_encoding":               "UTF8",
		"DateStyle":                     "ISO, MDY",
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
		"integer_datetimes":             "on",
		"IntervalStyle":                 "postgres",
		"is_superuser":                  "on",
		"server_encoding":               "UTF8",
		"server_version":                c.srv.cfg.ServerVersion,
		"session_authorization":         c.user,
		"standard_conforming_strings":   "on",
		"TimeZone":                      tzName,
	}
	// The session's own values (is_superuser of its role, …) are in the
	// first report, not sent again just after it.
	if pr, ok := session.(ParamReporter); ok {
		maps.Copy(initial, pr.ChangedParams())
	}
	c.reportParams(initial)
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret[:]})
	if err := c.readyForQuery(); err != nil {
		return err
	}
	c.nc.SetDeadline(time.Time{})
	// Server.Close cancels the context, then sets a past read deadline: if
	// it did so during startup, the deadline just cleared was its, and the
	// idle connection would never notice the close. (Checked after
	// clearing: a Close that comes later sets its own.)
	if c.ctx.Err() != nil {
		c.nc.SetReadDeadline(time.Now())
		c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	}
	return nil
}

// readStartupMessage reads startup packets until the StartupMessage,
// answering SSLRequest and GSSENCRequest on the way. It returns the startup
// parameters with names lower-cased and the "options" switches expanded.
func (c *conn) readStartupMessage() (map[string]string, error) {
	for {
		body, err := readStartupPacket(c.rw)
		if err != nil {
			if e, ok := err.(*Error); ok {
				return nil, c.sendFatal(e)
			}
			return nil, err
		}
		code := binary.BigEndian.Uint32(body)
		switch {
		case code == sslRequestCode:
			if c.tls {
				return nil, c.sendFatal(Errorf(CodeProtocolViolation, "SSL negotiation requested on an encrypted connection"))
			}
			if c.srv.cfg.TLSConfig == nil {
				if _, err := c.rw.Write([]byte{'N'}); err != nil {
					return nil, err
				}
				continue
			}
			if _, err := c.rw.Write([]byte{'S'}); err != nil {
				return nil, err
			}
			tc := tls.Server(c.nc, c.srv.cfg.TLSConfig)
			if err := tc.HandshakeContext(c.ctx); err != nil {
				return nil, fmt.Errorf("TLS handshake: %w", err)
			}
			c.rw, c.tls = tc, true
		case code == gssEncRequestCode:
			if _, err := c.rw.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case code == cancelRequestCode:
			if len(body) >= 12 {
				c.srv.cancel(binary.BigEndian.Uint32(body[4:]), body[8:])
			}
			return nil, errCancelRequest
		case code>>16 == 3:
			params, unknownOpts, err := parseStartupParams(body[4:])
			if err != nil {
				return nil, c.sendFatal(err.(*Error))
			}
			// Like PostgreSQL, answer a newer 3.x minor version or
			// protocol options (_pq_.*) with the version we speak.
			if code&0xffff != 0 || len(unknownOpts) > 0 {
				msg := &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknownOpts}
				buf, err := msg.Encode(nil)
				if err != nil {
					return nil, err
				}
				if _, err := c.rw.Write(buf); err != nil {
					return nil, err
				}
			}
			return params, nil
		default:
			return nil, c.sendFatal(Errorf(CodeFeatureNotSupported,
				"unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", code>>16, code&0xffff))
		}
	}
}

// readStartupPacket reads one length-prefixed startup packet and returns its
// body, which starts with the 4-byte code. It reads exactly the packet, so
// that nothing a client sends before a TLS handshake is buffered.
func readStartupPacket(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(head[:]))
	if n < 8 || n > maxStartupPacketLen {
		return nil, Errorf(CodeProtocolViolation, "invalid length of startup packet")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// parseStartupParams parses the name/value pairs of a StartupMessage. Names
// are lower-cased (PostgreSQL's setting names are case-insensitive); the
// switches of "options" become their own entries; "_pq_." options are
// returned apart, as none is supported.
func parseStartupParams(b []byte) (params map[string]string, unknownOpts []string, err error) {
	params = make(map[string]string)
	bad := Errorf(CodeProtocolViolation, "invalid startup packet layout: expected terminator as last byte")
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, nil, bad
		}
		if i == 0 {
			if len(b) != 1 {
				return nil, nil, bad
			}
			break
		}
		name := string(b[:i])
		b = b[i+1:]
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			return nil, nil, bad
		}
		value := string(b[:j])
		b = b[j+1:]
		if strings.HasPrefix(name, "_pq_.") {
			unknownOpts = append(unknownOpts, name)
			continue
		}
		params[strings.ToLower(name)] = value
	}
	if opts, ok := params["options"]; ok {
		for name, value := range parseOptions(opts) {
			params[name] = value
		}
	}
	return params, unknownOpts, nil
}

// parseOptions expands the "options" startup parameter: whitespace-separated
// switches (a backslash escapes the next character), of which "-c name=value",
// "-cname=value" and "--name=value" set parameters; others are ignored.
func parseOptions(s string) map[string]string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	out := make(map[string]string)
	set := func(kv string) {
		name, value, ok := strings.Cut(kv, "=")
		if ok && name != "" {
			out[strings.ToLower(strings.ReplaceAll(name, "-", "_"))] = value
		}
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-c" && i+1 < len(words):
			i++
			set(words[i])
		case strings.HasPrefix(w, "-c"):
			set(w[2:])
		case strings.HasPrefix(w, "--"):
			set(w[2:])
		}
	}
	return out
}

// loadLocation resolves a TimeZone setting: a zone name, or a POSIX-style
// fixed offset such as "+02" or "-05:30" (PostgreSQL's sign convention for
// ISO offsets, east positive).
func loadLocation(name string) (*time.Location, error) {
	switch strings.ToLower(name) {
	case "utc", "gmt", "z", "zulu", "etc/utc":
		return time.UTC, nil
	}
	if loc, err := time.LoadLocation(name); err == nil {
		return loc, nil
	}
	if len(name) > 1 && (name[0] == '+' || name[0] == '-') {
		hh, mm, _ := strings.Cut(name[1:], ":")
		h, err1 := strconv.Atoi(hh)
		m := 0
		var err2 error
		if mm != "" {
			m, err2 = strconv.Atoi(mm)
		}
		if err1 == nil && err2 == nil && h <= 15 && m < 60 {
			off := h*3600 + m*60
			if name[0] == '-' {
				off = -off
			}
			return time.FixedZone(name, off), nil
		}
	}
	return nil, fmt.Errorf("unknown time zone %q", name)
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
