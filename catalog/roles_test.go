package catalog_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/minkdb/mink/catalog"
)

// applyOK applies records in order and fails the test on a rejection.
func applyAll(t *testing.T, v *catalog.View, recs ...catalog.Record) []catalog.Outcome {
	t.Helper()
	var outs []catalog.Outcome
	for _, r := range recs {
		outs = append(outs, catalog.Apply(v, v.Index+1, r))
		if err := catalog.CheckInvariants(v); err != nil {
			t.Fatalf("after %+v: %v", r, err)
		}
	}
	return outs
}

func TestRolesAndPrivileges(t *testing.T) {
	v := catalog.NewView()
	outs := applyAll(t, v,
		catalog.CreateRole{Name: "mink", Login: true, Superuser: true, Verifier: testVerifier},
		catalog.CreateRole{Name: "analysts"},
		catalog.CreateRole{Name: "alice", Login: true, Verifier: testVerifier},
		catalog.CreateRole{Name: "bob", Login: true},
	)
	for _, o := range outs {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	mink, analysts, alice, bob := outs[0].Role, outs[1].Role, outs[2].Role, outs[3].Role
	if mink != catalog.BootstrapRole || analysts != catalog.FirstRoleID || alice != catalog.FirstRoleID+1 {
		t.Fatalf("role ids %d %d %d, want %d %d %d", mink, analysts, alice, catalog.BootstrapRole, catalog.FirstRoleID, catalog.FirstRoleID+1)
	}
	out := applyAll(t, v, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}, Owner: bob})
	tid := out[0].Table
	tbl := v.Tables[tid]
	if got := v.TablePrivileges(bob, tbl); got != catalog.PrivAll {
		t.Fatalf("owner's privileges %q", got.Letters())
	}
	if got := v.TablePrivileges(mink, tbl); got != catalog.PrivAll {
		t.Fatalf("superuser's privileges %q", got.Letters())
	}
	if got := v.TablePrivileges(alice, tbl); got != 0 {
		t.Fatalf("alice before any grant: %q", got.Letters())
	}
	// A grant to a group reaches its members, transitively; one to PUBLIC
	// reaches everyone.
	applyAll(t, v,
		catalog.GrantTable{Tables: []catalog.TableID{tid}, Grantee: analysts, Privileges: catalog.PrivSelect | catalog.PrivInsert},
		catalog.GrantRole{Role: analysts, Member: alice},
		catalog.GrantTable{Tables: []catalog.TableID{tid}, Grantee: catalog.Public, Privileges: catalog.PrivTruncate},
	)
	if got := v.TablePrivileges(alice, tbl).Letters(); got != "arD" {
		t.Fatalf("alice, member of analysts: %q, want arD", got)
	}
	applyAll(t, v, catalog.GrantTable{Tables: []catalog.TableID{tid}, Grantee: analysts, Privileges: catalog.PrivInsert, Revoke: true})
	if got := v.TablePrivileges(alice, tbl).Letters(); got != "rD" {
		t.Fatalf("after REVOKE INSERT: %q, want rD", got)
	}
	// Membership cycles are refused.
	if o := applyAll(t, v, catalog.GrantRole{Role: alice, Member: analysts})[0]; !errors.Is(o.Err, catalog.ErrInvalid) {
		t.Fatalf("cycle: %v", o.Err)
	}
	// A role that owns or holds privileges cannot be dropped; the
	// bootstrap superuser never.
	for _, c := range []struct {
		role catalog.RoleID
		want error
	}{{bob, catalog.ErrInUse}, {analysts, catalog.ErrInUse}, {mink, catalog.ErrInUse}} {
		if o := applyAll(t, v, catalog.DropRole{Role: c.role})[0]; !errors.Is(o.Err, c.want) {
			t.Errorf("drop role %d: %v, want %v", c.role, o.Err, c.want)
		}
	}
	applyAll(t, v,
		catalog.SetTableOwner{Table: tid, Owner: alice},
		catalog.GrantTable{Tables: []catalog.TableID{tid}, Grantee: analysts, Privileges: catalog.PrivAll, Revoke: true},
	)
	if o := applyAll(t, v, catalog.DropRole{Role: analysts})[0]; o.Err != nil {
		t.Fatal(o.Err)
	}
	if r := v.Roles[alice]; r.MemberOf != nil {
		t.Fatalf("alice still a member of %v after the drop", r.MemberOf)
	}
	// Renames keep ids: ownership follows.
	applyAll(t, v, catalog.AlterRole{Role: alice, Name: "alicia"})
	if r, ok := v.RoleByName("alicia"); !ok || r.ID != tbl.Owner {
		t.Fatal("rename lost the role or its table")
	}
	// Names: taken, reserved, a bad verifier.
	for _, c := range []struct {
		rec  catalog.Record
		want error
	}{
		{catalog.CreateRole{Name: "bob"}, catalog.ErrExists},
		{catalog.CreateRole{Name: "public"}, catalog.ErrInvalid},
		{catalog.CreateRole{Name: "pg_monitor"}, catalog.ErrInvalid},
		{catalog.CreateRole{Name: "carol", Verifier: "md5abc"}, catalog.ErrInvalid},
		{catalog.AlterRole{Role: bob, Name: "alicia"}, catalog.ErrExists},
		{catalog.AlterRole{Role: mink, Superuser: new(bool)}, catalog.ErrInUse},
		{catalog.SetClusterKey{Key: []byte("short")}, catalog.ErrInvalid},
	} {
		if o := applyAll(t, v, c.rec)[0]; !errors.Is(o.Err, c.want) {
			t.Errorf("%+v: %v, want %v", c.rec, o.Err, c.want)
		}
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	applyAll(t, v, catalog.SetClusterKey{Key: key})
	if o := applyAll(t, v, catalog.SetClusterKey{Key: key})[0]; o.Err != nil {
		t.Fatalf("the same key again: %v", o.Err)
	}
	if o := applyAll(t, v, catalog.SetClusterKey{Key: []byte("abcdef0123456789abcdef0123456789")})[0]; !errors.Is(o.Err, catalog.ErrExists) {
		t.Fatalf("another key: %v", o.Err)
	}
	// The roles survive a snapshot.
	data, err := catalog.EncodeView(v)
	if err != nil {
		t.Fatal(err)
	}
	back, err := catalog.DecodeView(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.TablePrivileges(bob, back.Tables[tid]).Letters(); got != "D" {
		t.Fatalf("bob after the round trip: %q, want D (PUBLIC's TRUNCATE)", got)
	}
	if string(back.ClusterKey) != string(key) || back.NextRoleID != v.NextRoleID {
		t.Fatal("cluster key or next role id lost in the snapshot")
	}
}

// Membership is transitive, through chains longer than the walk's stack
// buffers, and a grant that would close a cycle through them is refused.
func TestIsMemberChains(t *testing.T) {
	v := catalog.NewView()
	var ids []catalog.RoleID
	for i := range 40 {
		out := applyAll(t, v, catalog.CreateRole{Name: fmt.Sprintf("r%d", i)})[0]
		ids = append(ids, out.Role)
	}
	// r0 ∈ r1 ∈ … ∈ r39, and r0 ∈ r20 too (a diamond).
	for i := 0; i+1 < len(ids); i++ {
		applyAll(t, v, catalog.GrantRole{Role: ids[i+1], Member: ids[i]})
	}
	applyAll(t, v, catalog.GrantRole{Role: ids[20], Member: ids[0]})
	if !v.IsMember(ids[0], ids[39]) || !v.IsMember(ids[5], ids[30]) {
		t.Fatal("a member of a member is not a member")
	}
	if v.IsMember(ids[39], ids[0]) || v.IsMember(ids[30], ids[5]) {
		t.Fatal("membership runs backwards")
	}
	if o := applyAll(t, v, catalog.GrantRole{Role: ids[0], Member: ids[39]})[0]; !errors.Is(o.Err, catalog.ErrInvalid) {
		t.Fatalf("a cycle through 40 roles: %v, want ErrInvalid", o.Err)
	}
}
