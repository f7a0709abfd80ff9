package main

// Network cuts for the partition tests (partition_e2e_test.go): a node runs
// in a network namespace the test creates, joined to the host by two veth
// pairs. One pair carries only the node's etcd traffic (through a
// forwarder in the test process to the test's etcd), the other everything
// else: its clients, its peers and theirs to it. Taking a link down cuts
// that traffic and nothing else; the namespace shares the file system, so
// a local-directory object store stays reachable.

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// netns is one network namespace with its links, each a veth pair on a /30
// network: the host side is .1, the namespace side .2.
type netns struct {
	t    *testing.T
	name string
	// etcd carries only the node's etcd traffic (a forwarder to the test's
	// etcd listens on its host side), s3 only its object-store traffic
	// (likewise), svc everything else: the namespace's node listens on
	// svc.ns, the host's nodes on svc.host so that the namespace reaches
	// them.
	etcd, s3, svc vethLink
}

var netnsSeq atomic.Int64

// vethLink is one veth pair: the namespace-side link's name and the two
// addresses.
type vethLink struct{ name, host, ns string }

// newNetns creates a namespace and its links; cleanup deletes them. It
// needs root and iproute2 (`ip netns`); without them the test fails, since
// the scenario it guards would go untested.
func newNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the partition tests create network namespaces: run them as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("the partition tests need iproute2's ip: apt-get install iproute2")
	}
	// Names and networks differ per namespace: the kernel removes a
	// deleted namespace's links in the background.
	seq := netnsSeq.Add(1)
	id := fmt.Sprintf("%d%d", os.Getpid()%100000, seq%10)
	k := (os.Getpid()+int(seq)*37)%200 + 20
	link := func(kind string, net int) vethLink {
		return vethLink{name: "mk" + kind + id,
			host: fmt.Sprintf("10.%d.%d.1", net, k), ns: fmt.Sprintf("10.%d.%d.2", net, k)}
	}
	ns := &netns{t: t, name: "minktest-" + id,
		etcd: link("e", 213), s3: link("o", 215), svc: link("s", 214)}
	ns.ip("netns", "add", ns.name)
	links := []vethLink{ns.etcd, ns.s3, ns.svc}
	t.Cleanup(func() {
		for _, l := range links {
			exec.Command("ip", "link", "del", l.name+"h").Run()
		}
		exec.Command("ip", "netns", "del", ns.name).Run()
	})
	for _, l := range links {
		hostEnd := l.name + "h"
		ns.ip("link", "add", hostEnd, "type", "veth", "peer", "name", l.name)
		ns.ip("link", "set", l.name, "netns", ns.name)
		ns.ip("addr", "add", l.host+"/30", "dev", hostEnd)
		ns.ip("link", "set", hostEnd, "up")
		ns.ip("-n", ns.name, "addr", "add", l.ns+"/30", "dev", l.name)
		ns.ip("-n", ns.name, "link", "set", l.name, "up")
	}
	ns.ip("-n", ns.name, "link", "set", "lo", "up")
	return ns
}

func (ns *netns) ip(args ...string) {
	ns.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		ns.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// cut takes the namespace side of a link down: packets either way are
// dropped, established connections hang, new ones find no route.
func (ns *netns) cut(l vethLink) { ns.ip("-n", ns.name, "link", "set", l.name, "down") }

// heal brings the link back; its address and route come back with it.
func (ns *netns) heal(l vethLink) { ns.ip("-n", ns.name, "link", "set", l.name, "up") }

// forwarder listens on an address and copies every connection to a
// target both ways. Freezing it holds every byte in both directions (new
// connections are accepted and held too) until it thaws: a partition of
// that one path, without a namespace. It closes with the test.
type forwarder struct {
	addr string
	mu   sync.Mutex
	// thawed is closed while bytes flow, open while frozen.
	thawed chan struct{}
}

// forward starts a forwarder on host:0 to target and returns its address.
func forward(t *testing.T, host, target string) string { return newForwarder(t, host, target).addr }

func newForwarder(t *testing.T, host, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{addr: ln.Addr().String(), thawed: make(chan struct{})}
	close(f.thawed)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		f.thaw()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			open = append(open, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); f.pipe(out, in) }()
			go func() { defer wg.Done(); f.pipe(in, out) }()
		}
	}()
	return f
}

// pipe copies src to dst, each chunk only while thawed. A cut resets
// connections: their errors are expected and end the pipe.
func (f *forwarder) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			thawed := f.thawed
			f.mu.Unlock()
			<-thawed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *forwarder) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
		f.thawed = make(chan struct{})
	default:
	}
}

func (f *forwarder) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

// moveToHost makes node n listen on host instead of 127.0.0.1 (the same
// ports), so that a namespace reaches it. The address is a test network's,
// reached only by the test: --insecure keeps trust authentication there.
func (n *node) moveToHost(host string) {
	n.args = append(n.args, "--insecure")
	for i := 1; i < len(n.args); i++ {
		switch n.args[i-1] {
		case "--pg-addr", "--flight-addr", "--admin-addr", "--kafka-addr":
			n.args[i] = strings.Replace(n.args[i], "127.0.0.1:", host+":", 1)
		}
	}
	n.admin = strings.Replace(n.admin, "127.0.0.1:", host+":", 1)
}

// putInNetns makes node n run in namespace ns, listening on its service
// address and reaching etcd (and the S3 endpoint, if it has one) through
// forwarders on their own links.
func (n *node) putInNetns(ns *netns, etcdEndpoints string) {
	n.t.Helper()
	hostOf := func(endpoint string) string {
		u, err := url.Parse(endpoint)
		if err != nil {
			n.t.Fatal(err)
		}
		return u.Host
	}
	etcd := forward(n.t, ns.etcd.host, hostOf(strings.Split(etcdEndpoints, ",")[0]))
	n.moveToHost(ns.svc.ns)
	for i := 1; i < len(n.args); i++ {
		switch n.args[i-1] {
		case "--etcd-endpoints":
			n.args[i] = "http://" + etcd
		case "--s3-endpoint":
			n.args[i] = "http://" + forward(n.t, ns.s3.host, hostOf(n.args[i]))
		}
	}
	n.wrap = []string{"ip", "netns", "exec", ns.name}
}
