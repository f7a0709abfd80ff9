package server

import "github.com/prometheus/client_golang/prometheus"

var (
	kafkaConnectionsDesc = prometheus.NewDesc("mink_kafka_connections", "Open client connections of the Kafka listener.", nil, nil)
	kafkaRequestsDesc    = prometheus.NewDesc("mink_kafka_requests_total", "Kafka requests answered, by API.", []string{"api"}, nil)
	kafkaBadDesc         = prometheus.NewDesc("mink_kafka_bad_requests_total", "Kafka connections closed for a request that did not parse or is not served.", nil, nil)
	kafkaProducedDesc    = prometheus.NewDesc("mink_kafka_produced_records_total", "Records acknowledged to Kafka producers.", nil, nil)
	kafkaProduceErrDesc  = prometheus.NewDesc("mink_kafka_produce_errors_total", "Partitions of Kafka produce requests answered with an error.", nil, nil)
	kafkaFetchedDesc     = prometheus.NewDesc("mink_kafka_fetched_records_total", "Records sent to Kafka consumers.", nil, nil)
)

// kafkaCollector exports the Kafka listener's counters (nothing without
// --kafka-addr).
type kafkaCollector struct{ s *Server }

func (c kafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kafkaConnectionsDesc, kafkaRequestsDesc, kafkaBadDesc, kafkaProducedDesc, kafkaProduceErrDesc, kafkaFetchedDesc} {
		ch <- d
	}
}

func (c kafkaCollector) Collect(ch chan<- prometheus.Metric) {
	k := c.s.kafka.Load()
	if k == nil {
		return
	}
	st := k.Stats()
	ch <- prometheus.MustNewConstMetric(kafkaConnectionsDesc, prometheus.GaugeValue, float64(st.Connections))
	for api, n := range st.Requests {
		ch <- prometheus.MustNewConstMetric(kafkaRequestsDesc, prometheus.CounterValue, float64(n), api)
	}
	ch <- prometheus.MustNewConstMetric(kafkaBadDesc, prometheus.CounterValue, float64(st.BadRequests))
	ch <- prometheus.MustNewConstMetric(kafkaProducedDesc, prometheus.CounterValue, float64(st.ProducedRecords))
	ch <- prometheus.MustNewConstMetric(kafkaProduceErrDesc, prometheus.CounterValue, float64(st.ProduceErrors))
	ch <- prometheus.MustNewConstMetric(kafkaFetchedDesc, prometheus.CounterValue, float64(st.FetchedRecords))
}
