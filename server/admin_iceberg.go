package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server/icebergrest"
)

// icebergHandler is the Iceberg REST catalog of the lake, mounted at
// /iceberg on the admin listener (docs/lake.md). It authenticates like the
// admin API (HTTP basic, bearer tokens, trust mode) but takes any role
// that can log in, not only superusers: a role sees and loads the tables
// it may SELECT from, as over SQL.
func (s *Server) icebergHandler() http.Handler {
	if s.tiering == nil || s.tiering.tierer == nil {
		// A node without a lake (admin-only test servers) has no catalog.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "this node has no lake to serve an Iceberg catalog of", http.StatusServiceUnavailable)
		})
	}
	h := icebergrest.NewHandler(icebergrest.Config{
		Meta: s.cat,
		Lake: s.tiering.tierer.Lake(),
		Authenticate: func(r *http.Request) (access.Identity, int, error) {
			id, code, err := s.adminIdentity(r)
			if err != nil && code == http.StatusUnauthorized && s.guard.Trust() && isBearer(r) {
				// PyIceberg without credential= sends "Bearer None". A node
				// that trusts every client serves it as it serves a request
				// without credentials.
				return s.bootstrapIdentity(), 0, nil
			}
			return id, code, err
		},
		IssueToken: func(r *http.Request, user, password string) (string, time.Duration, int, error) {
			id, err := s.guard.Password(adminLogin(r, user), password)
			switch {
			case errors.Is(err, access.ErrTooManyFailures):
				return "", 0, http.StatusTooManyRequests, err
			case err != nil:
				return "", 0, http.StatusUnauthorized, fmt.Errorf("authentication failed for user %q", user)
			}
			token, err := s.guard.IssueToken(id)
			if err != nil {
				return "", 0, http.StatusInternalServerError, err
			}
			return token, s.guard.TokenTTL(), 0, nil
		},
		TableConfig: lakeAccessConfig(s.store),
		Logger:      s.logger,
	})
	return http.StripPrefix("/iceberg", h)
}

// lakeAccessConfig is how an external reader reaches the lake's objects:
// for S3, the endpoint, region and path-style addressing the node itself
// uses, in the property names of Iceberg's Java, Python and Go readers.
// Never credentials: readers bring their own.
func lakeAccessConfig(store objstore.Store) map[string]string {
	s3, ok := store.(*objstore.S3)
	if !ok {
		return map[string]string{}
	}
	cfg := map[string]string{
		"s3.region":                   s3.Region(),
		"client.region":               s3.Region(),
		"s3.path-style-access":        strconv.FormatBool(true),
		"s3.force-virtual-addressing": strconv.FormatBool(false),
	}
	if ep := s3.Endpoint(); ep != "" {
		cfg["s3.endpoint"] = ep
	}
	return cfg
}

// isBearer reports whether r carries a bearer token.
func isBearer(r *http.Request) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return strings.EqualFold(scheme, "Bearer")
}
