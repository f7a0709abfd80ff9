package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerKeys are the requests the listener answers itself, with the
// versions it advertises. The ranges start at the old versions that
// librdkafka's feature checks need (it enables a feature only when, for
// example, Produce v0 or Fetch v4 is inside the range). They stop before
// the versions that address topics by id (Produce v13, Fetch v13): mink's
// topics are named. Produce v0–v2 are advertised but their magic v0/v1
// message sets are refused per partition (UNSUPPORTED_FOR_MESSAGE_FORMAT).
var brokerKeys = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: int16(kmsg.Produce), MinVersion: 0, MaxVersion: 12},
	{ApiKey: int16(kmsg.Fetch), MinVersion: 4, MaxVersion: 12},
	{ApiKey: int16(kmsg.ListOffsets), MinVersion: 0, MaxVersion: 8},
	{ApiKey: int16(kmsg.Metadata), MinVersion: 0, MaxVersion: 12},
	{ApiKey: int16(kmsg.OffsetForLeaderEpoch), MinVersion: 0, MaxVersion: 4},
	{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: 4},
	{ApiKey: int16(kmsg.CreateTopics), MinVersion: 0, MaxVersion: 7},
	{ApiKey: int16(kmsg.DeleteTopics), MinVersion: 0, MaxVersion: 5},
	{ApiKey: int16(kmsg.InitProducerID), MinVersion: 0, MaxVersion: 4},
	{ApiKey: int16(kmsg.DescribeConfigs), MinVersion: 0, MaxVersion: 4},
	{ApiKey: int16(kmsg.DescribeCluster), MinVersion: 0, MaxVersion: 1},
}

// saslKeys are the SASL requests, advertised when the listener has a
// guard (sasl.go). SaslHandshake v0 is followed by unframed tokens, v1 by
// SaslAuthenticate requests (KIP-152).
var saslKeys = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: int16(kmsg.SASLHandshake), MinVersion: 0, MaxVersion: 1},
	{ApiKey: int16(kmsg.SASLAuthenticate), MinVersion: 0, MaxVersion: 2},
}

// keys is every request the listener advertises.
func (s *Server) keys() []kmsg.ApiVersionsResponseApiKey {
	keys := append([]kmsg.ApiVersionsResponseApiKey(nil), brokerKeys...)
	if s.cfg.Access != nil {
		keys = append(keys, saslKeys...)
	}
	if s.cfg.Groups != nil {
		keys = append(keys, s.cfg.GroupKeys...)
	}
	return keys
}

// supported reports whether the listener answers version of key.
func (s *Server) supported(key, version int16) bool {
	for _, k := range s.keys() {
		if k.ApiKey == key {
			return version >= k.MinVersion && version <= k.MaxVersion
		}
	}
	return false
}

func (s *Server) apiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = s.keys()
	return resp
}

// apiVersionsUnsupported is the v0 answer to an ApiVersions request of a
// version the listener does not know (KIP-511).
func (s *Server) apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = s.keys()
	return resp
}
