package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// AdminClient calls a node's admin HTTP API (docs/admin-api.md). The CLI's
// admin commands use it.
type AdminClient struct {
	// Addr is the node's admin address, HOST:PORT.
	Addr string
	HTTP *http.Client
}

// NewAdminClient returns a client for the node whose admin listener is addr.
func NewAdminClient(addr string) *AdminClient {
	return &AdminClient{Addr: addr, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// ClusterStatus fetches GET /api/v1/cluster/status.
func (c *AdminClient) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	err := c.getJSON(ctx, "/api/v1/cluster/status", &st)
	return st, err
}

func (c *AdminClient) getJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach mink admin API at %s: %w", c.Addr, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read %s from %s: %w", path, c.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %s", c.Addr, e.Error)
		}
		return fmt.Errorf("%s%s: HTTP %d", c.Addr, path, resp.StatusCode)
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
