package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// healthz answers ok only once every listener is up and while the node is
// live: a client that waits for it can then connect to the Postgres port.
func TestHealthz(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		ready, live bool
		code        int
		status      string
	}{
		{false, true, http.StatusServiceUnavailable, "starting"},
		{true, false, http.StatusServiceUnavailable, "not live"},
		{true, true, http.StatusOK, "ok"},
	} {
		s.mu.ready, s.mu.live = tc.ready, tc.live
		rec := httptest.NewRecorder()
		s.handleHealthz(rec, httptest.NewRequest("GET", "/healthz", nil))
		var body struct{ Status string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.code || body.Status != tc.status {
			t.Errorf("ready %v live %v: %d %q, want %d %q", tc.ready, tc.live, rec.Code, body.Status, tc.code, tc.status)
		}
	}
}
