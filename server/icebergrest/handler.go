package icebergrest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/tiering"
)

// Namespace is the namespace of the tables of schema public. Every schema
// is a namespace of its name, with no children.
const Namespace = catalog.PublicSchemaName

// Config is what a Handler reads from its node.
type Config struct {
	// Meta is the node's metadata view.
	Meta interface {
		Read(fn func(v *catalog.View))
	}
	// Lake reads the lake's metadata objects.
	Lake *tiering.Lake
	// Authenticate returns the role r acts for, or the HTTP status (401,
	// 429) and error to refuse it with. The admin API's authentication:
	// HTTP basic or a bearer token; in trust mode no credentials act as
	// the bootstrap superuser.
	Authenticate func(r *http.Request) (access.Identity, int, error)
	// IssueToken checks a user's password (the OAuth2 client_credentials
	// grant of POST /v1/oauth/tokens) and returns a bearer token for the
	// role, its lifetime, or the status and error to refuse it with.
	IssueToken func(r *http.Request, user, password string) (token string, ttl time.Duration, code int, err error)
	// TableConfig is the "config" of every loadTable answer: how a reader
	// reaches the object store (no secrets).
	TableConfig map[string]string
	Logger      *slog.Logger
}

// Handler serves the catalog's routes below /v1 (it is mounted at
// /iceberg on the admin listener, with the prefix stripped).
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the catalog's handler.
func NewHandler(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	m := h.mux
	// A GET pattern also answers HEAD (net/http); the handlers give HEAD
	// its status without a body.
	m.HandleFunc("GET /v1/config", h.auth(h.getConfig))
	m.HandleFunc("POST /v1/oauth/tokens", h.issueToken)
	m.HandleFunc("GET /v1/namespaces", h.auth(h.listNamespaces))
	m.HandleFunc("GET /v1/namespaces/{namespace}", h.auth(h.loadNamespace))
	m.HandleFunc("GET /v1/namespaces/{namespace}/tables", h.auth(h.listTables))
	m.HandleFunc("GET /v1/namespaces/{namespace}/tables/{table}", h.auth(h.loadTable))
	m.HandleFunc("GET /v1/namespaces/{namespace}/views", h.auth(h.listViews))
	// Readers report scan metrics after a scan (Iceberg's ReportMetrics);
	// they are accepted and dropped.
	m.HandleFunc("POST /v1/namespaces/{namespace}/tables/{table}/metrics", h.auth(h.reportMetrics))
	for _, e := range writeEndpoints {
		m.HandleFunc(e.String(), h.auth(h.readOnly))
	}
	m.HandleFunc("/", h.auth(func(w http.ResponseWriter, r *http.Request, _ access.Identity) {
		writeError(w, r, http.StatusNotFound, typeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	}))
	return h
}

// ServeHTTP implements http.Handler. A client configured with a prefix
// (the spec's /v1/{prefix}/…) is served as one without: the catalog has
// one warehouse.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ok := stripPrefix(r.URL.Path); ok {
		r2 := *r
		u := *r.URL
		u.Path, u.RawPath = p, ""
		r2.URL = &u
		r = &r2
	}
	h.mux.ServeHTTP(w, r)
}

// prefixedRoots are the first path segments after /v1/{prefix}/.
var prefixedRoots = []string{"namespaces", "tables", "transactions"}

// stripPrefix returns path without the {prefix} segment of
// /v1/{prefix}/namespaces…, /v1/{prefix}/tables… and
// /v1/{prefix}/transactions…, and whether it had one.
func stripPrefix(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return path, false
	}
	prefix, tail, ok := strings.Cut(rest, "/")
	if !ok || prefix == "" || slices.Contains(prefixedRoots, prefix) || prefix == "config" || prefix == "oauth" {
		return path, false
	}
	root, _, _ := strings.Cut(tail, "/")
	if !slices.Contains(prefixedRoots, root) {
		return path, false
	}
	return "/v1/" + tail, true
}

type endpoint struct{ method, path string }

