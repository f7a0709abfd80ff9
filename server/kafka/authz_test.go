package kafka

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// The test node has no buckets, so a request that passes the privilege
// check gets LEADER_NOT_AVAILABLE for its partitions: that, against
// TOPIC_AUTHORIZATION_FAILED, is what these tests look at.

func produceRequest(topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func (k *kconn) produceCode(req *kmsg.ProduceRequest) int16 {
	k.t.Helper()
	return k.mustDo(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func (k *kconn) fetchCode(topic string) int16 {
	k.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = 11, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return k.mustDo(req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
}

func (k *kconn) listOffsetsCode(topic string) int16 {
	k.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return k.mustDo(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
}

func (k *kconn) leaderEpochCode(topic string) int16 {
	k.t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return k.mustDo(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
}

func (k *kconn) describeConfigsCode(topic string) int16 {
	k.t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	return k.mustDo(req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
}

func (k *kconn) createTopicCode(topic string) int16 {
	k.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 5, 1
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
	req.Topics = append(req.Topics, rt)
	return k.mustDo(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
}

func (k *kconn) deleteTopicCode(topic string) int16 {
	k.t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis = 4, 1000
	req.TopicNames = []string{topic}
	return k.mustDo(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
}

// codes names each code, for failure messages.
func codes(cs map[string]int16) map[string]string {
	out := map[string]string{}
	for k, c := range cs {
		out[k] = "OK"
		if err := kerr.ErrorForCode(c); err != nil {
			out[k] = err.Error()
		}
	}
	return out
}

var (
	lna = kerr.LeaderNotAvailable.Code
	taf = kerr.TopicAuthorizationFailed.Code
)

// A role's privileges on the topic's table decide each request; a GRANT
// or REVOKE holds from the open connection's next request.
func TestKafkaPrivileges(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	k := n.dial()
	if r := k.loginPlain("alice", "pw"); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	type want struct{ produce, fetch, list, epoch, configs, metadata int16 }
	check := func(step, topic string, w want) {
		t.Helper()
		got := want{
			produce: k.produceCode(produceRequest(topic, nil)), fetch: k.fetchCode(topic), list: k.listOffsetsCode(topic),
			epoch: k.leaderEpochCode(topic), configs: k.describeConfigsCode(topic), metadata: k.metadataOf(topic)[topic],
		}
		if got != w {
			t.Fatalf("%s: topic %s: got %+v, want %+v", step, topic, codes(map[string]int16{"produce": got.produce, "fetch": got.fetch,
				"list": got.list, "epoch": got.epoch, "configs": got.configs, "metadata": got.metadata}), w)
		}
	}
	check("no privileges", "t", want{taf, taf, taf, taf, taf, taf})
	if got := k.metadataOf(); len(got) != 0 {
		t.Fatalf("every topic, with no privileges: %v", got)
	}
	n.grant("t", catalog.PrivSelect, false)
	check("SELECT", "t", want{taf, lna, lna, lna, 0, 0})
	if got := k.metadataOf(); len(got) != 1 || got["t"] != 0 {
		t.Fatalf("every topic, with SELECT on t: %v", got)
	}
	n.grant("t", catalog.PrivInsert, false)
	check("SELECT, INSERT", "t", want{lna, lna, lna, lna, 0, 0})
	n.grant("t", catalog.PrivSelect, true)
	check("INSERT", "t", want{lna, taf, taf, taf, taf, 0})
	check("none on t2", "t2", want{taf, taf, taf, taf, taf, taf})
	if got := k.metadataOf("nosuch")["nosuch"]; got != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("an unknown topic: %v", kerr.ErrorForCode(got))
	}

	// Any role may create a topic, and owns it.
	if code := k.createTopicCode("mine"); code != 0 {
		t.Fatalf("alice creates a topic: %v", kerr.ErrorForCode(code))
	}
	var owner catalog.RoleID
	n.cat.Read(func(v *catalog.View) {
		if tb, ok := v.TableNamed("mine"); ok {
			owner = tb.Owner
		}
	})
	if owner != n.alice {
		t.Fatalf("the topic alice created is owned by %d, not alice (%d)", owner, n.alice)
	}
	check("owner", "mine", want{lna, lna, lna, lna, 0, 0})
	// Only the owner or a superuser drops it.
	if code := k.deleteTopicCode("t"); code != taf {
		t.Fatalf("alice deletes t (mink's, alice has INSERT): %v", kerr.ErrorForCode(code))
	}
	// A SQL view reading the topic's table keeps it: POLICY_VIOLATION
	// with the catalog's reason, until the view is dropped.
	var mine catalog.TableID
	n.cat.Read(func(v *catalog.View) {
		tb, _ := v.TableNamed("mine")
		mine = tb.ID
	})
	view := n.propose(catalog.CreateView{Owner: n.alice, Spec: catalog.ViewSpec{Name: "recent", Query: "SELECT * FROM mine",
		Columns: []catalog.ViewColumn{{Name: "v", Type: "text"}}, Relations: []catalog.ViewRelation{{Name: "mine", ID: mine}}}})
	if code := k.deleteTopicCode("mine"); code != kerr.PolicyViolation.Code {
		t.Fatalf("alice deletes her topic, which a view reads: %v, want POLICY_VIOLATION", kerr.ErrorForCode(code))
	}
	n.propose(catalog.DropView{Views: []catalog.TableID{view.Table}})
	if code := k.deleteTopicCode("mine"); code != 0 {
		t.Fatalf("alice deletes her topic: %v", kerr.ErrorForCode(code))
	}
	super := n.dial()
	if r := super.loginPlain("mink", "secret"); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if code := k.createTopicCode("hers"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := super.deleteTopicCode("hers"); code != 0 {
		t.Fatalf("the superuser deletes alice's topic: %v", kerr.ErrorForCode(code))
	}
	if got := super.metadataOf(); len(got) != 2 {
		t.Fatalf("left: %v", got)
	}

	// A role that is dropped while connected can do nothing more.
	n.grant("t", catalog.PrivInsert, true)
	n.propose(catalog.DropRole{Role: n.alice})
	check("dropped role", "t", want{taf, taf, taf, taf, taf, taf})
}

// OffsetCommit, OffsetFetch and OffsetDelete need SELECT on the topic;
// the group itself is anyone's.
func TestKafkaGroupPrivileges(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	n.groups.committed = []string{"t", "t2"}
	n.grant("t", catalog.PrivSelect, false)
	n.grant("t2", catalog.PrivInsert, false) // INSERT alone does not read offsets
	k := n.dial()
	if r := k.loginPlain("alice", "pw"); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g", -1
	for _, topic := range []string{"t", "t2", "nosuch"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 3
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	got := map[string]int16{}
	for _, rt := range k.mustDo(commit).(*kmsg.OffsetCommitResponse).Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if len(got) != 3 || got["t"] != 0 || got["nosuch"] != 0 || got["t2"] != taf {
		t.Fatalf("commit: %v", codes(got))
	}
	var passed []string
	for _, rt := range n.groups.last().(*kmsg.OffsetCommitRequest).Topics {
		passed = append(passed, rt.Topic)
	}
	if !slices.Equal(passed, []string{"t", "nosuch"}) {
		t.Fatalf("the coordinator was asked to commit %v", passed)
	}

	fetchOffsets := func(version int16, topics ...string) map[string][2]int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = version, "g"
		if topics != nil {
			req.Topics = []kmsg.OffsetFetchRequestTopic{}
		}
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: topic, Partitions: []int32{0}})
		}
		out := map[string][2]int64{}
		for _, rt := range k.mustDo(req).(*kmsg.OffsetFetchResponse).Topics {
			out[rt.Topic] = [2]int64{rt.Partitions[0].Offset, int64(rt.Partitions[0].ErrorCode)}
		}
		return out
	}
	if got := fetchOffsets(7, "t", "t2"); len(got) != 2 || got["t"] != [2]int64{5, 0} || got["t2"] != [2]int64{-1, int64(taf)} {
		t.Fatalf("offsets of t and t2: %v", got)
	}
	if got := fetchOffsets(7); len(got) != 1 || got["t"] != [2]int64{5, 0} {
		t.Fatalf("every committed offset: %v", got)
	}

	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g"
	for _, topic := range []string{"t", "t2"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		del.Topics = append(del.Topics, rt)
	}
	resp := k.mustDo(del).(*kmsg.OffsetDeleteResponse)
	got = map[string]int16{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if got["t2"] != taf {
		t.Fatalf("offset delete: %v", codes(got))
	}
	if d := n.groups.last().(*kmsg.OffsetDeleteRequest); len(d.Topics) != 1 || d.Topics[0].Topic != "t" {
		t.Fatalf("the coordinator was asked to delete %+v", d.Topics)
	}
}
