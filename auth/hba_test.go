package auth

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func mustParseHBA(t testing.TB, text string) *HBA {
	t.Helper()
	h, err := ParseHBA("hba.conf", strings.NewReader(text))
	if err != nil {
		t.Fatalf("ParseHBA(%q): %v", text, err)
	}
	return h
}

// TestParseHBAErrors checks every complaint ParseHBA can make, with the line
// it names.
func TestParseHBAErrors(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string // the whole error
	}{
		{"# ok\n\nhots all all all trust\n", `line 3 of configuration file "hba.conf": invalid connection type "hots"`},
		{"host,hostssl all all all trust", `line 1 of configuration file "hba.conf": multiple values specified for connection type (specify exactly one connection type per line)`},
		{"hostgssenc all all all trust", `line 1 of configuration file "hba.conf": connection type "hostgssenc" is not supported: mink has no GSSAPI encryption`},
		{"hostnogssenc all all all trust", `line 1 of configuration file "hba.conf": connection type "hostnogssenc" is not supported: mink has no GSSAPI encryption`},
		{"host", `line 1 of configuration file "hba.conf": end-of-line before database specification`},
		{"host all # all all trust", `line 1 of configuration file "hba.conf": end-of-line before role specification`},
		{"host all all", `line 1 of configuration file "hba.conf": end-of-line before IP address specification`},
		{"host all all 10.0.0.0/8,::1/128 trust", `line 1 of configuration file "hba.conf": multiple values specified for host address (specify one address range per line)`},
		{"host all all all", `line 1 of configuration file "hba.conf": end-of-line before authentication method`},
		{"local all all", `line 1 of configuration file "hba.conf": end-of-line before authentication method`},
		{"host all all all trust,reject", `line 1 of configuration file "hba.conf": multiple values specified for authentication type (specify exactly one authentication type per line)`},
		{"host all all all trusted", `line 1 of configuration file "hba.conf": invalid authentication method "trusted"`},
		{"host all all all md5", `line 1 of configuration file "hba.conf": authentication method "md5" is not supported: mink keeps only SCRAM-SHA-256 verifiers; use scram-sha-256`},
		{"host all all all password", `line 1 of configuration file "hba.conf": authentication method "password" is not supported: mink never accepts a clear-text password on the Postgres listener; use scram-sha-256`},
		{"host all all all ldap ldapserver=x", `line 1 of configuration file "hba.conf": authentication method "ldap" is not supported by mink (use scram-sha-256, cert, trust or reject)`},
		{"local all all peer", `line 1 of configuration file "hba.conf": authentication method "peer" is not supported by mink (use scram-sha-256, cert, trust or reject)`},
		{"host all all all cert", `line 1 of configuration file "hba.conf": cert authentication is only supported on hostssl connections`},
		{"local all all cert", `line 1 of configuration file "hba.conf": cert authentication is only supported on hostssl connections`},
		{`host all all "10.0.0.0/8 trust`, `line 1 of configuration file "hba.conf": unterminated quoted string`},

		// Database and user fields.
		{"host @dbs all all trust", `line 1 of configuration file "hba.conf": "@dbs": including names from a file (@file) is not supported; list the names, separated by commas`},
		{"host all alice,@admins all trust", `line 1 of configuration file "hba.conf": "@admins": including names from a file (@file) is not supported; list the names, separated by commas`},
		{`host all /^a.*$ all trust`, `line 1 of configuration file "hba.conf": "/^a.*$": regular expressions are not supported; quote the name to match it literally`},
		{"host all @ all trust", `line 1 of configuration file "hba.conf": "@": including names from a file (@file) is not supported; list the names, separated by commas`},
		{"host all + all trust", `line 1 of configuration file "hba.conf": "+" must be followed by a role name`},

		// Addresses.
		{"host all all samehost trust", `line 1 of configuration file "hba.conf": "samehost" is not supported: write the server's addresses or networks in CIDR form`},
		{"host all all samenet trust", `line 1 of configuration file "hba.conf": "samenet" is not supported: write the server's addresses or networks in CIDR form`},
		{"host all all localhost trust", `line 1 of configuration file "hba.conf": host names are not supported: "localhost"; write the address in CIDR form`},
		{"host all all .example.com trust", `line 1 of configuration file "hba.conf": host names are not supported: ".example.com"; write the address in CIDR form`},
		{`host all all "all" trust`, `line 1 of configuration file "hba.conf": host names are not supported: "all"; write the address in CIDR form`},
		{"host all all 10.0.0.256/32 trust", `line 1 of configuration file "hba.conf": invalid IP address "10.0.0.256/32"`},
		{"host all all 10.0.0.0/33 trust", `line 1 of configuration file "hba.conf": invalid CIDR mask in address "10.0.0.0/33"`},
		{"host all all 10.0.0.0/ trust", `line 1 of configuration file "hba.conf": invalid CIDR mask in address "10.0.0.0/"`},
		{"host all all 10.0.0.0/-1 trust", `line 1 of configuration file "hba.conf": invalid CIDR mask in address "10.0.0.0/-1"`},
		{"host all all ::1/129 trust", `line 1 of configuration file "hba.conf": invalid CIDR mask in address "::1/129"`},
		{"host all all fe80::1%eth0/128 trust", `line 1 of configuration file "hba.conf": invalid IP address "fe80::1%eth0/128": IPv6 zones are not supported`},
		{"host all all 10.0.0.0", `line 1 of configuration file "hba.conf": end-of-line before netmask specification (specify an address range in CIDR notation, or provide a separate netmask)`},
		{"host all all 10.0.0.0 255.0.0.0,255.255.0.0 trust", `line 1 of configuration file "hba.conf": multiple values specified for netmask`},
		{"host all all 10.0.0.0 trust", `line 1 of configuration file "hba.conf": invalid IP mask "trust"`},
		{"host all all 10.0.0.0 ffff:: trust", `line 1 of configuration file "hba.conf": IP address and mask do not match`},
		{"host all all 10.0.0.0 255.0.255.0 trust", `line 1 of configuration file "hba.conf": invalid IP mask "255.0.255.0": mink accepts only contiguous masks`},

		// Options.
		{"hostssl all all all trust clientcert", `line 1 of configuration file "hba.conf": authentication option not in name=value format: clientcert`},
		{"hostssl all all all trust ldapport=389", `line 1 of configuration file "hba.conf": unrecognized authentication option name: "ldapport"`},
		{"host all all all trust clientcert=verify-full", `line 1 of configuration file "hba.conf": clientcert can only be configured for "hostssl" rows`},
		{"hostssl all all all trust clientcert=1", `line 1 of configuration file "hba.conf": invalid value for clientcert: "1"`},
		{"hostssl all all all cert clientcert=verify-ca", `line 1 of configuration file "hba.conf": clientcert only accepts "verify-full" when using "cert" authentication`},
		{"host all all all trust clientname=CN", `line 1 of configuration file "hba.conf": clientname can only be configured for "hostssl" rows`},
		{"hostssl all all all cert clientname=DN", `line 1 of configuration file "hba.conf": clientname=DN is not supported: mink compares the certificate's CN with the role`},
		{"hostssl all all all cert clientname=cn", `line 1 of configuration file "hba.conf": invalid value for clientname: "cn"`},
		{"hostssl all all all cert map=certmap", `line 1 of configuration file "hba.conf": user name maps (map=) are not supported: the certificate's CN must be the role`},

		// A record continued over lines is named by its first line.
		{"host all all all trust\nhost all \\\n all \\\n all trusty\n", `line 2 of configuration file "hba.conf": invalid authentication method "trusty"`},
		// Every wrong line is reported.
		{"host all all all trust\nhots all all all trust\nhost all all all md6\n", "line 2 of configuration file \"hba.conf\": invalid connection type \"hots\"\nline 3 of configuration file \"hba.conf\": invalid authentication method \"md6\""},
	} {
		_, err := ParseHBA("hba.conf", strings.NewReader(tc.text))
		if err == nil {
			t.Errorf("ParseHBA(%q) = nil error, want %s", tc.text, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("ParseHBA(%q):\n got %s\nwant %s", tc.text, err, tc.want)
		}
		var perr *HBAParseError
		if !errors.As(err, &perr) {
			t.Errorf("ParseHBA(%q) = %T, want an *HBAParseError", tc.text, err)
		}
	}
}

