package icebergrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server/icebergrest"
	"github.com/minkdb/mink/tiering"
)

// fakeMeta is a metadata view the test changes as the log would.
type fakeMeta struct {
	mu sync.Mutex
	v  *catalog.View
}

func (m *fakeMeta) Read(fn func(v *catalog.View)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(m.v)
}

func (m *fakeMeta) update(fn func(v *catalog.View)) { m.Read(fn) }

const (
	storeURL = "file:///var/mink/objects"
	alice    = catalog.RoleID(50)
)

// metadataJSON is a lake metadata version of table id whose snapshots are
// snapshots (sequence numbers 1, 2, …), the last one current.
func metadataJSON(id catalog.TableID, snapshots ...int64) []byte {
	var snaps, current string
	current = "-1"
	for i, s := range snapshots {
		if i > 0 {
			snaps += ","
		}
		snaps += fmt.Sprintf(`{"snapshot-id":%d,"sequence-number":%d,"timestamp-ms":1700000000000,"schema-id":0,
			"manifest-list":"%s/lake/%d/metadata/snap-%d.avro","summary":{"operation":"append"}}`, s, i+1, storeURL, id, s)
		current = fmt.Sprint(s)
	}
	refs := "{}"
	if len(snapshots) > 0 {
		refs = fmt.Sprintf(`{"main":{"snapshot-id":%s,"type":"branch"}}`, current)
	}
	return fmt.Appendf(nil, `{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1",
		"location":"%s/lake/%d","last-sequence-number":%d,"last-updated-ms":1700000000000,"last-column-id":3,
		"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[
			{"id":1,"name":"id","required":true,"type":"long"},
			{"id":2,"name":"__bucket","required":true,"type":"long"},
			{"id":3,"name":"__offset","required":true,"type":"long"}]}],
		"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,
		"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],
		"properties":{"mink.table-id":"%d"},"current-snapshot-id":%s,"snapshots":[%s],
		"snapshot-log":[],"metadata-log":[],"refs":%s}`, storeURL, id, len(snapshots), id, current, snaps, refs)
}

type fixture struct {
	meta  *fakeMeta
	store *objstore.Mem
	srv   *httptest.Server
}

// newFixture: table events (id 1) is tiered: its lake has v1 (no
// snapshot), v2 (snapshot 100, recorded in the log) and v3 (snapshot 200,
// a lake commit the log has not recorded). fresh (2) has no round yet,
// truncated (3) was truncated after its round, cold (4) has tiering off.
// The superuser mink may read all; alice may SELECT from fresh only.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	v := catalog.NewView()
	v.Roles[catalog.BootstrapRole] = &catalog.Role{ID: catalog.BootstrapRole, Name: "mink", Login: true, Superuser: true}
	v.Roles[alice] = &catalog.Role{ID: alice, Name: "alice", Login: true}
	v.Tables[1] = &catalog.Table{ID: 1, Spec: catalog.TableSpec{Name: "events"},
		Tiering: catalog.TieringState{Offsets: map[catalog.BucketID]uint64{10: 3}, LakeSnapshotID: 100, LakeSequence: 1}}
	v.Tables[2] = &catalog.Table{ID: 2, Spec: catalog.TableSpec{Name: "fresh"},
		ACL: []catalog.ACLItem{{Grantee: alice, Privileges: catalog.PrivSelect}}}
	v.Tables[3] = &catalog.Table{ID: 3, Spec: catalog.TableSpec{Name: "truncated"},
		Tiering: catalog.TieringState{LakeSnapshotID: 300, LakeSequence: 1}}
	v.Tables[4] = &catalog.Table{ID: 4, Spec: catalog.TableSpec{Name: "cold", Options: map[string]string{"tiering": "off"}}}
	store := objstore.NewMem()
	for version, snaps := range [][]int64{nil, {100}, {100, 200}} {
		key := fmt.Sprintf("lake/1/metadata/v%d.metadata.json", version+1)
		if err := store.PutIfAbsent(ctx, key, metadataJSON(1, snaps...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PutIfAbsent(ctx, "lake/3/metadata/v1.metadata.json", metadataJSON(3, 300)); err != nil {
		t.Fatal(err)
	}
	f := &fixture{meta: &fakeMeta{v: v}, store: store}
	h := icebergrest.NewHandler(icebergrest.Config{
		Meta: f.meta,
		Lake: tiering.NewLake(store, storeURL),
		Authenticate: func(r *http.Request) (access.Identity, int, error) {
			switch user, _, _ := r.BasicAuth(); {
			case r.Header.Get("Authorization") == "Bearer token-of-alice" || user == "alice":
				return access.Identity{Role: alice, Name: "alice"}, 0, nil
			case r.Header.Get("Authorization") == "":
				return access.Identity{Role: catalog.BootstrapRole, Name: "mink"}, 0, nil // trust mode
			}
			return access.Identity{}, http.StatusUnauthorized, fmt.Errorf("authentication failed")
		},
		IssueToken: func(r *http.Request, user, password string) (string, time.Duration, int, error) {
			if user == "alice" && password == "secret" {
				return "token-of-alice", time.Hour, 0, nil
			}
			return "", 0, http.StatusUnauthorized, fmt.Errorf("authentication failed for user %q", user)
		},
		TableConfig: map[string]string{"s3.region": "eu-west-1"},
	})
	f.srv = httptest.NewServer(http.StripPrefix("/iceberg", h))
	t.Cleanup(f.srv.Close)
	return f
}

type answer struct {
	code int
	body map[string]any
	raw  string
}

func (f *fixture) do(t *testing.T, method, path, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+"/iceberg"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
		}
	}
	return a
}