func (e endpoint) String() string { return e.method + " " + e.path }

// readEndpoints are the ones the catalog serves.
var readEndpoints = []endpoint{
	{http.MethodGet, "/v1/namespaces"},
	{http.MethodGet, "/v1/namespaces/{namespace}"},
	{http.MethodHead, "/v1/namespaces/{namespace}"},
	{http.MethodGet, "/v1/namespaces/{namespace}/tables"},
	{http.MethodGet, "/v1/namespaces/{namespace}/tables/{table}"},
	{http.MethodHead, "/v1/namespaces/{namespace}/tables/{table}"},
	{http.MethodPost, "/v1/namespaces/{namespace}/tables/{table}/metrics"},
}

// writeEndpoints are the ones that would change the catalog: each answers
// 403 with readOnlyMessage. They are advertised in /v1/config like the
// read endpoints, so that a client sends the request and shows the
// catalog's message rather than its own "endpoint not supported".
var writeEndpoints = []endpoint{
	{http.MethodPost, "/v1/namespaces"},
	{http.MethodDelete, "/v1/namespaces/{namespace}"},
	{http.MethodPost, "/v1/namespaces/{namespace}/properties"},
	{http.MethodPost, "/v1/namespaces/{namespace}/tables"},
	{http.MethodPost, "/v1/namespaces/{namespace}/register"},
	{http.MethodPost, "/v1/namespaces/{namespace}/tables/{table}"},
	{http.MethodDelete, "/v1/namespaces/{namespace}/tables/{table}"},
	{http.MethodPost, "/v1/tables/rename"},
	{http.MethodPost, "/v1/transactions/commit"},
}

type identityHandler func(w http.ResponseWriter, r *http.Request, id access.Identity)

// auth serves fn to an authenticated caller; any role that can log in may
// use the catalog, and sees the tables it may SELECT from.
func (h *Handler) auth(fn identityHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, code, err := h.cfg.Authenticate(r)
		if err != nil {
			typ := typeNotAuthorized
			switch code {
			case http.StatusUnauthorized:
				w.Header().Set("WWW-Authenticate", `Basic realm="mink"`)
			case http.StatusTooManyRequests:
				typ = typeTooManyRequests
			case http.StatusForbidden:
				typ = typeForbidden
			}
			writeError(w, r, code, typ, err.Error())
			return
		}
		fn(w, r, id)
	}
}

func (h *Handler) getConfig(w http.ResponseWriter, r *http.Request, _ access.Identity) {
	// The spec names endpoints with the {prefix} the catalog does not
	// use (no "prefix" in the config, so clients leave it out).
	var endpoints []string
	for _, e := range slices.Concat(readEndpoints, writeEndpoints) {
		endpoints = append(endpoints, e.method+" "+strings.Replace(e.path, "/v1/", "/v1/{prefix}/", 1))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"defaults":  map[string]string{},
		"overrides": map[string]string{},
		"endpoints": endpoints,
	})
}

