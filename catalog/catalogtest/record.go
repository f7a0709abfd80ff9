package catalogtest

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
)

// parseObject parses [key@]start-end; without a key, the object gets the key
// "s<stream>/e<epoch>/<start>-<end>".
func parseObject(a *recordArgs, o string, stream catalog.StreamID, epoch uint64) catalog.StreamObject {
	o, minute, hasAt := strings.Cut(o, "~")
	key, rng, hasKey := strings.Cut(o, "@")
	if !hasKey {
		rng = key
	}
	start, end, _ := strings.Cut(rng, "-")
	so := catalog.StreamObject{Start: mustUint(a, start), End: mustUint(a, end)}
	if hasAt {
		so.At = time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)).Add(time.Duration(mustUint(a, minute)) * time.Minute)
	}
	so.Size = int64(so.End-so.Start) * 100
	if !hasKey {
		key = fmt.Sprintf("s%d/e%d/%d-%d", stream, epoch, so.Start, so.End)
	}
	so.Key = key
	return so
}

// ParseRecord parses one record in the script syntax:
//
//	register-node node=1 expect=0 [pg=… flight=… admin=…]
//	register-coordinator node=1 node-epoch=1 expect=0
//	create-table name=t cols=(id bigint not null, v text default 'x') [pk=(id)]  [schema=5]
//	             [partition-by=dt] [buckets=2] [bucket-key=(id)] [opts=(k=v, …)] [owner=16384]
//	drop-table table=1
//	create-partition table=1 value=2024-01-01
//	drop-partition table=1 partition=5
//	lead-bucket bucket=2 node=1 coord=1                      (coordinator form)
//	lead-bucket bucket=2 node=1 expect=1 node-epoch=1        (renewal form)
//	open-stream stream=2 epoch=1 node=1 node-epoch=1
//	close-stream stream=2 epoch=1
//	commit-stream-objects stream=2 epoch=1 objects=(0-10, key@10-20)
//	compact-stream-objects stream=2 epoch=1 replaces=(0-10, 10-15) with=c@0-15
//	commit-wal-trim node=1 node-epoch=1 seq=5 [by=1 by-epoch=1] (default: by the WAL's own node and epoch)
//	commit-kv-snapshot bucket=2 leader-epoch=1 id=1 offset=10 [manifest=m]
//	commit-tiering-round table=1 coord=1 offsets=(2:10, 3:20) lake=7 seq=1 [at=RFC3339]
//	trim-stream stream=2 start=10 coord=1
//	truncate-table table=1 [restart=true]
//	commit-group-offsets group=g coord=1 offsets=(events/0=5, events/1=7~2:meta)
//	delete-group-offsets group=g coord=1 [all=true] [partitions=(events/0, events/1)]
//	allocate-sequence table=1 col=id count=10 [epoch=1]
//	add-column table=1 col=(c integer [not null] [default 7]) [missing=7]  (no missing=: NULL)
//	set-column-default table=1 col=v [default='y']                         (no default=: drop it)
//	create-role name=alice [login=true] [superuser=true] [password=pw | verifier=text]
//	alter-role role=16384 [name=bob] [login=true|false] [superuser=true|false] [password=pw | verifier=text]
//	drop-role role=16384
//	grant-role role=16384 member=16385 [revoke=true]
//	grant-table tables=(1, 4) grantee=16384|public privileges=(SELECT, INSERT | ALL | NONE) [revoke=true]
//	set-table-owner table=1 owner=16384
//	rename-table table=1 name=u
//	create-schema name=s [owner=16384]
//	drop-schema schema=5 [cascade=true]
//	rename-schema schema=5 name=s2
//	set-relation-schema relation=1 schema=5                              (schema=0: public)
//	rename-column table=1 from=a to=b
//	set-column-not-null table=1 col=v [not-null=true]                    (no not-null=: drop it)
//	set-column-type table=1 col=v type=varchar(40)
//	create-view name=v cols=(a bigint, b text) query=q [rels=(t=1, u=4)] [owner=16384] [replace=true]
//	drop-view views=(7, 8)
//	rename-view view=7 name=w
//	set-cluster-key key=<hex>
//
// A column is "name type [not null] [serial | generated always | generated
// by default] [default <literal>]"; an empty name or type is written `""`. password=pw
// stores a verifier of pw with a fresh salt (an empty pw: no password), so a
// script never prints it; verifier=text stores text as the verifier.
//
// A group offset without ~ has leader epoch -1; :text sets its metadata.
//
// An object without key@ gets the key "s<stream>/e<epoch>/<start>-<end>";
// a suffix ~M sets its time At to 2025-01-01T00:00Z plus M minutes (given in
// a +01:00 zone, which the state machine stores as UTC).
func ParseRecord(line string) (catalog.Record, error) {
	cmd, args, err := datadriven.ParseLine(line)
	if err != nil {
		return nil, err
	}
	a := &recordArgs{vals: map[string][]string{}}
	for _, arg := range args {
		if _, dup := a.vals[arg.Key]; dup {
			return nil, fmt.Errorf("argument %q given twice", arg.Key)
		}
		a.vals[arg.Key] = arg.Vals
	}
	var rec catalog.Record
	switch cmd {
	case "register-node":
		rec = catalog.RegisterNode{Node: catalog.NodeID(a.uint("node")), ExpectEpoch: a.uint("expect"),
			Addrs: catalog.Addrs{PG: a.str("pg"), Flight: a.str("flight"), Admin: a.str("admin")}}
	case "register-coordinator":
		rec = catalog.RegisterCoordinator{Node: catalog.NodeID(a.uint("node")), NodeEpoch: a.uint("node-epoch"), ExpectEpoch: a.uint("expect")}
	case "create-table":
		spec := catalog.TableSpec{Name: a.str("name"), Schema: catalog.SchemaID(a.uint("schema")), PrimaryKey: a.list("pk"), PartitionBy: a.str("partition-by"),
			Buckets: int(a.int("buckets")), BucketKey: a.list("bucket-key")}
		for _, c := range a.list("cols") {
			col, err := parseColumn(c)
			if err != nil {
				return nil, err
			}
			spec.Columns = append(spec.Columns, col)
		}
		for _, kv := range a.list("opts") {
			k, v, _ := strings.Cut(kv, "=")
			if spec.Options == nil {
				spec.Options = map[string]string{}
			}
			spec.Options[k] = v
		}
		rec = catalog.CreateTable{Spec: spec, Owner: catalog.RoleID(a.uint("owner"))}
	case "drop-table":
		rec = catalog.DropTable{Table: catalog.TableID(a.uint("table"))}
	case "create-partition":
		rec = catalog.CreatePartition{Table: catalog.TableID(a.uint("table")), Value: a.str("value")}
	case "drop-partition":
		rec = catalog.DropPartition{Table: catalog.TableID(a.uint("table")), Partition: catalog.PartitionID(a.uint("partition"))}
	case "lead-bucket":
		rec = catalog.LeadBucket{Bucket: catalog.BucketID(a.uint("bucket")), Node: catalog.NodeID(a.uint("node")), CoordinatorEpoch: a.uint("coord"),
			ExpectLeaderEpoch: a.uint("expect"), NodeEpoch: a.uint("node-epoch")}
	case "open-stream":
		rec = catalog.OpenStream{Stream: catalog.StreamID(a.uint("stream")), Epoch: a.uint("epoch"), Node: catalog.NodeID(a.uint("node")), NodeEpoch: a.uint("node-epoch")}
	case "close-stream":
		rec = catalog.CloseStream{Stream: catalog.StreamID(a.uint("stream")), Epoch: a.uint("epoch")}
	case "commit-stream-objects":
		r := catalog.CommitStreamObjects{Stream: catalog.StreamID(a.uint("stream")), Epoch: a.uint("epoch")}
		for _, o := range a.list("objects") {
			r.Objects = append(r.Objects, parseObject(a, o, r.Stream, r.Epoch))
		}
		rec = r
	case "compact-stream-objects":
		r := catalog.CompactStreamObjects{Stream: catalog.StreamID(a.uint("stream")), Epoch: a.uint("epoch")}
		for _, o := range a.list("replaces") {
			r.Replaces = append(r.Replaces, parseObject(a, o, r.Stream, r.Epoch))
		}
		r.With = parseObject(a, a.str("with"), r.Stream, r.Epoch)
		rec = r
	case "commit-wal-trim":
		r := catalog.CommitWALTrim{Node: catalog.NodeID(a.uint("node")), NodeEpoch: a.uint("node-epoch"), TrimSeq: a.uint("seq"),
			By: catalog.NodeID(a.uint("by")), ByEpoch: a.uint("by-epoch")}
		if _, ok := a.vals["by"]; !ok {
			r.By = r.Node
		}
		if _, ok := a.vals["by-epoch"]; !ok {
			r.ByEpoch = r.NodeEpoch
		}
		rec = r
	case "commit-kv-snapshot":
		r := catalog.CommitKVSnapshot{Bucket: catalog.BucketID(a.uint("bucket")), LeaderEpoch: a.uint("leader-epoch"),
			SnapshotID: a.uint("id"), LogOffset: a.uint("offset"), Manifest: a.str("manifest")}
		if _, ok := a.vals["manifest"]; !ok {
			r.Manifest = fmt.Sprintf("kv/b%d/snap-%d", r.Bucket, r.SnapshotID)
		}
		rec = r
	case "trim-stream":
		rec = catalog.TrimStream{Stream: catalog.StreamID(a.uint("stream")), Start: a.uint("start"), CoordinatorEpoch: a.uint("coord")}
	case "commit-tiering-round":
		r := catalog.CommitTieringRound{Table: catalog.TableID(a.uint("table")), CoordinatorEpoch: a.uint("coord"),
			LakeSnapshotID: a.int("lake"), LakeSequence: a.uint("seq"), At: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
		if at := a.str("at"); at != "" {
			if r.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
				return nil, err
			}
		}
		for _, kv := range a.list("offsets") {
			b, off, _ := strings.Cut(kv, ":")
			if r.Offsets == nil {
				r.Offsets = map[catalog.BucketID]uint64{}
			}
			r.Offsets[catalog.BucketID(mustUint(a, b))] = mustUint(a, off)
		}
		rec = r
	case "truncate-table":
		rec = catalog.TruncateTable{Table: catalog.TableID(a.uint("table")), RestartSequences: a.str("restart") == "true"}
	case "commit-group-offsets":
		r := catalog.CommitGroupOffsets{Group: a.str("group"), CoordinatorEpoch: a.uint("coord")}
		for _, o := range a.list("offsets") {
			p, rest, _ := strings.Cut(o, "=")
			rest, meta, _ := strings.Cut(rest, ":")
			off, epoch, hasEpoch := strings.Cut(rest, "~")
			gp := parseGroupPartition(a, p)
			g := catalog.GroupOffset{Topic: gp.Topic, Partition: gp.Partition, Offset: mustInt(a, off), LeaderEpoch: -1, Metadata: meta}
			if hasEpoch {
				g.LeaderEpoch = int32(mustInt(a, epoch))
			}
			r.Offsets = append(r.Offsets, g)
		}
		rec = r
	case "allocate-sequence":
		rec = catalog.AllocateSequence{Table: catalog.TableID(a.uint("table")), Column: a.str("col"),
			Count: a.uint("count"), Epoch: a.uint("epoch")}
	case "add-column":
		r := catalog.AddColumn{Table: catalog.TableID(a.uint("table"))}
		if r.Column, err = parseColumn(a.str("col")); err != nil {
			return nil, err
		}
		if _, ok := a.vals["missing"]; ok {
			m := a.str("missing")
			r.Column.Missing = &m
		}
		rec = r
	case "rename-table":
		rec = catalog.RenameTable{Table: catalog.TableID(a.uint("table")), Name: a.str("name")}
	case "create-view":
		spec := catalog.ViewSpec{Name: a.str("name"), Schema: catalog.SchemaID(a.uint("schema")), Query: a.str("query")}
		for _, c := range a.list("cols") {
			name, typ, _ := strings.Cut(c, " ")
			spec.Columns = append(spec.Columns, catalog.ViewColumn{Name: name, Type: typ})
		}
		for _, r := range a.list("rels") {
			name, id, _ := strings.Cut(r, "=")
			spec.Relations = append(spec.Relations, catalog.ViewRelation{Name: name, ID: catalog.TableID(mustUint(a, id))})
		}
		rec = catalog.CreateView{Spec: spec, Owner: catalog.RoleID(a.uint("owner")), Replace: a.bool("replace")}
	case "drop-view":
		var r catalog.DropView
		for _, id := range a.list("views") {
			if id != "" {
				r.Views = append(r.Views, catalog.TableID(mustUint(a, id)))
			}
		}
		rec = r
	case "rename-column":
		rec = catalog.RenameColumn{Table: catalog.TableID(a.uint("table")), From: a.str("from"), To: a.str("to")}
	case "create-schema":
		rec = catalog.CreateSchema{Name: a.str("name"), Owner: catalog.RoleID(a.uint("owner"))}
	case "drop-schema":
		rec = catalog.DropSchema{Schema: catalog.SchemaID(a.uint("schema")), Cascade: a.bool("cascade")}
	case "rename-schema":
		rec = catalog.RenameSchema{Schema: catalog.SchemaID(a.uint("schema")), Name: a.str("name")}
	case "set-relation-schema":
		rec = catalog.SetRelationSchema{Relation: catalog.TableID(a.uint("relation")), Schema: catalog.SchemaID(a.uint("schema"))}
	case "rename-view":
		rec = catalog.RenameView{View: catalog.TableID(a.uint("view")), Name: a.str("name")}
	case "set-column-not-null":
		rec = catalog.SetColumnNotNull{Table: catalog.TableID(a.uint("table")), Column: a.str("col"), NotNull: a.bool("not-null")}
	case "set-column-type":
		rec = catalog.SetColumnType{Table: catalog.TableID(a.uint("table")), Column: a.str("col"), Type: a.str("type")}
	case "drop-column":
		rec = catalog.DropColumn{Table: catalog.TableID(a.uint("table")), Column: a.str("col")}
	case "set-sequence":
		rec = catalog.SetSequence{Table: catalog.TableID(a.uint("table")), Column: a.str("col"), Last: int64(a.uint("last"))}
	case "restore-column":
		rec = catalog.RestoreColumn{Table: catalog.TableID(a.uint("table")), Position: int(a.uint("position"))}
	case "set-column-default":
		rec = catalog.SetColumnDefault{Table: catalog.TableID(a.uint("table")), Column: a.str("col"), Default: a.str("default")}
	case "create-role":
		r := catalog.CreateRole{Name: a.str("name"), Login: a.bool("login"), Superuser: a.bool("superuser")}
		r.Verifier = a.verifier()
		rec = r
	case "alter-role":
		r := catalog.AlterRole{Role: catalog.RoleID(a.uint("role")), Name: a.str("name"),
			Login: a.optBool("login"), Superuser: a.optBool("superuser")}
		if _, ok := a.vals["password"]; ok {
			v := a.verifier()
			r.Verifier = &v
		} else if _, ok := a.vals["verifier"]; ok {
			v := a.verifier()
			r.Verifier = &v
		}
		rec = r
	case "drop-role":
		rec = catalog.DropRole{Role: catalog.RoleID(a.uint("role"))}
	case "grant-role":
		rec = catalog.GrantRole{Role: catalog.RoleID(a.uint("role")), Member: catalog.RoleID(a.uint("member")), Revoke: a.bool("revoke")}
	case "grant-table":
		r := catalog.GrantTable{Grantee: a.grantee("grantee"), Revoke: a.bool("revoke")}
		for _, id := range a.list("tables") {
			if id == "" { // tables=()
				continue
			}
			r.Tables = append(r.Tables, catalog.TableID(mustUint(a, id)))
		}
		for _, name := range a.list("privileges") {
			if name == "ALL" {
				r.Privileges |= catalog.PrivAll
				continue
			}
			if name == "NONE" {
				continue
			}
			p, ok := catalog.PrivilegeByName(name)
			if !ok {
				return nil, fmt.Errorf("unknown privilege %q", name)
			}
			r.Privileges |= p
		}
		rec = r
	case "set-table-owner":
		rec = catalog.SetTableOwner{Table: catalog.TableID(a.uint("table")), Owner: catalog.RoleID(a.uint("owner"))}
	case "set-cluster-key":
		key, err := hex.DecodeString(a.str("key"))
		if err != nil {
			return nil, fmt.Errorf("set-cluster-key: key: %w", err)
		}
		rec = catalog.SetClusterKey{Key: key}
	case "delete-group-offsets":
		r := catalog.DeleteGroupOffsets{Group: a.str("group"), CoordinatorEpoch: a.uint("coord"), All: a.str("all") == "true"}
		for _, p := range a.list("partitions") {
			r.Partitions = append(r.Partitions, parseGroupPartition(a, p))
		}
		rec = r
	default:
		return nil, fmt.Errorf("unknown record %q", cmd)
	}
	if a.err != nil {
		return nil, a.err
	}
	for k := range a.vals {
		if !a.used[k] {
			return nil, fmt.Errorf("%s does not take argument %q", cmd, k)
		}
	}
	return rec, nil
}

