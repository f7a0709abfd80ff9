package kafka

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxAPIKey bounds the API keys counted per key (Kafka's keys are below
// it).
const maxAPIKey = 128

// counters are the listener's statistics, updated without locks.
type counters struct {
	connections     atomic.Int64
	requests        [maxAPIKey]atomic.Uint64
	badRequests     atomic.Uint64
	producedRecords atomic.Uint64
	produceErrors   atomic.Uint64
	fetchedRecords  atomic.Uint64
}

// Stats is a snapshot of the listener's counters.
type Stats struct {
	// Connections is the number of open client connections.
	Connections int64
	// Requests counts the requests answered, by API name.
	Requests map[string]uint64
	// BadRequests counts connections closed for a request that could not
	// be parsed or is not served, or that came before SASL authentication.
	BadRequests uint64
	// ProducedRecords counts records acknowledged to producers;
	// ProduceErrors the partitions of produce requests answered with an
	// error.
	ProducedRecords, ProduceErrors uint64
	// FetchedRecords counts records sent to consumers.
	FetchedRecords uint64
}

// Stats returns the listener's counters.
func (s *Server) Stats() Stats {
	c := &s.counters
	st := Stats{
		Connections: c.connections.Load(), BadRequests: c.badRequests.Load(),
		ProducedRecords: c.producedRecords.Load(), ProduceErrors: c.produceErrors.Load(),
		FetchedRecords: c.fetchedRecords.Load(), Requests: map[string]uint64{},
	}
	for key := range c.requests {
		if n := c.requests[key].Load(); n > 0 {
			st.Requests[kmsg.NameForKey(int16(key))] = n
		}
	}
	return st
}