func TestParseHBATooLong(t *testing.T) {
	long := "host all all all trust " + strings.Repeat("x", hbaMaxLine)
	if _, err := ParseHBA("hba.conf", strings.NewReader("# fine\n"+long)); err == nil || err.Error() != `line 2 of configuration file "hba.conf": line too long` {
		t.Errorf("a long line: %v", err)
	}
	continued := "# fine\n" + strings.Repeat(strings.Repeat("x", 1000)+"\\\n", hbaMaxLine/1000+1)
	if _, err := ParseHBA("hba.conf", strings.NewReader(continued)); err == nil || err.Error() != `line 2 of configuration file "hba.conf": line too long` {
		t.Errorf("a long continued line: %v", err)
	}
}

// TestParseHBARules checks what valid lines parse to.
func TestParseHBARules(t *testing.T) {
	all := []hbaNameRule{{kind: hbaAll}}
	for _, tc := range []struct {
		text string
		want []hbaRule
	}{
		{"", nil},
		{"# only a comment\n   \n\t# another\n", nil},
		{"local all all trust", []hbaRule{{line: 1, conn: hbaLocal, databases: all, users: all, allAddrs: true, method: HBATrust}}},
		{"host all all all scram-sha-256", []hbaRule{{line: 1, conn: hbaHost, databases: all, users: all, allAddrs: true, method: HBASCRAM}}},
		{"hostssl all all all reject", []hbaRule{{line: 1, conn: hbaHostSSL, databases: all, users: all, allAddrs: true, method: HBAReject}}},
		{"hostnossl all all all reject", []hbaRule{{line: 1, conn: hbaHostNoSSL, databases: all, users: all, allAddrs: true, method: HBAReject}}},
		// Host bits are masked off, as PostgreSQL compares under the mask.
		{"host all all 10.1.2.3/8 trust", []hbaRule{{line: 1, conn: hbaHost, databases: all, users: all, addrs: netip.MustParsePrefix("10.0.0.0/8"), method: HBATrust}}},
		{"host all all 10.1.2.3 255.255.0.0 trust", []hbaRule{{line: 1, conn: hbaHost, databases: all, users: all, addrs: netip.MustParsePrefix("10.1.0.0/16"), method: HBATrust}}},
		{"host all all 0.0.0.0 0.0.0.0 trust", []hbaRule{{line: 1, conn: hbaHost, databases: all, users: all, addrs: netip.MustParsePrefix("0.0.0.0/0"), method: HBATrust}}},
		{"host all all fd00:: ffff:ffff:: trust", []hbaRule{{line: 1, conn: hbaHost, databases: all, users: all, addrs: netip.MustParsePrefix("fd00::/32"), method: HBATrust}}},
		{"host all all ::ffff:10.0.0.0/104 trust", []hbaRule{{line: 1, conn: hbaHost, databases: all, users: all, addrs: netip.MustParsePrefix("10.0.0.0/8"), method: HBATrust}}},
		// cert implies clientcert=verify-full, which may also be written.
		{"hostssl all all all cert clientcert=verify-full clientname=CN", []hbaRule{{line: 1, conn: hbaHostSSL, databases: all, users: all, allAddrs: true, method: HBACert, clientCert: ClientCertVerifyFull}}},
		{"hostssl all all all scram-sha-256 clientcert=verify-ca", []hbaRule{{line: 1, conn: hbaHostSSL, databases: all, users: all, allAddrs: true, method: HBASCRAM, clientCert: ClientCertVerifyCA}}},
		// Options may be a comma list, as in PostgreSQL.
		{"hostssl all all all trust clientcert=verify-ca,clientcert=verify-full", []hbaRule{{line: 1, conn: hbaHostSSL, databases: all, users: all, allAddrs: true, method: HBATrust, clientCert: ClientCertVerifyFull}}},
		// Keywords, names, groups, quoting and comma lists, including a list
		// that goes on after a blank following its comma.
		{`host sameuser,samerole,samegroup,replication,"all",mink, "a b" all,"+g",+g,sameuser,"@f","/x" all trust # comment`, []hbaRule{{
			line: 1, conn: hbaHost,
			databases: []hbaNameRule{{kind: hbaSameUser}, {kind: hbaSameRole}, {kind: hbaSameRole}, {kind: hbaReplication}, {name: "all"}, {name: "mink"}, {name: "a b"}},
			users:     []hbaNameRule{{kind: hbaAll}, {name: "+g"}, {kind: hbaGroup, name: "g"}, {name: "sameuser"}, {name: "@f"}, {name: "/x"}},
			allAddrs:  true, method: HBATrust,
		}}},
		// Quotes: a doubled quote inside quotes is one quote, quoting part
		// of a token makes the whole a literal, and # is literal inside.
		{`host "a""b",x"y z"w,"#c" "" all trust`, []hbaRule{{
			line: 1, conn: hbaHost,
			databases: []hbaNameRule{{name: `a"b`}, {name: "xy zw"}, {name: "#c"}},
			users:     []hbaNameRule{{name: ""}},
			allAddrs:  true, method: HBATrust,
		}}},
		// Continuations (also inside a comment), CRLF line ends, and line
		// numbers that count physical lines.
		{"# a comment \\\n that goes on\r\nhost all \\\nall all trust\r\n\nhost all all all reject", []hbaRule{
			{line: 3, conn: hbaHost, databases: all, users: all, allAddrs: true, method: HBATrust},
			{line: 6, conn: hbaHost, databases: all, users: all, allAddrs: true, method: HBAReject},
		}},
	} {
		h := mustParseHBA(t, tc.text)
		if len(h.rules) != len(tc.want) {
			t.Errorf("ParseHBA(%q): %d rules, want %d: %+v", tc.text, len(h.rules), len(tc.want), h.rules)
			continue
		}
		for i := range tc.want {
			if got, want := h.rules[i], tc.want[i]; !hbaRulesEqual(got, want) {
				t.Errorf("ParseHBA(%q) rule %d:\n got %+v\nwant %+v", tc.text, i, got, want)
			}
		}
	}
}

