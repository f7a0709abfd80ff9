package auth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// This file holds the host-based rules of --hba-file: PostgreSQL's
// pg_hba.conf syntax (as of PostgreSQL 15), parsed once into an HBA whose
// Match decides, for each new connection on any listener, how the client
// must authenticate. What mink accepts, refuses and why is in docs/hba.md.

// The listeners an HBARequest comes from. Only the Postgres listener has a
// database; see HBARequest.
const (
	ListenerPostgres = "postgres"
	ListenerFlight   = "flight"
	ListenerKafka    = "kafka"
	ListenerAdmin    = "admin"
)

// The authentication methods a rule can name, spelled as in pg_hba.conf.
const (
	// HBASCRAM asks for a password checked against the role's
	// SCRAM-SHA-256 verifier.
	HBASCRAM = "scram-sha-256"
	// HBATrust lets the client in as the role it names, without a password.
	HBATrust = "trust"
	// HBAReject refuses the connection.
	HBAReject = "reject"
	// HBACert requires a verified client certificate whose CN is the role.
	HBACert = "cert"
)

// The values of the clientcert option, spelled as in pg_hba.conf.
const (
	// ClientCertVerifyCA requires a client certificate that verifies against
	// the client CA (--tls-client-ca-file), in addition to the method.
	ClientCertVerifyCA = "verify-ca"
	// ClientCertVerifyFull also requires the certificate's CN to be the role.
	ClientCertVerifyFull = "verify-full"
)

// ErrHBADenied is matched (errors.Is) by the errors of
// HBARequest.NoEntryError and HBARequest.RejectError: the rules refuse the
// connection before any credential is looked at. PostgreSQL answers both
// with SQLSTATE 28000.
var ErrHBADenied = errors.New("auth: connection refused by the hba rules")

// An HBA is a parsed rules file. It is immutable, so Match is safe to call
// concurrently; a reload parses a new HBA and swaps it in.
type HBA struct {
	rules []hbaRule
}

// An HBARequest describes a connection to match against the rules.
type HBARequest struct {
	// Listener is one of ListenerPostgres, ListenerFlight, ListenerKafka and
	// ListenerAdmin. Only on the Postgres listener is Database compared: on
	// the others, which have no database, a rule's database field matches
	// only if it lists the keyword all.
	Listener string
	// TLS is whether the connection is encrypted with TLS (hostssl rules
	// match only such connections, hostnossl rules only the others).
	TLS bool
	// Database is the database the Postgres client asks for.
	Database string
	// User is the role the client asks to log in as.
	User string
	// Addr is the client's address. An IPv4-mapped IPv6 address (as Go's net
	// package reports IPv4 clients of a dual-stack listener) matches IPv4
	// rules, and an IPv6 zone is ignored.
	Addr netip.Addr
	// MemberOf reports whether role is a member of group, directly or
	// through other roles. It answers +group in the user field and the
	// samerole database keyword; nil means no role is a member of any
	// group. A role always counts as a member of itself, as in PostgreSQL,
	// whatever MemberOf says.
	MemberOf func(role, group string) bool
}

// An HBAMatch is what the first matching rule says about a connection.
type HBAMatch struct {
	// Method is HBASCRAM, HBATrust, HBAReject or HBACert. For HBACert the
	// listener takes the role from the certificate's CN, which must equal
	// the role the client asked for.
	Method string
	// ClientCert is "", ClientCertVerifyCA or ClientCertVerifyFull: whether
	// the client must also present a certificate that verifies against the
	// client CA, and whether its CN must be the role. It is
	// ClientCertVerifyFull for HBACert. A rule with clientcert set matches
	// only TLS connections (it is a hostssl rule).
	ClientCert string
	// Line is the rule's line in the file, for logs.
	Line int
}

// Match returns what the first rule that matches r says, and false if no
// rule matches, in which case the connection must be refused with
// r.NoEntryError(). As in PostgreSQL there is no fall-through: if the
// matched rule's method fails, the connection fails.
func (h *HBA) Match(r HBARequest) (HBAMatch, bool) {
	r.Addr = r.Addr.Unmap().WithZone("")
	for i := range h.rules {
		rule := &h.rules[i]
		if rule.matches(&r) {
			return HBAMatch{Method: rule.method, ClientCert: rule.clientCert, Line: rule.line}, true
		}
	}
	return HBAMatch{}, false
}

