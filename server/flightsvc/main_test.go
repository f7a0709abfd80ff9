package flightsvc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it started: nodes, fake servers, clients and scans.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