func hbaRulesEqual(a, b hbaRule) bool {
	namesEqual := func(x, y []hbaNameRule) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return a.line == b.line && a.conn == b.conn && a.allAddrs == b.allAddrs && a.addrs == b.addrs &&
		a.method == b.method && a.clientCert == b.clientCert &&
		namesEqual(a.databases, b.databases) && namesEqual(a.users, b.users)
}

// TestParseHBAExample parses the example file of docs/hba.md.
func TestParseHBAExample(t *testing.T) {
	f, err := os.Open("testdata/hba.conf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ParseHBA(f.Name(), f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r    HBARequest
		want HBAMatch
	}{
		{HBARequest{Listener: ListenerPostgres, TLS: true, Database: "mink", User: "mink", Addr: netip.MustParseAddr("127.0.0.1")}, HBAMatch{Method: HBATrust, Line: 4}},
		{HBARequest{Listener: ListenerPostgres, TLS: true, Database: "mink", User: "etl", Addr: netip.MustParseAddr("10.1.2.3")}, HBAMatch{Method: HBACert, ClientCert: ClientCertVerifyFull, Line: 7}},
		{HBARequest{Listener: ListenerFlight, TLS: true, User: "alice", Addr: netip.MustParseAddr("10.1.2.3")}, HBAMatch{Method: HBASCRAM, Line: 10}},
		{HBARequest{Listener: ListenerPostgres, TLS: false, Database: "mink", User: "alice", Addr: netip.MustParseAddr("10.1.2.3")}, HBAMatch{Method: HBAReject, Line: 12}},
	} {
		if got, ok := h.Match(tc.r); !ok || got != tc.want {
			t.Errorf("Match(%+v) = %+v, %v; want %+v", tc.r, got, ok, tc.want)
		}
	}
}