// issueToken is the OAuth2 token endpoint (client_credentials: client_id
// is the user name, client_secret the password), which PyIceberg, Spark,
// Trino and DuckDB use for a "credential". Errors are OAuth2's
// ({"error": "invalid_client", …}), as the spec requires.
func (h *Handler) issueToken(w http.ResponseWriter, r *http.Request) {
	oauthError := func(code int, kind, description string) {
		writeJSON(w, code, map[string]string{"error": kind, "error_description": description})
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(http.StatusBadRequest, "invalid_request", "the token request is not a form: "+err.Error())
		return
	}
	if grant := r.PostForm.Get("grant_type"); grant != "client_credentials" {
		oauthError(http.StatusBadRequest, "unsupported_grant_type",
			fmt.Sprintf("grant_type %q: only client_credentials (the user name as client_id, the password as client_secret) is supported", grant))
		return
	}
	user, password := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if user == "" {
		user, password, _ = r.BasicAuth()
	}
	if user == "" {
		oauthError(http.StatusUnauthorized, "invalid_client", "client_id (a user name) and client_secret (its password) are required")
		return
	}
	token, ttl, code, err := h.cfg.IssueToken(r, user, password)
	if err != nil {
		kind := "invalid_client"
		if code == http.StatusTooManyRequests {
			kind = "slow_down"
		}
		oauthError(code, kind, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":      token,
		"token_type":        "bearer",
		"expires_in":        int64(ttl / time.Second),
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

func (h *Handler) listNamespaces(w http.ResponseWriter, r *http.Request, _ access.Identity) {
	namespaces := [][]string{}
	if parent := r.URL.Query().Get("parent"); parent != "" {
		var ok bool
		h.cfg.Meta.Read(func(v *catalog.View) { _, ok = v.SchemaByName(parent) })
		if !ok {
			h.noSuchNamespace(w, r, parent)
			return
		}
		// A schema has no children.
		writeJSON(w, http.StatusOK, map[string]any{"namespaces": namespaces})
		return
	}
	h.cfg.Meta.Read(func(v *catalog.View) {
		namespaces = append(namespaces, []string{Namespace})
		for _, s := range v.Schemas {
			namespaces = append(namespaces, []string{s.Name})
		}
	})
	slices.SortFunc(namespaces, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": namespaces})
}

// namespace returns the schema the request's namespace is; false: it
// answered 404.
func (h *Handler) namespace(w http.ResponseWriter, r *http.Request) (catalog.SchemaID, string, bool) {
	ns := r.PathValue("namespace")
	var id catalog.SchemaID
	var ok bool
	h.cfg.Meta.Read(func(v *catalog.View) { id, ok = v.SchemaByName(ns) })
	if !ok {
		h.noSuchNamespace(w, r, ns)
		return 0, "", false
	}
	return id, ns, true
}

func (h *Handler) noSuchNamespace(w http.ResponseWriter, r *http.Request, ns string) {
	writeError(w, r, http.StatusNotFound, typeNoSuchNamespace,
		fmt.Sprintf("namespace does not exist: %q (mink's namespaces are its schemas: %q and those CREATE SCHEMA made)", ns, Namespace))
}

func (h *Handler) loadNamespace(w http.ResponseWriter, r *http.Request, _ access.Identity) {
	_, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": []string{ns}, "properties": map[string]string{}})
}

type tableIdentifier struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

// listTables lists the tables the caller may SELECT from, tiered or not,
// by name.
func (h *Handler) listTables(w http.ResponseWriter, r *http.Request, id access.Identity) {
	schema, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	idents := []tableIdentifier{}
	h.cfg.Meta.Read(func(v *catalog.View) {
		for _, t := range v.Tables {
			if t.Spec.Schema == schema && access.Authorize(v, id, t, catalog.PrivSelect) == nil {
				idents = append(idents, tableIdentifier{Namespace: []string{ns}, Name: t.Spec.Name})
			}
		}
	})
	slices.SortFunc(idents, func(a, b tableIdentifier) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": idents})
}

func (h *Handler) listViews(w http.ResponseWriter, r *http.Request, _ access.Identity) {
	if _, _, ok := h.namespace(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": []tableIdentifier{}})
}

// lakeTable is what the view says about a table's lake.
type lakeTable struct {
	id       catalog.TableID
	snapshot int64
}

// tiered finds the table of the request in the view and answers 404 or 403
// when it cannot be loaded; false: it answered.
func (h *Handler) tiered(w http.ResponseWriter, r *http.Request, id access.Identity) (lakeTable, bool) {
	schema, ns, ok := h.namespace(w, r)
	if !ok {
		return lakeTable{}, false
	}
	name := r.PathValue("table")
	var qualified string // as SQL and the CLI name it
	var (
		lt      lakeTable
		code    int
		typ     string
		message string
	)
	h.cfg.Meta.Read(func(v *catalog.View) {
		t, ok := v.TableByName(schema, name)
		_, isView := v.ViewByName(schema, name)
		qualified = v.QualifyIn(schema, name)
		switch {
		case !ok && isView:
			code, typ, message = http.StatusNotFound, typeNoSuchTable, fmt.Sprintf(
				"table does not exist: %s.%s is a SQL view, which has no lake; read it through SQL, or read the tables it reads", ns, name)
		case !ok:
			code, typ, message = http.StatusNotFound, typeNoSuchTable, fmt.Sprintf("table does not exist: %s.%s", ns, name)
		case access.Authorize(v, id, t, catalog.PrivSelect) != nil:
			code, typ, message = http.StatusForbidden, typeForbidden,
				fmt.Sprintf("permission denied for table %s: role %q needs SELECT on it to read it from the lake", qualified, id.Name)
		case t.Tiering.LakeSnapshotID == 0 && t.Spec.Options["tiering"] == "off":
			code, typ, message = http.StatusNotFound, typeNoSuchTable,
				fmt.Sprintf("table %s.%s is not in the lake: its tiering is off (WITH (tiering = off)); ALTER or recreate it with tiering on", ns, name)
		case t.Tiering.LakeSnapshotID == 0:
			code, typ, message = http.StatusNotFound, typeNoSuchTable,
				fmt.Sprintf("table %s.%s is not tiered yet: it is in the lake after the first tiering round that finds rows in it "+
					"(tiering_freshness after they were written, default 1 minute); run `mink tiering run --table %s --wait` to tier it now", ns, name, qualified)
		case t.Tiering.Offsets == nil:
			code, typ, message = http.StatusNotFound, typeNoSuchTable,
				fmt.Sprintf("table %s.%s was truncated (or lost all its partitions) after its last tiering round: it is in the lake again after the next round; "+
					"run `mink tiering run --table %s --wait` to tier it now", ns, name, qualified)
		default:
			lt = lakeTable{id: t.ID, snapshot: t.Tiering.LakeSnapshotID}
		}
	})
	if code != 0 {
		writeError(w, r, code, typ, message)
		return lakeTable{}, false
	}
	return lt, true
}

// loadTable answers the metadata version that holds the snapshot the
// metadata log records for the table (HEAD: 204 when there is one).
func (h *Handler) loadTable(w http.ResponseWriter, r *http.Request, id access.Identity) {
	lt, ok := h.tiered(w, r, id)
	if !ok {
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	meta, err := h.cfg.Lake.MetadataAt(ctx, lt.id, lt.snapshot)
	if err != nil {
		h.cfg.Logger.Error("iceberg catalog: load table", "table", r.PathValue("table"), "err", err)
		code, typ := http.StatusServiceUnavailable, typeUnavailable
		if errors.Is(err, tiering.ErrNoLakeMetadata) {
			code, typ = http.StatusInternalServerError, typeServerError
		}
		writeError(w, r, code, typ, fmt.Sprintf("load the lake metadata of table %s: %v", r.PathValue("table"), err))
		return
	}
	cfg := h.cfg.TableConfig
	if cfg == nil {
		cfg = map[string]string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"metadata-location": meta.Location,
		"metadata":          json.RawMessage(meta.JSON),
		"config":            cfg,
	})
}

func (h *Handler) reportMetrics(w http.ResponseWriter, r *http.Request, _ access.Identity) {
	if !h.validJSON(w, r) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readOnly refuses a request that would change the catalog: 400 for a
// body that is not JSON (what the catalog would answer to it anyway), else
// 403.
func (h *Handler) readOnly(w http.ResponseWriter, r *http.Request, _ access.Identity) {
	if r.Method == http.MethodPost && !h.validJSON(w, r) {
		return
	}
	writeError(w, r, http.StatusForbidden, typeForbidden, readOnlyMessage)
}

// validJSON checks that the request's body is one JSON value; false: it
// answered 400.
func (h *Handler) validJSON(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, typeBadRequest, "read the request body: "+err.Error())
		return false
	}
	if !json.Valid(body) {
		writeError(w, r, http.StatusBadRequest, typeBadRequest, "malformed request: the body is not valid JSON")
		return false
	}
	return true
}
