package catalog

// Unexported names the external tests (package catalog_test) need. Those
// tests are external because they use catalogtest, which imports catalog.
const (
	MaxKnownKind  = maxKnownKind
	ViewHeaderLen = viewHeaderLen
)

var TopicPartitions = topicPartitions

func CheckInvariants(v *View) error { return v.checkInvariants() }