// errorOf checks that a is an Iceberg ErrorModel with code and typ and a
// message containing want, and returns the message.
func errorOf(t *testing.T, what string, a answer, code int, typ, want string) {
	t.Helper()
	if a.code != code {
		t.Errorf("%s: status %d, want %d (body %s)", what, a.code, code, a.raw)
		return
	}
	e, _ := a.body["error"].(map[string]any)
	if e == nil {
		t.Errorf("%s: no ErrorModel in %s", what, a.raw)
		return
	}
	if e["type"] != typ || e["code"] != float64(code) || !strings.Contains(fmt.Sprint(e["message"]), want) {
		t.Errorf("%s: error %v, want type %s, code %d, a message with %q", what, e, typ, code, want)
	}
}

func TestReads(t *testing.T) {
	f := newFixture(t)
	if a := f.do(t, "GET", "/v1/namespaces", ""); a.code != 200 || fmt.Sprint(a.body["namespaces"]) != "[[public]]" {
		t.Errorf("list namespaces: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "GET", "/v1/namespaces?parent=public", ""); a.code != 200 || fmt.Sprint(a.body["namespaces"]) != "[]" {
		t.Errorf("list namespaces under public: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "GET", "/v1/namespaces/public", ""); a.code != 200 || fmt.Sprint(a.body["namespace"]) != "[public]" {
		t.Errorf("load namespace: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "HEAD", "/v1/namespaces/public", ""); a.code != 204 {
		t.Errorf("namespace exists: %d", a.code)
	}
	if a := f.do(t, "HEAD", "/v1/namespaces/sales", ""); a.code != 404 {
		t.Errorf("unknown namespace exists: %d", a.code)
	}
	// A client configured with a prefix gets the same answers.
	if a := f.do(t, "GET", "/v1/warehouse/namespaces/public", ""); a.code != 200 || fmt.Sprint(a.body["namespace"]) != "[public]" {
		t.Errorf("load namespace with a prefix: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "GET", "/v1/warehouse/namespaces/public/tables/events", ""); a.code != 200 || a.body["metadata-location"] == nil {
		t.Errorf("load table with a prefix: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "GET", "/v1/warehouse/config", ""); a.code != 404 {
		t.Errorf("config under a prefix: %d %s", a.code, a.raw)
	}
	a := f.do(t, "GET", "/v1/namespaces/public/tables", "")
	var names []string
	for _, id := range a.body["identifiers"].([]any) {
		m := id.(map[string]any)
		names = append(names, fmt.Sprint(m["namespace"], ".", m["name"]))
	}
	if got := strings.Join(names, " "); a.code != 200 || got != "[public].cold [public].events [public].fresh [public].truncated" {
		t.Errorf("list tables: %d %q", a.code, got)
	}

	// events loads as v2: the lake's v3 has a snapshot the log has not
	// recorded, so it is not shown yet.
	a = f.do(t, "GET", "/v1/namespaces/public/tables/events", "")
	if a.code != 200 {
		t.Fatalf("load events: %d %s", a.code, a.raw)
	}
	if got, want := a.body["metadata-location"], storeURL+"/lake/1/metadata/v2.metadata.json"; got != want {
		t.Errorf("events: metadata-location %v, want %s", got, want)
	}
	meta := a.body["metadata"].(map[string]any)
	if meta["current-snapshot-id"] != float64(100) || meta["location"] != storeURL+"/lake/1" {
		t.Errorf("events: metadata has current snapshot %v, location %v; want 100, %s/lake/1", meta["current-snapshot-id"], meta["location"], storeURL)
	}
	if fmt.Sprint(a.body["config"]) != "map[s3.region:eu-west-1]" {
		t.Errorf("events: config %v", a.body["config"])
	}
	if a := f.do(t, "HEAD", "/v1/namespaces/public/tables/events", ""); a.code != 204 {
		t.Errorf("events exists: %d", a.code)
	}

	// Once the log records the next round, every load shows it.
	f.meta.update(func(v *catalog.View) {
		v.Tables[1].Tiering = catalog.TieringState{Offsets: map[catalog.BucketID]uint64{10: 9}, LakeSnapshotID: 200, LakeSequence: 2}
	})
	a = f.do(t, "GET", "/v1/namespaces/public/tables/events", "")
	if got, want := a.body["metadata-location"], storeURL+"/lake/1/metadata/v3.metadata.json"; a.code != 200 || got != want {
		t.Errorf("events after the second round: %d, metadata-location %v, want %s", a.code, got, want)
	}

	c := f.do(t, "GET", "/v1/config", "")
	endpoints := fmt.Sprint(c.body["endpoints"])
	for _, e := range []string{"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}", "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}", "POST /v1/{prefix}/namespaces/{namespace}/tables"} {
		if !strings.Contains(endpoints, e) {
			t.Errorf("config: endpoints %s lack %q", endpoints, e)
		}
	}
	if a := f.do(t, "POST", "/v1/namespaces/public/tables/events/metrics", `{"report-type":"scan-report"}`); a.code != 204 {
		t.Errorf("report metrics: %d %s", a.code, a.raw)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		what, method, path, body string
		code                     int
		typ, message             string
	}{
		{"unknown namespace: list tables", "GET", "/v1/namespaces/sales/tables", "", 404, "NoSuchNamespaceException", `namespace does not exist: "sales"`},
		{"unknown namespace: load", "GET", "/v1/namespaces/sales", "", 404, "NoSuchNamespaceException", `"sales"`},
		{"unknown namespace: load table", "GET", "/v1/namespaces/sales/tables/events", "", 404, "NoSuchNamespaceException", `"sales"`},
		{"unknown table", "GET", "/v1/namespaces/public/tables/nope", "", 404, "NoSuchTableException", "table does not exist: public.nope"},
		{"untiered table", "GET", "/v1/namespaces/public/tables/fresh", "", 404, "NoSuchTableException",
			"public.fresh is not tiered yet: it is in the lake after the first tiering round that finds rows in it (tiering_freshness after they were written, default 1 minute); run `mink tiering run --table fresh --wait` to tier it now"},
		{"truncated table", "GET", "/v1/namespaces/public/tables/truncated", "", 404, "NoSuchTableException", "was truncated"},
		{"tiering off", "GET", "/v1/namespaces/public/tables/cold", "", 404, "NoSuchTableException", "tiering is off"},
		{"create namespace", "POST", "/v1/namespaces", `{"namespace":["sales"]}`, 403, "ForbiddenException", "mink is the only writer of its lake"},
		{"drop namespace", "DELETE", "/v1/namespaces/public", "", 403, "ForbiddenException", "read-only"},
		{"set namespace properties", "POST", "/v1/namespaces/public/properties", `{"updates":{"a":"b"}}`, 403, "ForbiddenException", "read-only"},
		{"create table", "POST", "/v1/namespaces/public/tables", `{"name":"t","schema":{"type":"struct","fields":[]}}`, 403, "ForbiddenException", "mink is the only writer of its lake"},
		{"register table", "POST", "/v1/namespaces/public/register", `{"name":"t","metadata-location":"file:///x"}`, 403, "ForbiddenException", "read-only"},
		{"commit", "POST", "/v1/namespaces/public/tables/events", `{"requirements":[],"updates":[]}`, 403, "ForbiddenException", "read-only"},
		{"drop table", "DELETE", "/v1/namespaces/public/tables/events", "", 403, "ForbiddenException", "read-only"},
		{"rename", "POST", "/v1/tables/rename", `{"source":{"namespace":["public"],"name":"events"},"destination":{"namespace":["public"],"name":"e2"}}`, 403, "ForbiddenException", "read-only"},
		{"transaction", "POST", "/v1/transactions/commit", `{"table-changes":[]}`, 403, "ForbiddenException", "read-only"},
		{"malformed create table", "POST", "/v1/namespaces/public/tables", `{"name":`, 400, "BadRequestException", "not valid JSON"},
		{"malformed commit", "POST", "/v1/namespaces/public/tables/events", `nope`, 400, "BadRequestException", "not valid JSON"},
		{"malformed metrics", "POST", "/v1/namespaces/public/tables/events/metrics", `{`, 400, "BadRequestException", "not valid JSON"},
		{"unknown endpoint", "GET", "/v1/namespaces/public/tables/events/plans", "", 404, "NotFoundException", "no such endpoint"},
		{"wrong method", "PUT", "/v1/config", "", 404, "NotFoundException", "no such endpoint: PUT /v1/config"},
	} {
		errorOf(t, c.what, f.do(t, c.method, c.path, c.body), c.code, c.typ, c.message)
	}
	for _, path := range []string{"/v1/namespaces/public/tables/fresh", "/v1/namespaces/public/tables/nope", "/v1/namespaces/sales/tables/events"} {
		if a := f.do(t, "HEAD", path, ""); a.code != 404 || a.raw != "" {
			t.Errorf("HEAD %s: %d %q, want 404 without a body", path, a.code, a.raw)
		}
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	a := f.do(t, "GET", "/v1/config", "", "Authorization", "Bearer forged")
	errorOf(t, "bad token", a, 401, "NotAuthorizedException", "authentication failed")

	// alice may SELECT from fresh only: she lists it alone and may not
	// load events.
	a = f.do(t, "GET", "/v1/namespaces/public/tables", "", "Authorization", "Bearer token-of-alice")
	if a.code != 200 || fmt.Sprint(a.body["identifiers"]) != "[map[name:fresh namespace:[public]]]" {
		t.Errorf("alice lists %d %s", a.code, a.raw)
	}
	errorOf(t, "alice loads events", f.do(t, "GET", "/v1/namespaces/public/tables/events", "", "Authorization", "Bearer token-of-alice"),
		403, "ForbiddenException", `permission denied for table events: role "alice" needs SELECT`)

	form := func(v url.Values) string { return v.Encode() }
	ct := []string{"Content-Type", "application/x-www-form-urlencoded"}
	a = f.do(t, "POST", "/v1/oauth/tokens", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {"alice"}, "client_secret": {"secret"}}), ct...)
	if a.code != 200 || a.body["access_token"] != "token-of-alice" || a.body["token_type"] != "bearer" || a.body["expires_in"] != float64(3600) {
		t.Errorf("token: %d %s", a.code, a.raw)
	}
	a = f.do(t, "POST", "/v1/oauth/tokens", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {"alice"}, "client_secret": {"wrong"}}), ct...)
	if a.code != 401 || a.body["error"] != "invalid_client" || a.body["error_description"] != `authentication failed for user "alice"` {
		t.Errorf("token with a wrong password: %d %s", a.code, a.raw)
	}
	a = f.do(t, "POST", "/v1/oauth/tokens", form(url.Values{"grant_type": {"password"}}), ct...)
	if a.code != 400 || a.body["error"] != "unsupported_grant_type" {
		t.Errorf("token with the password grant: %d %s", a.code, a.raw)
	}
}

// TestIcebergGoClient: iceberg-go's REST catalog client finds, loads and
// is refused through the handler.
func TestIcebergGoClient(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "mink", f.srv.URL+"/iceberg")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for id, err := range cat.ListTables(ctx, table.Identifier{"public"}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.Join(id, "."))
	}
	if got := strings.Join(names, " "); got != "public.cold public.events public.fresh public.truncated" {
		t.Errorf("ListTables: %s", got)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{"public", "events"})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.MetadataLocation() != storeURL+"/lake/1/metadata/v2.metadata.json" || tbl.CurrentSnapshot().SnapshotID != 100 {
		t.Errorf("LoadTable: %s, snapshot %d", tbl.MetadataLocation(), tbl.CurrentSnapshot().SnapshotID)
	}
	if ok, err := cat.CheckTableExists(ctx, table.Identifier{"public", "events"}); !ok || err != nil {
		t.Errorf("CheckTableExists(events): %v, %v", ok, err)
	}
	if ok, err := cat.CheckTableExists(ctx, table.Identifier{"public", "fresh"}); ok || err != nil {
		t.Errorf("CheckTableExists(fresh): %v, %v", ok, err)
	}
	if _, err := cat.LoadTable(ctx, table.Identifier{"public", "fresh"}); !errors.Is(err, icecatalog.ErrNoSuchTable) || !strings.Contains(err.Error(), "mink tiering run --table fresh") {
		t.Errorf("LoadTable(fresh): %v", err)
	}
	if _, err := cat.LoadTable(ctx, table.Identifier{"sales", "events"}); err == nil || !strings.Contains(err.Error(), `namespace does not exist: "sales"`) {
		t.Errorf("LoadTable(sales.events): %v", err)
	}
	if err := cat.DropTable(ctx, table.Identifier{"public", "events"}); err == nil || !strings.Contains(err.Error(), "mink is the only writer of its lake") {
		t.Errorf("DropTable: %v", err)
	}
	sch := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := cat.CreateTable(ctx, table.Identifier{"public", "t"}, sch); err == nil || !strings.Contains(err.Error(), "mink is the only writer of its lake") {
		t.Errorf("CreateTable: %v", err)
	}
}

