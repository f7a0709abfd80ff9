package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// AdminClient calls a node's admin HTTP API (docs/admin-api.md). The CLI's
// admin commands use it.
type AdminClient struct {
	// Addr is the node's admin address, HOST:PORT.
	Addr string
	// Scheme is "http", or "https" for a node started with --tls-cert-file.
	Scheme string
	HTTP   *http.Client
	// User and Password are the credentials sent with every request (HTTP
	// basic), when Password is set; without one the request has none,
	// which a node in trust mode accepts as its bootstrap superuser.
	User     string
	Password string
}

// ErrAdminUnauthorized and ErrAdminForbidden are the admin API's 401 (no
// credentials, or wrong ones) and 403 (a role that is not a superuser).
// The client's errors for them match them with errors.Is and say what to
// do.
var (
	ErrAdminUnauthorized = errors.New("the admin API refused the credentials")
	ErrAdminForbidden    = errors.New("the admin API needs a superuser")
)

// adminAuthError is a 401 or 403 with the words for the operator.
type adminAuthError struct {
	kind error // ErrAdminUnauthorized or ErrAdminForbidden
	msg  string
}

func (e *adminAuthError) Error() string { return e.msg }
func (e *adminAuthError) Unwrap() error { return e.kind }

func (c *AdminClient) user() string {
	if c.User == "" {
		return BootstrapUser
	}
	return c.User
}

// NewAdminClient returns a client for the node whose admin listener is
// server: HOST:PORT or http://HOST:PORT for plain HTTP, https://HOST:PORT
// for HTTPS with the node's certificate verified against the system roots
// (NewAdminClientTLS takes a CA).
func NewAdminClient(server string) *AdminClient {
	if rest, ok := strings.CutPrefix(server, "https://"); ok {
		return NewAdminClientTLS(rest, &tls.Config{MinVersion: tls.VersionTLS12})
	}
	return &AdminClient{Addr: strings.TrimPrefix(server, "http://"), Scheme: "http", HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// NewAdminClientTLS returns a client that calls the admin API of the node at
// server (HOST:PORT or https://HOST:PORT) over HTTPS with cfg: set
// cfg.RootCAs to the CA that signed the node's certificate (ClientTLSConfig
// reads one from a file).
func NewAdminClientTLS(server string, cfg *tls.Config) *AdminClient {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = cfg
	return &AdminClient{
		Addr:   strings.TrimPrefix(server, "https://"),
		Scheme: "https",
		HTTP:   &http.Client{Timeout: 30 * time.Second, Transport: transport},
	}
}

func (c *AdminClient) url(path string) string { return c.Scheme + "://" + c.Addr + path }

// ClusterStatus fetches GET /api/v1/cluster/status.
func (c *AdminClient) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	err := c.getJSON(ctx, "/api/v1/cluster/status", &st)
	return st, err
}

// do sends req with the client's credentials over client.
func (c *AdminClient) do(client *http.Client, req *http.Request) (*http.Response, error) {
	if c.Password != "" {
		req.SetBasicAuth(c.user(), c.Password)
	}
	return client.Do(req)
}

func (c *AdminClient) getJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(c.HTTP, req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read %s from %s: %w", path, c.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return c.statusError(path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode %s from %s: %w", path, c.Addr, err)
	}
	return nil
}

// unwrapURLError drops net/url's "Get \"http://…\":" prefix, which repeats
// what the caller already says.
func unwrapURLError(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// unreachable is the error of a request that got no HTTP answer, with a
// hint when TLS is why.
func (c *AdminClient) unreachable(err error) error {
	err = unwrapURLError(err)
	hint := ""
	var unknownCA x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		hint = " (pass the CA that signed the node's certificate with --ca-file)"
	case errors.As(err, &wrongHost):
		hint = " (the node's certificate does not name the host given in --server)"
	case errors.As(err, &notTLS) || strings.Contains(err.Error(), "HTTP response to HTTPS client"):
		hint = " (the node's admin API serves plain HTTP: drop --ca-file and https://)"
	}
	return fmt.Errorf("cannot reach mink admin API at %s: %w%s", c.Addr, err, hint)
}

