package flightsql_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it started: nodes, clients and streams.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