// TestHBAMatch checks which rule wins for each kind of connection.
func TestHBAMatch(t *testing.T) {
	const rules = `
# line 2: a role literally named "all" may use a password from anywhere
host    all           "all"          all              scram-sha-256
hostssl all           +admins        10.0.0.0/8       cert
hostssl all           +admins        all              reject
hostssl sales,"hr db" alice,bob      10.0.0.0/8       scram-sha-256
hostnossl all         all            192.168.0.0/16   reject
host    all           all            192.168.0.0 255.255.0.0 trust
host    sameuser      all            172.16.0.0/12    trust
host    samerole      all            172.16.0.0/12    scram-sha-256
host    all           all            2001:db8::/32    trust
host    all           all            ::1/128          trust
local   all           all                             trust
hostssl analytics     all            all              scram-sha-256 clientcert=verify-ca
`
	h := mustParseHBA(t, rules)
	memberOf := func(role, group string) bool {
		return (role == "carol" && group == "admins") || (role == "dave" && group == "staff")
	}
	ip := netip.MustParseAddr
	mapped := func(s string) netip.Addr {
		// What Go's net package reports for an IPv4 client of a dual-stack listener.
		a, _ := netip.AddrFromSlice(net.ParseIP(s).To16())
		return a
	}
	for _, tc := range []struct {
		name string
		r    HBARequest
		line int // 0: no rule matches
	}{
		{"quoted all is a role name", HBARequest{Listener: ListenerPostgres, Database: "x", User: "all", Addr: ip("203.0.113.1")}, 3},
		{"unquoted all would have matched anyone", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: ip("203.0.113.1")}, 0},
		{"group member over TLS in range", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "x", User: "carol", Addr: ip("10.9.9.9"), MemberOf: memberOf}, 4},
		{"a role is a member of itself", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "x", User: "admins", Addr: ip("10.9.9.9")}, 4},
		{"first match wins: group member out of range", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "sales", User: "carol", Addr: ip("203.0.113.1"), MemberOf: memberOf}, 5},
		{"group member elsewhere", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "x", User: "carol", Addr: ip("192.168.1.1"), MemberOf: memberOf}, 5},
		{"no MemberOf: not a member", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "x", User: "carol", Addr: ip("192.168.1.1")}, 8},
		{"comma lists", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "hr db", User: "bob", Addr: ip("10.9.9.9")}, 6},
		{"comma lists: other database", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "hr", User: "bob", Addr: ip("10.9.9.9")}, 0},
		{"database names on a listener without databases", HBARequest{Listener: ListenerFlight, TLS: true, Database: "sales", User: "bob", Addr: ip("10.9.9.9")}, 0},
		{"hostnossl skips TLS", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "x", User: "eve", Addr: ip("192.168.1.1")}, 8},
		{"hostnossl takes plain", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: ip("192.168.1.1")}, 7},
		{"IPv4-mapped IPv6 client", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: mapped("192.168.1.1")}, 7},
		{"IPv4-mapped IPv6 client, TLS", HBARequest{Listener: ListenerKafka, TLS: true, User: "eve", Addr: mapped("192.168.1.1")}, 8},
		{"sameuser", HBARequest{Listener: ListenerPostgres, Database: "eve", User: "eve", Addr: ip("172.16.0.1")}, 9},
		{"samerole", HBARequest{Listener: ListenerPostgres, Database: "staff", User: "dave", Addr: ip("172.16.0.1"), MemberOf: memberOf}, 10},
		{"samerole, not a member", HBARequest{Listener: ListenerPostgres, Database: "staff", User: "eve", Addr: ip("172.16.0.1"), MemberOf: memberOf}, 0},
		{"sameuser and samerole need a database", HBARequest{Listener: ListenerAdmin, User: "eve", Addr: ip("172.16.0.1")}, 0},
		{"IPv6 range", HBARequest{Listener: ListenerFlight, User: "eve", Addr: ip("2001:db8:1::5")}, 11},
		{"IPv6 zone ignored", HBARequest{Listener: ListenerFlight, User: "eve", Addr: ip("2001:db8:1::5%eth0")}, 11},
		{"IPv6 loopback", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: ip("::1")}, 12},
		{"IPv4 loopback: local never matches", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: ip("127.0.0.1")}, 0},
		{"IPv6 outside every range", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: ip("2001:db9::1")}, 0},
		{"an IPv4 range does not match IPv6", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve", Addr: ip("::c0a8:101")}, 0},
		{"no address", HBARequest{Listener: ListenerPostgres, Database: "x", User: "eve"}, 0},
		{"clientcert", HBARequest{Listener: ListenerPostgres, TLS: true, Database: "analytics", User: "eve", Addr: ip("203.0.113.1")}, 14},
	} {
		got, ok := h.Match(tc.r)
		if tc.line == 0 {
			if ok {
				t.Errorf("%s: Match = line %d %+v, want no match", tc.name, got.Line, got)
			}
			continue
		}
		if !ok || got.Line != tc.line {
			t.Errorf("%s: Match = line %d (%v), want line %d", tc.name, got.Line, ok, tc.line)
		}
	}

	got, _ := h.Match(HBARequest{Listener: ListenerPostgres, TLS: true, Database: "analytics", User: "eve", Addr: ip("203.0.113.1")})
	if want := (HBAMatch{Method: HBASCRAM, ClientCert: ClientCertVerifyCA, Line: 14}); got != want {
		t.Errorf("clientcert rule: Match = %+v, want %+v", got, want)
	}
}

func TestHBADeniedErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{HBARequest{Listener: ListenerPostgres, Database: "db", User: "u", Addr: netip.MustParseAddr("::ffff:10.0.0.1")}.NoEntryError(),
			`no pg_hba.conf entry for host "10.0.0.1", user "u", database "db", no encryption`},
		{HBARequest{Listener: ListenerFlight, TLS: true, User: "u", Addr: netip.MustParseAddr("2001:db8::1")}.NoEntryError(),
			`no pg_hba.conf entry for host "2001:db8::1", user "u", listener "flight", SSL encryption`},
		{HBARequest{Listener: ListenerPostgres, TLS: true, Database: "db", User: "u", Addr: netip.MustParseAddr("10.0.0.1")}.RejectError(),
			`pg_hba.conf rejects connection for host "10.0.0.1", user "u", database "db", SSL encryption`},
		{HBARequest{Listener: ListenerAdmin, User: "u"}.RejectError(),
			`pg_hba.conf rejects connection for host "[unknown]", user "u", listener "admin", no encryption`},
	} {
		if tc.err.Error() != tc.want {
			t.Errorf("got %s\nwant %s", tc.err, tc.want)
		}
		if !errors.Is(tc.err, ErrHBADenied) {
			t.Errorf("%v is not ErrHBADenied", tc.err)
		}
	}
}