// NoEntryError is the error that refuses r when no rule matches it, worded
// as PostgreSQL's.
func (r HBARequest) NoEntryError() error {
	return &hbaDeniedError{"no pg_hba.conf entry for " + r.describe()}
}

// RejectError is the error that refuses r when the rule it matched has the
// method reject, worded as PostgreSQL's.
func (r HBARequest) RejectError() error {
	return &hbaDeniedError{"pg_hba.conf rejects connection for " + r.describe()}
}

func (r HBARequest) describe() string {
	host := "[unknown]"
	if r.Addr.IsValid() {
		host = r.Addr.Unmap().WithZone("").String()
	}
	where := fmt.Sprintf("database %q", r.Database)
	if r.Listener != ListenerPostgres {
		where = fmt.Sprintf("listener %q", r.Listener)
	}
	encryption := "no encryption"
	if r.TLS {
		encryption = "SSL encryption"
	}
	return fmt.Sprintf("host %q, user %q, %s, %s", host, r.User, where, encryption)
}

type hbaDeniedError struct{ msg string }

func (e *hbaDeniedError) Error() string        { return e.msg }
func (e *hbaDeniedError) Is(target error) bool { return target == ErrHBADenied }

// An HBAParseError is what is wrong with one line of a rules file. ParseHBA
// reports every wrong line (joined with errors.Join), so errors.As finds the
// first.
type HBAParseError struct {
	File string // the name given to ParseHBA
	Line int    // the line the record starts on, from 1
	Msg  string // what is wrong, worded as PostgreSQL's when it has the same complaint
}

func (e *HBAParseError) Error() string {
	return fmt.Sprintf("line %d of configuration file %q: %s", e.Line, e.File, e.Msg)
}

// hbaMaxLine bounds a logical line (continuations included), so that a
// file that is not a rules file fails fast instead of filling memory.
const hbaMaxLine = 1 << 20