// statusError is the error of an answer other than 200 OK: the admin API's
// {"error": …} when it has one.
func (c *AdminClient) statusError(path string, code int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	switch {
	case code == http.StatusUnauthorized && c.Password == "":
		return &adminAuthError{ErrAdminUnauthorized, fmt.Sprintf(
			"the admin API at %s needs the password of a superuser: give --password-file or MINK_PASSWORD (and --user when the role is not %s)", c.Addr, BootstrapUser)}
	case code == http.StatusUnauthorized:
		return &adminAuthError{ErrAdminUnauthorized, fmt.Sprintf(
			"the admin API refused the credentials of user %q: give --password-file or MINK_PASSWORD", c.user())}
	case code == http.StatusForbidden && c.Password != "":
		return &adminAuthError{ErrAdminForbidden, fmt.Sprintf(
			"the admin API refused user %q: the role is not a superuser, and only superusers may use the admin API", c.user())}
	case code == http.StatusForbidden:
		_ = json.Unmarshal(body, &e)
		return &adminAuthError{ErrAdminForbidden, fmt.Sprintf("%s: %s", c.Addr, cmp.Or(e.Error, "HTTP 403"))}
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s: %s", c.Addr, e.Error)
	}
	if code == http.StatusBadRequest && c.Scheme == "http" && strings.Contains(string(body), "HTTPS server") {
		return fmt.Errorf("%s: the node's admin API serves HTTPS: use --server https://%s and --ca-file", c.Addr, c.Addr)
	}
	return fmt.Errorf("%s%s: HTTP %d", c.Addr, path, code)
}

// TableBuckets fetches GET /api/v1/tables/{name}/buckets.
func (c *AdminClient) TableBuckets(ctx context.Context, table string) ([]BucketStatus, error) {
	var out struct {
		Buckets []BucketStatus `json:"buckets"`
	}
	err := c.getJSON(ctx, "/api/v1/tables/"+url.PathEscape(table)+"/buckets", &out)
	return out.Buckets, err
}

// ErrCoordinatorMoving is the error of a rebalance that stopped because
// another node took the coordinator lease, or that found no registered
// coordinator to run on: running it again continues on the new one.
var ErrCoordinatorMoving = errors.New("the coordinator lease is moving")

// Rebalance calls POST /api/v1/cluster/rebalance and calls fn for every
// event as it arrives. Its error wraps ErrCoordinatorMoving when the
// rebalance may be run again on the next coordinator.
func (c *AdminClient) Rebalance(ctx context.Context, dryRun bool, fn func(RebalanceEvent)) error {
	path := "/api/v1/cluster/rebalance"
	if dryRun {
		path += "?dry_run=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(path), nil)
	if err != nil {
		return err
	}
	client := *c.HTTP
	client.Timeout = 0 // a rebalance streams progress for as long as it takes
	resp, err := c.do(&client, req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		err := c.statusError(path, resp.StatusCode, body)
		if resp.StatusCode == http.StatusServiceUnavailable {
			err = fmt.Errorf("%w (%w)", err, ErrCoordinatorMoving)
		}
		return err
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev RebalanceEvent
		if err := dec.Decode(&ev); err == io.EOF {
			return fmt.Errorf("rebalance: the connection ended before it finished")
		} else if err != nil {
			return fmt.Errorf("rebalance: %w", err)
		}
		fn(ev)
		switch ev.Type {
		case "done":
			return nil
		case "error":
			if ev.CoordinatorChanged {
				return fmt.Errorf("rebalance on node %d: %s (%w)", ev.By, ev.Error, ErrCoordinatorMoving)
			}
			return fmt.Errorf("rebalance on node %d: %s", ev.By, ev.Error)
		}
	}
}

// TieringStatus fetches GET /api/v1/tiering/status.
func (c *AdminClient) TieringStatus(ctx context.Context) (TieringStatus, error) {
	var st TieringStatus
	err := c.getJSON(ctx, "/api/v1/tiering/status", &st)
	return st, err
}

// TieringRun calls POST /api/v1/tiering/run for table and calls fn for every
// event as it arrives. With wait, it returns when the round is done.
func (c *AdminClient) TieringRun(ctx context.Context, table string, wait bool, fn func(TieringRunEvent)) error {
	path := "/api/v1/tiering/run?table=" + url.QueryEscape(table)
	if wait {
		path += "&wait=1"
	}
	return c.postNDJSON(ctx, path, func(dec *json.Decoder) (bool, error) {
		var ev TieringRunEvent
		if err := dec.Decode(&ev); err != nil {
			return false, err
		}
		fn(ev)
		switch ev.Type {
		case "done", "queued":
			return true, nil
		case "error":
			return true, fmt.Errorf("tiering round of %s on node %d: %s", table, ev.By, ev.Error)
		}
		return false, nil
	})
}

// postNDJSON POSTs to path and calls next for each NDJSON event until it
// reports the last one.
func (c *AdminClient) postNDJSON(ctx context.Context, path string, next func(*json.Decoder) (last bool, err error)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(path), nil)
	if err != nil {
		return err
	}
	client := *c.HTTP
	client.Timeout = 0 // progress streams for as long as the operation takes
	resp, err := c.do(&client, req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return c.statusError(path, resp.StatusCode, body)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		last, err := next(dec)
		if err == io.EOF {
			return fmt.Errorf("%s: the connection ended before the operation finished", path)
		}
		if err != nil || last {
			return err
		}
	}
}