// Every schema is a namespace of its name: listed, loadable, with its
// tables under their own names; a table of the same name in public is
// another table.
func TestSchemaNamespaces(t *testing.T) {
	f := newFixture(t)
	f.meta.update(func(v *catalog.View) {
		v.Schemas[7] = &catalog.Schema{ID: 7, Name: "staging"}
		v.Tables[8] = &catalog.Table{ID: 8, Spec: catalog.TableSpec{Name: "events", Schema: 7},
			Tiering: catalog.TieringState{Offsets: map[catalog.BucketID]uint64{10: 3}, LakeSnapshotID: 300, LakeSequence: 1}}
		v.Tables[9] = &catalog.Table{ID: 9, Spec: catalog.TableSpec{Name: "fresh_staged", Schema: 7}}
	})
	if err := f.store.PutIfAbsent(context.Background(), "lake/8/metadata/v1.metadata.json", metadataJSON(8, 300)); err != nil {
		t.Fatal(err)
	}
	if a := f.do(t, "GET", "/v1/namespaces", ""); a.code != 200 || fmt.Sprint(a.body["namespaces"]) != "[[public] [staging]]" {
		t.Errorf("list namespaces: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "GET", "/v1/namespaces?parent=staging", ""); a.code != 200 || fmt.Sprint(a.body["namespaces"]) != "[]" {
		t.Errorf("list namespaces under staging: %d %s", a.code, a.raw)
	}
	if a := f.do(t, "GET", "/v1/namespaces/staging", ""); a.code != 200 || fmt.Sprint(a.body["namespace"]) != "[staging]" {
		t.Errorf("load namespace staging: %d %s", a.code, a.raw)
	}
	a := f.do(t, "GET", "/v1/namespaces/staging/tables", "")
	var names []string
	for _, id := range a.body["identifiers"].([]any) {
		m := id.(map[string]any)
		names = append(names, fmt.Sprint(m["namespace"], ".", m["name"]))
	}
	if got := strings.Join(names, " "); a.code != 200 || got != "[staging].events [staging].fresh_staged" {
		t.Errorf("list tables of staging: %d %q", a.code, got)
	}
	a = f.do(t, "GET", "/v1/namespaces/staging/tables/events", "")
	if got, want := a.body["metadata-location"], storeURL+"/lake/8/metadata/v1.metadata.json"; a.code != 200 || got != want {
		t.Errorf("load staging.events: %d, metadata-location %v, want %s", a.code, got, want)
	}
	a = f.do(t, "GET", "/v1/namespaces/public/tables/events", "")
	if got, want := a.body["metadata-location"], storeURL+"/lake/1/metadata/v2.metadata.json"; a.code != 200 || got != want {
		t.Errorf("load public.events: %d, metadata-location %v, want %s", a.code, got, want)
	}
	errorOf(t, "staging table not tiered", f.do(t, "GET", "/v1/namespaces/staging/tables/fresh_staged", ""), 404, "NoSuchTableException",
		"run `mink tiering run --table staging.fresh_staged --wait`")
	errorOf(t, "public's table under staging", f.do(t, "GET", "/v1/namespaces/staging/tables/cold", ""), 404, "NoSuchTableException",
		"table does not exist: staging.cold")
	errorOf(t, "unknown namespace", f.do(t, "GET", "/v1/namespaces/marts/tables", ""), 404, "NoSuchNamespaceException",
		`namespace does not exist: "marts"`)
}