// parseGroupPartition parses topic/partition.
func parseGroupPartition(a *recordArgs, s string) catalog.GroupPartition {
	topic, p, _ := strings.Cut(s, "/")
	return catalog.GroupPartition{Topic: topic, Partition: int32(mustInt(a, p))}
}

func mustInt(a *recordArgs, s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n
}

type recordArgs struct {
	vals map[string][]string
	used map[string]bool
	err  error
}

func (a *recordArgs) list(key string) []string {
	if a.used == nil {
		a.used = map[string]bool{}
	}
	a.used[key] = true
	return a.vals[key]
}

func (a *recordArgs) str(key string) string {
	vals := a.list(key)
	if len(vals) > 1 && a.err == nil {
		a.err = fmt.Errorf("argument %q takes one value, got %v", key, vals)
	}
	if len(vals) == 0 {
		return ""
	}
	return vals[0]
}

func (a *recordArgs) uint(key string) uint64 {
	if s := a.str(key); s != "" {
		return mustUint(a, s)
	}
	return 0
}

func (a *recordArgs) int(key string) int64 {
	s := a.str(key)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n
}

func mustUint(a *recordArgs, s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n
}

// parseColumn parses "name type [not null] [serial | generated always |
// generated by default] [default <literal>]".
func parseColumn(s string) (catalog.Column, error) {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return catalog.Column{}, fmt.Errorf("column %q: want name and type", s)
	}
	c := catalog.Column{Name: fields[0], Type: fields[1]}
	rest := fields[2:]
	if len(rest) >= 2 && rest[0] == "not" && rest[1] == "null" {
		c.NotNull = true
		rest = rest[2:]
	}
	switch {
	case len(rest) >= 1 && rest[0] == "serial":
		c.Sequence, rest = catalog.SequenceSerial, rest[1:]
	case len(rest) >= 2 && rest[0] == "generated" && rest[1] == "always":
		c.Sequence, rest = catalog.SequenceAlways, rest[2:]
	case len(rest) >= 3 && rest[0] == "generated" && rest[1] == "by" && rest[2] == "default":
		c.Sequence, rest = catalog.SequenceByDefault, rest[3:]
	}
	if len(rest) >= 2 && rest[0] == "default" {
		c.Default = strings.Join(rest[1:], " ")
		rest = nil
	}
	if len(rest) > 0 {
		return catalog.Column{}, fmt.Errorf("column %q: cannot parse %v", s, rest)
	}
	if c.Name == `""` {
		c.Name = ""
	}
	if c.Type == `""` {
		c.Type = ""
	}
	return c, nil
}

// bool parses a true/false argument; absent is false.
func (a *recordArgs) bool(key string) bool {
	b := a.optBool(key)
	return b != nil && *b
}

// optBool parses a true/false argument; absent is nil.
func (a *recordArgs) optBool(key string) *bool {
	if _, ok := a.vals[key]; !ok {
		a.list(key)
		return nil
	}
	b, err := strconv.ParseBool(a.str(key))
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("argument %q: %w", key, err)
	}
	return &b
}

// verifier returns the SCRAM verifier of password=<pw> (a fresh salt each
// time, so scripts never print it), or verifier=<text> as given (to test the
// rejection of one that is not a verifier); "" when neither is given or
// password is empty.
func (a *recordArgs) verifier() string {
	if raw := a.str("verifier"); raw != "" {
		return raw
	}
	pw := a.str("password")
	if pw == "" {
		return ""
	}
	v, err := auth.NewVerifier(pw)
	if err != nil && a.err == nil {
		a.err = err
	}
	return v.String()
}

// grantee parses a role id or "public".
func (a *recordArgs) grantee(key string) catalog.RoleID {
	if s := a.str(key); s == "public" {
		return catalog.Public
	} else if s != "" {
		return catalog.RoleID(mustUint(a, s))
	}
	return 0
}