// ParseHBA parses the rules file read from r; name (usually its path)
// appears in errors. Blank lines and comments are skipped, a line ending in a
// backslash continues on the next one, and every other line must be a rule
// mink can honour exactly: a rule it would have to ignore or weaken is an
// error rather than a silent hole. A file without rules is valid, and
// matches nothing.
func ParseHBA(name string, r io.Reader) (*HBA, error) {
	var (
		h    HBA
		errs []error
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), hbaMaxLine)
	lineNum := 0
	for {
		// A record starts on line start and runs over its continuations.
		var text strings.Builder
		start, more := lineNum+1, false
		for sc.Scan() {
			lineNum++
			more = true
			line := sc.Text() // without its \n or \r\n
			cont := strings.HasSuffix(line, `\`)
			text.WriteString(strings.TrimSuffix(line, `\`))
			if text.Len() > hbaMaxLine {
				return nil, &HBAParseError{name, start, "line too long"}
			}
			if !cont {
				break
			}
		}
		if !more {
			break
		}
		fields, err := hbaTokenize(text.String())
		if err == nil && len(fields) > 0 {
			var rule hbaRule
			rule, err = hbaParseRule(fields)
			rule.line = start
			h.rules = append(h.rules, rule)
		}
		if err != nil {
			errs = append(errs, &HBAParseError{name, start, err.Error()})
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &HBAParseError{name, lineNum + 1, "line too long"}
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &h, nil
}

// An hbaToken is one item of a field: a field is a comma list of them.
type hbaToken struct {
	text   string
	quoted bool // some of it was in double quotes: it is never a keyword
}

func (t hbaToken) is(keyword string) bool { return !t.quoted && t.text == keyword }

// hbaTokenize splits a logical line into fields of comma-separated tokens,
// as PostgreSQL does: fields are separated by blanks, a token ends at an
// unquoted comma, a comma followed by blanks still continues the list,
// double quotes protect blanks, commas and # (two of them inside quotes
// stand for one), and an unquoted # starts a comment.
func hbaTokenize(line string) ([][]hbaToken, error) {
	var fields [][]hbaToken
	isBlank := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }
	i, continuing := 0, false
	for {
		for i < len(line) && (isBlank(line[i]) || line[i] == ',') {
			i++
		}
		if i == len(line) || line[i] == '#' {
			return fields, nil
		}
		var (
			tok      strings.Builder
			inQuote  bool
			quoted   bool
			endComma bool
		)
	token:
		for ; i < len(line); i++ {
			c := line[i]
			switch {
			case inQuote && c == '"' && i+1 < len(line) && line[i+1] == '"':
				tok.WriteByte('"')
				i++
			case c == '"':
				inQuote, quoted = !inQuote, true
			case inQuote:
				tok.WriteByte(c)
			case isBlank(c) || c == '#':
				break token
			case c == ',':
				endComma = true
				i++
				break token
			default:
				tok.WriteByte(c)
			}
		}
		if inQuote {
			return nil, errors.New("unterminated quoted string")
		}
		t := hbaToken{text: tok.String(), quoted: quoted}
		if continuing {
			fields[len(fields)-1] = append(fields[len(fields)-1], t)
		} else {
			fields = append(fields, []hbaToken{t})
		}
		continuing = endComma
	}
}

type hbaConnType uint8

const (
	hbaLocal     hbaConnType = iota // a Unix socket: mink has none, so it never matches
	hbaHost                         // TCP, with or without TLS
	hbaHostSSL                      // TCP with TLS
	hbaHostNoSSL                    // TCP without TLS
)

type hbaNameKind uint8

const (
	hbaName        hbaNameKind = iota // a database or role name
	hbaAll                            // the keyword all
	hbaGroup                          // +group: the members of a role
	hbaSameUser                       // the database named like the role
	hbaSameRole                       // a database named like a role the user is a member of
	hbaReplication                    // replication connections: mink has none
)

// An hbaNameRule is one item of a database or user field.
type hbaNameRule struct {
	kind hbaNameKind
	name string // for hbaName and hbaGroup
}

type hbaRule struct {
	line       int
	conn       hbaConnType
	databases  []hbaNameRule
	users      []hbaNameRule
	allAddrs   bool         // the address field is all (always so for local rules)
	addrs      netip.Prefix // otherwise, masked
	method     string
	clientCert string
}

func (rule *hbaRule) matches(r *HBARequest) bool {
	switch rule.conn {
	case hbaLocal:
		return false
	case hbaHostSSL:
		if !r.TLS {
			return false
		}
	case hbaHostNoSSL:
		if r.TLS {
			return false
		}
	}
	if !rule.allAddrs && !rule.addrs.Contains(r.Addr) {
		return false
	}
	return rule.matchDatabase(r) && rule.matchUser(r)
}

func (rule *hbaRule) matchDatabase(r *HBARequest) bool {
	for _, d := range rule.databases {
		if d.kind == hbaAll {
			return true
		}
		if r.Listener != ListenerPostgres {
			continue
		}
		switch d.kind {
		case hbaName:
			if d.name == r.Database {
				return true
			}
		case hbaSameUser:
			if r.Database == r.User {
				return true
			}
		case hbaSameRole:
			if r.memberOf(r.Database) {
				return true
			}
		}
	}
	return false
}

func (rule *hbaRule) matchUser(r *HBARequest) bool {
	for _, u := range rule.users {
		switch u.kind {
		case hbaAll:
			return true
		case hbaName:
			if u.name == r.User {
				return true
			}
		case hbaGroup:
			if r.memberOf(u.name) {
				return true
			}
		}
	}
	return false
}

func (r *HBARequest) memberOf(group string) bool {
	return r.User == group || (r.MemberOf != nil && r.MemberOf(r.User, group))
}

// hbaParseRule parses the fields of one record: a connection type, a
// database, a user, an address (and netmask) unless local, a method and
// options. Its errors are worded as PostgreSQL's where PostgreSQL has the
// same complaint.
func hbaParseRule(fields [][]hbaToken) (hbaRule, error) {
	var rule hbaRule
	next := func() []hbaToken {
		if len(fields) == 0 {
			return nil
		}
		f := fields[0]
		fields = fields[1:]
		return f
	}

	conn := next()
	if len(conn) > 1 {
		return rule, errors.New("multiple values specified for connection type (specify exactly one connection type per line)")
	}
	switch conn[0].text {
	case "local":
		rule.conn = hbaLocal
	case "host":
		rule.conn = hbaHost
	case "hostssl":
		rule.conn = hbaHostSSL
	case "hostnossl":
		rule.conn = hbaHostNoSSL
	case "hostgssenc", "hostnogssenc":
		return rule, fmt.Errorf("connection type %q is not supported: mink has no GSSAPI encryption", conn[0].text)
	default:
		return rule, fmt.Errorf("invalid connection type %q", conn[0].text)
	}

	var err error
	databases := next()
	if databases == nil {
		return rule, errors.New("end-of-line before database specification")
	}
	if rule.databases, err = hbaParseNames(databases, true); err != nil {
		return rule, err
	}
	users := next()
	if users == nil {
		return rule, errors.New("end-of-line before role specification")
	}
	if rule.users, err = hbaParseNames(users, false); err != nil {
		return rule, err
	}

	if rule.conn == hbaLocal {
		rule.allAddrs = true
	} else {
		addr := next()
		if addr == nil {
			return rule, errors.New("end-of-line before IP address specification")
		}
		if len(addr) > 1 {
			return rule, errors.New("multiple values specified for host address (specify one address range per line)")
		}
		if rule.allAddrs, rule.addrs, err = hbaParseAddr(addr[0], next); err != nil {
			return rule, err
		}
	}

	method := next()
	if method == nil {
		return rule, errors.New("end-of-line before authentication method")
	}
	if len(method) > 1 {
		return rule, errors.New("multiple values specified for authentication type (specify exactly one authentication type per line)")
	}
	switch m := method[0].text; m {
	case HBASCRAM, HBATrust, HBAReject:
		rule.method = m
	case HBACert:
		if rule.conn != hbaHostSSL {
			return rule, errors.New("cert authentication is only supported on hostssl connections")
		}
		rule.method, rule.clientCert = m, ClientCertVerifyFull
	case "md5":
		return rule, errors.New(`authentication method "md5" is not supported: mink keeps only SCRAM-SHA-256 verifiers; use scram-sha-256`)
	case "password":
		return rule, errors.New(`authentication method "password" is not supported: mink never accepts a clear-text password on the Postgres listener; use scram-sha-256`)
	case "gss", "sspi", "ident", "peer", "pam", "ldap", "radius", "bsd":
		return rule, fmt.Errorf("authentication method %q is not supported by mink (use scram-sha-256, cert, trust or reject)", m)
	default:
		return rule, fmt.Errorf("invalid authentication method %q", m)
	}

	for f := next(); f != nil; f = next() {
		for _, opt := range f {
			if err := rule.setOption(opt.text); err != nil {
				return rule, err
			}
		}
	}
	return rule, nil
}

// hbaParseNames parses a database field (database true) or a user field.
func hbaParseNames(tokens []hbaToken, database bool) ([]hbaNameRule, error) {
	names := make([]hbaNameRule, 0, len(tokens))
	for _, t := range tokens {
		n := hbaNameRule{kind: hbaName, name: t.text}
		switch {
		case t.is("all"):
			n = hbaNameRule{kind: hbaAll}
		case database && t.is("sameuser"):
			n = hbaNameRule{kind: hbaSameUser}
		case database && (t.is("samerole") || t.is("samegroup")):
			n = hbaNameRule{kind: hbaSameRole}
		case database && t.is("replication"):
			n = hbaNameRule{kind: hbaReplication}
		case t.quoted:
		case strings.HasPrefix(t.text, "@"):
			return nil, fmt.Errorf("%q: including names from a file (@file) is not supported; list the names, separated by commas", t.text)
		case strings.HasPrefix(t.text, "/"):
			return nil, fmt.Errorf("%q: regular expressions are not supported; quote the name to match it literally", t.text)
		case !database && strings.HasPrefix(t.text, "+"):
			if len(t.text) == 1 {
				return nil, errors.New(`"+" must be followed by a role name`)
			}
			n.kind, n.name = hbaGroup, t.text[1:]
		}
		names = append(names, n)
	}
	return names, nil
}

// hbaParseAddr parses the address field, taking the netmask field from
// next when the address has no CIDR mask.
func hbaParseAddr(t hbaToken, next func() []hbaToken) (all bool, addrs netip.Prefix, err error) {
	switch {
	case t.is("all"):
		return true, netip.Prefix{}, nil
	case t.is("samehost"), t.is("samenet"):
		return false, netip.Prefix{}, fmt.Errorf("%q is not supported: write the server's addresses or networks in CIDR form", t.text)
	}
	addrText, bitsText, hasMask := strings.Cut(t.text, "/")
	addr, err := netip.ParseAddr(addrText)
	if err != nil {
		if strings.Trim(addrText, "0123456789abcdefABCDEF.:%") != "" {
			return false, netip.Prefix{}, fmt.Errorf("host names are not supported: %q; write the address in CIDR form", t.text)
		}
		return false, netip.Prefix{}, fmt.Errorf("invalid IP address %q", t.text)
	}
	if addr.Zone() != "" {
		return false, netip.Prefix{}, fmt.Errorf("invalid IP address %q: IPv6 zones are not supported", t.text)
	}
	var bits int
	if hasMask {
		bits, err = strconv.Atoi(bitsText)
		if err != nil || strings.Trim(bitsText, "0123456789") != "" || bits > addr.BitLen() {
			return false, netip.Prefix{}, fmt.Errorf("invalid CIDR mask in address %q", t.text)
		}
	} else {
		maskField := next()
		if maskField == nil {
			return false, netip.Prefix{}, errors.New("end-of-line before netmask specification (specify an address range in CIDR notation, or provide a separate netmask)")
		}
		if len(maskField) > 1 {
			return false, netip.Prefix{}, errors.New("multiple values specified for netmask")
		}
		mask, err := netip.ParseAddr(maskField[0].text)
		if err != nil || mask.Zone() != "" {
			return false, netip.Prefix{}, fmt.Errorf("invalid IP mask %q", maskField[0].text)
		}
		if mask.BitLen() != addr.BitLen() {
			return false, netip.Prefix{}, errors.New("IP address and mask do not match")
		}
		var ok bool
		if bits, ok = hbaMaskBits(mask); !ok {
			return false, netip.Prefix{}, fmt.Errorf("invalid IP mask %q: mink accepts only contiguous masks", maskField[0].text)
		}
	}
	// An IPv4-mapped IPv6 range written in the file matches IPv4 clients, as
	// Match unmaps the client's address.
	if addr.Is4In6() && bits >= 96 {
		addr, bits = addr.Unmap(), bits-96
	}
	return false, netip.PrefixFrom(addr, bits).Masked(), nil
}

// hbaMaskBits returns the length of the netmask mask, and false if its one
// bits are not a prefix (PostgreSQL accepts such masks; netip cannot
// express them, and nobody means them).
func hbaMaskBits(mask netip.Addr) (int, bool) {
	ones := 0
	for _, b := range mask.AsSlice() {
		ones += bits.LeadingZeros8(^b)
		if b != 0xff {
			break
		}
	}
	return ones, netip.PrefixFrom(mask, ones).Masked().Addr() == mask
}

// setOption applies one name=value option after the method.
func (rule *hbaRule) setOption(opt string) error {
	name, value, ok := strings.Cut(opt, "=")
	if !ok {
		return fmt.Errorf("authentication option not in name=value format: %s", opt)
	}
	switch name {
	case "clientcert":
		if rule.conn != hbaHostSSL {
			return errors.New(`clientcert can only be configured for "hostssl" rows`)
		}
		switch value {
		case ClientCertVerifyFull:
		case ClientCertVerifyCA:
			if rule.method == HBACert {
				return errors.New(`clientcert only accepts "verify-full" when using "cert" authentication`)
			}
		default:
			return fmt.Errorf("invalid value for clientcert: %q", value)
		}
		rule.clientCert = value
	case "clientname":
		if rule.conn != hbaHostSSL {
			return errors.New(`clientname can only be configured for "hostssl" rows`)
		}
		switch value {
		case "CN":
		case "DN":
			return errors.New("clientname=DN is not supported: mink compares the certificate's CN with the role")
		default:
			return fmt.Errorf("invalid value for clientname: %q", value)
		}
	case "map":
		return errors.New("user name maps (map=) are not supported: the certificate's CN must be the role")
	default:
		return fmt.Errorf("unrecognized authentication option name: %q", name)
	}
	return nil
}
