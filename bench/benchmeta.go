package bench

import (
	"context"
	"fmt"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// benchMeta is an in-memory metadata log as a one-node cluster's
// coordinator leaves it: node 1 registered and holding the coordinator
// lease, and one table whose buckets node 1 leads with their streams
// open. Benchmarks that drive tiering directly start from it.
type benchMeta struct {
	cat *metalog.Catalog
	// created is the CreateTable outcome (the table and its buckets);
	// coord the RegisterCoordinator one (the coordinator epoch).
	created, coord catalog.Outcome
	ctx            context.Context
}

func newBenchMeta(ctx context.Context, spec catalog.TableSpec) (*benchMeta, error) {
	cat, err := metalog.Open(ctx, metalog.NewMemLog(), metalog.Options{Logger: discardLogger()})
	if err != nil {
		return nil, err
	}
	m := &benchMeta{cat: cat, ctx: ctx}
	if err := m.setUp(spec); err != nil {
		cat.Close()
		return nil, err
	}
	return m, nil
}

func (m *benchMeta) setUp(spec catalog.TableSpec) error {
	if _, err := m.propose(catalog.RegisterNode{Node: 1}); err != nil {
		return err
	}
	var err error
	if m.coord, err = m.propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		return err
	}
	if m.created, err = m.propose(catalog.CreateTable{Spec: spec}); err != nil {
		return err
	}
	for _, b := range m.created.Buckets {
		le, err := m.propose(catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: m.coord.Epoch})
		if err != nil {
			return err
		}
		if _, err := m.propose(catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: le.Epoch, Node: 1, NodeEpoch: 1}); err != nil {
			return err
		}
	}
	return nil
}

// propose appends rec and returns its outcome; a rejection is an error.
func (m *benchMeta) propose(rec catalog.Record) (catalog.Outcome, error) {
	o, err := m.cat.Propose(m.ctx, rec)
	if err == nil {
		err = o.Err
	}
	if err != nil {
		return o, fmt.Errorf("%T: %w", rec, err)
	}
	return o, nil
}

func (m *benchMeta) close() { m.cat.Close() }

// factsSpec is the facts table of the tiering benchmarks.
func factsSpec(buckets int) catalog.TableSpec {
	return catalog.TableSpec{Name: "facts", Buckets: buckets, Columns: []catalog.Column{
		{Name: "id", Type: "bigint"}, {Name: "store", Type: "integer"}, {Name: "amount", Type: "double precision"},
		{Name: "name", Type: "text"}, {Name: "ts", Type: "timestamptz"}, {Name: "flag", Type: "boolean"},
		{Name: "user_id", Type: "bigint"}, {Name: "day", Type: "date"},
	}}
}
