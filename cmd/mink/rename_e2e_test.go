package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A rename of a table and of a column, ALTER COLUMN … SET NOT NULL and
// … TYPE, DROP COLUMN, and a CREATE TABLE … AS, across a three-node cluster: a node
// that was killed with SIGKILL before them sees the new names (and
// refuses what the ALTER COLUMNs refuse) when it comes back, every node reads the same rows under
// them, and a Kafka consumer group that committed offsets on the old topic
// name goes on from them under the new one, its records' JSON under the
// new column name and without the dropped column.
func TestRenameTableCluster(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	ctx := context.Background()
	first, err := c.nodes[0].pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	if _, err := first.Exec(ctx, "CREATE TABLE ev (id bigint, gone text, v text) WITH (buckets = 3)"); err != nil {
		t.Fatal(err)
	}
	c.waitServed(c.nodes[0], "ev", 60*time.Second)
	if _, err := first.Exec(ctx, "INSERT INTO ev SELECT i, 'g' || i, 'v' || i FROM generate_series(1, 90) AS g(i)"); err != nil {
		t.Fatal(err)
	}

	// A consumer group reads the first 30 records of topic ev and commits.
	group := func(topic string) *kgo.Client {
		return kafkaClient(t, c.kafkaSeeds(c.nodes[2]), kgo.ConsumerGroup("rename-group"), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	}
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	reader := group("ev")
	next := map[int32]int64{}
	for read := 0; read < 30; {
		fs := reader.PollRecords(pollCtx, 30-read)
		if pollCtx.Err() != nil {
			t.Fatalf("the group read %d records of ev", read)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			next[r.Partition] = r.Offset + 1
		})
	}
	if err := reader.CommitUncommittedOffsets(pollCtx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	reader.Close()

	down := c.nodes[2]
	down.kill()
	for _, q := range []string{
		"ALTER TABLE ev RENAME TO ev_2024",
		"ALTER TABLE ev_2024 RENAME COLUMN v TO label",
		"ALTER TABLE ev_2024 ALTER COLUMN label SET NOT NULL",
		"ALTER TABLE ev_2024 ALTER COLUMN label TYPE varchar(8)",
		"ALTER TABLE ev_2024 DROP COLUMN gone",
		"CREATE TABLE ev AS SELECT id FROM ev_2024 WHERE id <= 10",
	} {
		if _, err := first.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// count is what node n answers for SELECT count(*) FROM table, or -1.
	count := func(n *node, table string) int64 {
		conn, err := n.pg(ctx)
		if err != nil {
			return -1
		}
		defer conn.Close(ctx)
		var got int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&got); err != nil {
			return -1
		}
		return got
	}
	waitFor(t, 30*time.Second, "node 2 reads both tables under their new names", func() bool {
		return count(c.nodes[1], "ev_2024") == 90 && count(c.nodes[1], "ev") == 10
	})
	c.restart(down)
	down.waitHealthy()
	waitFor(t, 60*time.Second, "the restarted node 3 reads both tables under their new names", func() bool {
		return count(down, "ev_2024") == 90 && count(down, "ev") == 10
	})
	conn, err := down.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var sum int64
	if err := conn.QueryRow(ctx, "SELECT sum(id) FROM ev_2024 WHERE label = 'v' || id").Scan(&sum); err != nil || sum != 90*91/2 {
		t.Fatalf("node 3: sum of ev_2024's ids %d, %v; want %d", sum, err, 90*91/2)
	}
	// The ALTER COLUMNs made while it was down hold on node 3 too.
	for q, code := range map[string]string{
		"INSERT INTO ev_2024 VALUES (91, NULL)":        "23502",
		"INSERT INTO ev_2024 VALUES (91, 'nine char')": "22001",
		"INSERT INTO ev_2024 VALUES (91, 'g', 'v')":    "42601",
		"SELECT gone FROM ev_2024":                     "42703",
	} {
		var pgErr *pgconn.PgError
		if _, err := conn.Exec(ctx, q); !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("node 3: %s: %v, want SQLSTATE %s", q, err, code)
		}
	}
	// The dropped column is gone from node 3's rows: id and label are
	// left, and a row written there after the drop reads back.
	if _, err := conn.Exec(ctx, "INSERT INTO ev_2024 VALUES (91, 'v91')"); err != nil {
		t.Fatalf("node 3: insert after the drop: %v", err)
	}
	rows, err := conn.Query(ctx, "SELECT * FROM ev_2024 WHERE id IN (5, 91) ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(vals))
	}
	if rows.Close(); rows.Err() != nil || strings.Join(got, " ") != "[5 v5] [91 v91]" {
		t.Fatalf("node 3: SELECT * after the drop: %v (%v), want [5 v5] [91 v91]", got, rows.Err())
	}
	var typ string
	if err := conn.QueryRow(ctx, "SELECT format_type(atttypid, atttypmod) || ' ' || attnotnull FROM pg_attribute WHERE attrelid = 'ev_2024'::regclass AND attname = 'label'").Scan(&typ); err != nil || typ != "character varying(8) true" {
		t.Errorf("node 3: column label is %q (%v), want character varying(8) true", typ, err)
	}

	// The group goes on under the new topic name from its commits.
	reader = group("ev_2024")
	defer reader.Close()
	firstSeen := map[int32]int64{}
	rest := 0
	for rest < 61 {
		fs := reader.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			t.Fatalf("the group read %d of the 61 records after its commit under the new name", rest)
		}
		fs.EachRecord(func(r *kgo.Record) {
			rest++
			if !strings.Contains(string(r.Value), `"label":`) || strings.Contains(string(r.Value), "gone") {
				t.Errorf("record value %s, want the column under its new name label, and not the dropped column", r.Value)
			}
			if _, ok := firstSeen[r.Partition]; !ok {
				firstSeen[r.Partition] = r.Offset
			}
		})
	}
	for p, off := range next {
		if firstSeen[p] != off {
			t.Errorf("partition %d resumed at offset %d, want the committed %d", p, firstSeen[p], off)
		}
	}
	if rest != 61 {
		t.Errorf("read %d records after the commit, want 61 (60, and the one node 3 wrote)", rest)
	}
}
