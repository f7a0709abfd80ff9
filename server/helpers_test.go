package server

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// memCatalog opens a catalog on an in-memory metadata log, closed when the
// test ends, and returns it with a propose that fails the test unless the
// record is accepted.
func memCatalog(t *testing.T) (*metalog.Catalog, func(catalog.Record) catalog.Outcome) {
	t.Helper()
	ctx := context.Background()
	cat, err := metalog.Open(ctx, metalog.NewMemLog(), metalog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat, func(r catalog.Record) catalog.Outcome {
		t.Helper()
		out, err := cat.Propose(ctx, r)
		if err == nil {
			err = out.Err
		}
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		return out
	}
}
