package client

// SetLeader sets the cached leader of a bucket, so that tests can make the
// client start at the wrong node.
func (c *Client) SetLeader(bucket uint64, addr string) { c.setLeader(bucket, addr) }

// Leader is the cached leader of a bucket.
func (c *Client) Leader(bucket uint64) string { return c.leader(bucket) }
