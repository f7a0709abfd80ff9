package sqlfront

import (
	"context"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// planCatalogQuery plans queries of PostgreSQL's system catalogs
// (pg_catalog, information_schema) that psql's \d commands and drivers'
// metadata calls send. ok is false for any other query.
func (s *session) planCatalogQuery(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (st *stmt, ok bool, err error) {
	return nil, false, nil
}
