package sqlfront

import (
	"errors"

	"github.com/minkdb/mink/buckets"
)

// A statement reaches a bucket here when this node leads it, or at its
// leader through Remote (which follows Flight redirects itself); while
// the bucket is opening, or the view here has not caught up with a move,
// it tries again for a while (buckets.Retry). These are the pieces every
// such caller (reads, appends, primary-key writes and lookups) shares.

// ledElsewhere returns the Flight address of a bucket's leader when err
// says another node leads it and this front end can reach that node (it
// has a Remote, and the view names the leader's address).
func (f *Frontend) ledElsewhere(err error) (string, bool) {
	var nle *buckets.NotLeaderError
	if errors.As(err, &nle) && f.cfg.Remote != nil && nle.To != "" {
		return nle.To, true
	}
	return "", false
}
