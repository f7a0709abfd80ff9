package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/internal/flightwire"
)

// Flight SQL on a three-node cluster with passwords: a role's statements on
// a node that does not lead the table's bucket read and write the leader's
// bucket as that role (the forwarded requests carry it), and a privilege
// it lacks is refused with 42501 there too.
func TestFlightSQLCluster(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(pwFile, []byte("root pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	store := "file://" + t.TempDir()
	var nodes []*node
	for i := 1; i <= 3; i++ {
		n := newNode(t, nodeOpts{nodeID: i, etcd: endpoints, leaseTTL: "3s",
			extra: []string{"--superuser-password-file", pwFile, "--object-store", store, "--coordinator-tick", "300ms"}})
		n.start()
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	ctx := context.Background()
	clients := map[*node]*flightsql.Client{}
	for _, n := range nodes {
		c, err := flightsql.NewClient(n.flightAddr(), nil, nil, flightwire.DialOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[n] = c
	}
	var root context.Context
	waitFor(t, 60*time.Second, "mink logs in over Flight SQL", func() bool {
		var err error
		root, err = clients[nodes[0]].Client.AuthenticateBasicToken(ctx, "mink", "root pw")
		return err == nil
	})
	for _, sql := range []string{
		"CREATE TABLE cl (id bigint NOT NULL, name text) WITH (buckets = 1)",
		"CREATE ROLE alice LOGIN PASSWORD 'alice pw'",
		"GRANT SELECT, INSERT ON cl TO alice",
		"CREATE TABLE hidden (id bigint NOT NULL) WITH (buckets = 1)",
	} {
		if _, err := clients[nodes[0]].ExecuteUpdate(root, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// The leader of cl's bucket, and an entry node that does not lead it.
	var leader, entry *node
	waitFor(t, 30*time.Second, "cl's bucket led", func() bool {
		info, err := clients[nodes[0]].Client.GetFlightInfo(root, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cl"}})
		if err != nil || len(info.Endpoint) != 1 {
			return false
		}
		var meta flightwire.EndpointMeta
		if json.Unmarshal(info.Endpoint[0].AppMetadata, &meta) != nil || meta.Leader == 0 {
			return false
		}
		leader = nodes[meta.Leader-1]
		return true
	})
	for _, n := range nodes {
		if n != leader {
			entry = n
			break
		}
	}
	c := clients[entry]
	alice, err := c.Client.AuthenticateBasicToken(ctx, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	var inserted int64
	waitFor(t, 30*time.Second, "alice's INSERT through the entry node", func() bool {
		inserted, err = c.ExecuteUpdate(alice, "INSERT INTO cl VALUES (1, 'one'), (2, 'two')")
		return err == nil
	})
	if inserted != 2 {
		t.Fatalf("alice's INSERT: %d rows", inserted)
	}
	info, err := c.Execute(alice, "SELECT id, name FROM cl ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ep := range info.Endpoint {
		r, err := c.DoGet(alice, ep.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			rec := r.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				got = append(got, fmt.Sprintf("%s=%s", rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i)))
			}
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if strings.Join(got, " ") != "1=one 2=two" {
		t.Fatalf("alice reads %v through %s (leader %s)", got, entry.flightAddr(), leader.flightAddr())
	}
	_, err = c.Execute(alice, "SELECT * FROM hidden")
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "(SQLSTATE 42501)") {
		t.Fatalf("alice reads hidden: %v, want PermissionDenied with SQLSTATE 42501", err)
	}
}