// FuzzParseHBA checks that no input panics, and that a file that parses
// can be matched against.
func FuzzParseHBA(f *testing.F) {
	for _, seed := range []string{
		"host all all all trust\n",
		"hostssl all +admins 10.0.0.0/8 cert clientcert=verify-full\n",
		"host sales,\"hr db\" alice, bob 192.168.0.0 255.255.0.0 scram-sha-256 # c\n",
		"local all all trust\nhostnossl all all ::1/128 reject\r\n",
		"host all \\\n all ::ffff:10.0.0.0/104 trust",
		"host \"a\"\"b\" \"all\" fd00:: ffff:: trust",
		"hostssl samerole,sameuser all all scram-sha-256 clientcert=verify-ca clientname=CN",
	} {
		f.Add(seed)
	}
	if b, err := os.ReadFile("testdata/hba.conf"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		h, err := ParseHBA("fuzz.conf", strings.NewReader(text))
		if err != nil {
			if h != nil {
				t.Fatalf("ParseHBA returned both %v and an HBA", err)
			}
			return
		}
		for _, r := range []HBARequest{
			{Listener: ListenerPostgres, TLS: true, Database: "all", User: "all", Addr: netip.MustParseAddr("10.0.0.1")},
			{Listener: ListenerKafka, User: "g", Addr: netip.MustParseAddr("::ffff:10.0.0.1"), MemberOf: func(string, string) bool { return true }},
		} {
			if m, ok := h.Match(r); ok && (m.Line < 1 || m.Line > strings.Count(text, "\n")+1) {
				t.Fatalf("Match = line %d of a %d-line file", m.Line, strings.Count(text, "\n")+1)
			}
		}
	})
}
