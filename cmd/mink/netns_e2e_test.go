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
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// netns is one network namespace with its two links. Addresses are /30
// networks: the host side is .1, the namespace side .2.
type netns struct {
	t    *testing.T
	name string
	// etcdHost is the host's address on the etcd link; the forwarder to
	// etcd listens there. svcHost and svcNS are the two ends of the
	// service link: the namespace's node listens on svcNS, the host's
	// nodes on svcHost so that the namespace reaches them.
	etcdHost, svcHost, svcNS string
	etcdLink, svcLink        string // the namespace-side link names
}

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
	k := os.Getpid()%200 + 20
	ns := &netns{
		t:        t,
		name:     fmt.Sprintf("minktest-%d", os.Getpid()),
		etcdHost: fmt.Sprintf("10.213.%d.1", k),
		svcHost:  fmt.Sprintf("10.214.%d.1", k),
		svcNS:    fmt.Sprintf("10.214.%d.2", k),
		etcdLink: fmt.Sprintf("mke%d", os.Getpid()),
		svcLink:  fmt.Sprintf("mks%d", os.Getpid()),
	}
	ns.ip("netns", "add", ns.name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns.name).Run() })
	for _, l := range []struct{ link, host string }{{ns.etcdLink, ns.etcdHost}, {ns.svcLink, ns.svcHost}} {
		hostEnd := l.link + "h"
		inNS := strings.TrimSuffix(l.host, ".1") + ".2"
		ns.ip("link", "add", hostEnd, "type", "veth", "peer", "name", l.link)
		ns.ip("link", "set", l.link, "netns", ns.name)
		ns.ip("addr", "add", l.host+"/30", "dev", hostEnd)
		ns.ip("link", "set", hostEnd, "up")
		ns.ip("-n", ns.name, "addr", "add", inNS+"/30", "dev", l.link)
		ns.ip("-n", ns.name, "link", "set", l.link, "up")
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
func (ns *netns) cut(link string) { ns.ip("-n", ns.name, "link", "set", link, "down") }

// heal brings the link back; its address and route come back with it.
func (ns *netns) heal(link string) { ns.ip("-n", ns.name, "link", "set", link, "up") }

// forward listens on host:0 and copies every connection to target both
// ways; it returns the address it listens on. It closes with the test.
func forward(t *testing.T, host, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
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
			// A cut resets connections: their errors are expected.
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return ln.Addr().String()
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
// address and reaching etcd through a forwarder on its etcd link.
func (n *node) putInNetns(ns *netns, etcdEndpoints string) {
	n.t.Helper()
	u, err := url.Parse(strings.Split(etcdEndpoints, ",")[0])
	if err != nil {
		n.t.Fatal(err)
	}
	fwd := forward(n.t, ns.etcdHost, u.Host)
	n.moveToHost(ns.svcNS)
	for i := 1; i < len(n.args); i++ {
		if n.args[i-1] == "--etcd-endpoints" {
			n.args[i] = "http://" + fwd
		}
	}
	n.wrap = []string{"ip", "netns", "exec", ns.name}
}
