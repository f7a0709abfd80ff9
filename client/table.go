package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/kv/kvcodec"
)

// tableMeta is a table's routing information, as some node's view had it.
type tableMeta struct {
	info flightwire.TableInfo
	// buckets are the unpartitioned table's bucket ids in index order.
	buckets []uint64
	// partitions maps partition values to their bucket ids in index order.
	partitions map[string][]uint64

	// The key and row codec of a primary-key table, built on first use.
	codecOnce sync.Once
	kvCodec   *kvcodec.Codec
	codecErr  error
}

func newTableMeta(info flightwire.TableInfo) *tableMeta {
	m := &tableMeta{info: info, partitions: map[string][]uint64{}}
	for _, b := range info.Buckets {
		m.buckets = append(m.buckets, b.ID)
	}
	for _, p := range info.Partitions {
		ids := make([]uint64, len(p.Buckets))
		for i, b := range p.Buckets {
			ids[i] = b.ID
		}
		m.partitions[p.Value] = ids
	}
	return m
}

// table returns the cached routing information of a table, asking a node
// when it is not cached or refresh is set.
func (c *Client) table(ctx context.Context, name string, refresh bool) (*tableMeta, error) {
	if !refresh {
		c.mu.Lock()
		m := c.mu.tables[name]
		c.mu.Unlock()
		if m != nil {
			return m, nil
		}
	}
	var info flightwire.TableInfo
	err := c.anyNode(ctx, func(fc flight.FlightServiceClient) error {
		return flightwire.DoAction(ctx, fc, flightwire.ActionDescribeTable, flightwire.DescribeTableRequest{Table: name}, &info)
	})
	if err != nil {
		return nil, tableErr(name, err)
	}
	return c.learn(info), nil
}

// createPartition creates a partition of a partitioned table (if missing)
// and returns the table's refreshed routing information.
func (c *Client) createPartition(ctx context.Context, name, value string) (*tableMeta, error) {
	var info flightwire.TableInfo
	err := c.anyNode(ctx, func(fc flight.FlightServiceClient) error {
		return flightwire.DoAction(ctx, fc, flightwire.ActionCreatePartition, flightwire.CreatePartitionRequest{Table: name, Value: value}, &info)
	})
	if err != nil {
		return nil, tableErr(name, err)
	}
	return c.learn(info), nil
}

// learn caches a table's routing information and its buckets' leaders.
func (c *Client) learn(info flightwire.TableInfo) *tableMeta {
	m := newTableMeta(info)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.tables[info.Name] = m
	setLeaders := func(bs []flightwire.BucketInfo) {
		for _, b := range bs {
			if addr, err := flightwire.ParseLocation(b.Location); err == nil && b.Location != "" {
				c.mu.leaders[b.ID] = addr
			}
		}
	}
	setLeaders(info.Buckets)
	for _, p := range info.Partitions {
		setLeaders(p.Buckets)
	}
	return m
}

// forgetTable drops a table's cached routing information.
func (c *Client) forgetTable(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.tables, name)
}

func tableErr(name string, err error) error {
	if flightwire.IsNotFound(err) {
		return fmt.Errorf("table %q: %w", name, ErrNoSuchTable)
	}
	return fmt.Errorf("table %q: %w", name, err)
}
