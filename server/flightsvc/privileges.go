package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/kv/kvcodec"
)

// Privileges on the Flight paths (docs/security.md). Every call reads the
// view when it starts, so a GRANT or REVOKE holds from the next call; a
// long DoPut is checked once, at its start, like a COPY in PostgreSQL.
//
//	DoGet (rows, state, changelog), lookup   SELECT
//	DoPut to a log table or bucket           INSERT
//	DoPut to a primary-key table or bucket   INSERT and UPDATE (an upsert)
//	kv-write                                 each write's: insert INSERT, update UPDATE,
//	                                         delete DELETE, upsert INSERT and UPDATE
//	                                         (conditional on a row read: UPDATE; on an
//	                                         absent key: INSERT)
//	create-partition                         INSERT
//	GetFlightInfo, GetSchema, describe-table any privilege on the table (a writer
//	bucket-ends                              routes rows with them, as PostgreSQL shows
//	                                         a table's columns to any role with a
//	                                         privilege on it)
//	ListFlights                              lists the tables with any privilege
//	cluster-status, ListActions              any authenticated role
//
// A read forwarded by another node (a token it made for the caller, see
// Pool) needs any of SELECT, INSERT, UPDATE and DELETE rather than SELECT:
// SQL reads rows to update, delete or check them (UPDATE t SET v = 1 needs
// only UPDATE in PostgreSQL), and the forwarding node's SQL front end has
// checked the statement's privileges already; it would read those rows
// without a check if it led the bucket. Only nodes hold the cluster key
// that makes such tokens; a handshake never returns one.

const (
	// anyPrivilege: some privilege on the table.
	anyPrivilege = catalog.PrivAll
	// forwardedRead is what a forwarded read accepts (any of them).
	forwardedRead = catalog.PrivSelect | catalog.PrivInsert | catalog.PrivUpdate | catalog.PrivDelete
	upsert        = catalog.PrivInsert | catalog.PrivUpdate
)

// need is a privilege check: every privilege of privs, or any of them.
type need struct {
	privs catalog.Privileges
	any   bool
}

func all(p catalog.Privileges) need   { return need{privs: p} }
func anyOf(p catalog.Privileges) need { return need{privs: p, any: true} }
func (n need) heldBy(p catalog.Privileges) bool {
	if n.any {
		return p&n.privs != 0
	}
	return p&n.privs == n.privs
}

// readNeed is what reading a table's rows needs from the caller of ctx.
func readNeed(ctx context.Context) need {
	if fwd, _ := ctx.Value(forwardedKey{}).(bool); fwd {
		return anyOf(forwardedRead)
	}
	return all(catalog.PrivSelect)
}

// writeNeed is what a DoPut needs: an append, or an upsert.
func writeNeed(t *table) need {
	if t.primaryKey() {
		return all(upsert)
	}
	return all(catalog.PrivInsert)
}

// kvWriteNeed is what a kv-write batch needs: the union of its writes'.
func kvWriteNeed(writes []flightwire.KVWrite) need {
	var p catalog.Privileges
	for _, w := range writes {
		switch kvcodec.WriteOp(w.Op) {
		case kvcodec.OpInsert, kvcodec.OpInsertIfAbsent:
			p |= catalog.PrivInsert
		case kvcodec.OpUpdate:
			p |= catalog.PrivUpdate
		case kvcodec.OpDelete:
			p |= catalog.PrivDelete
		case kvcodec.OpUpsert:
			switch {
			case w.CheckRow && w.IfRow != nil: // only if the row read is there
				p |= catalog.PrivUpdate
			case w.CheckRow: // only if the key has no row
				p |= catalog.PrivInsert
			default:
				p |= upsert
			}
		}
		// An unknown op needs nothing here: kvWrite refuses it.
	}
	return all(p)
}

// authorize checks that the caller of ctx holds n on the table. Without a
// Guard every call may do anything. A refusal on this node's view is
// checked again once the view has caught up with the metadata log's head,
// so that a GRANT committed through another node holds here at once.
func (s *Service) authorize(ctx context.Context, table catalog.TableID, n need) error {
	if s.cfg.Access == nil {
		return nil
	}
	id, ok := access.FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, msgNoCredentials)
	}
	err := s.authorizeIn(id, table, n)
	if status.Code(err) != codes.PermissionDenied {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if s.cfg.Meta.Sync(sctx) != nil {
		return err // the refusal on this node's view stands
	}
	return s.authorizeIn(id, table, n)
}

// syncTimeout bounds the catch-up of a refused check: with the metadata
// log out of reach the refusal stands after it.
const syncTimeout = 5 * time.Second

// authorizeIn is authorize on the current view.
func (s *Service) authorizeIn(id access.Identity, table catalog.TableID, n need) error {
	var err error
	s.cfg.Meta.Read(func(v *catalog.View) {
		t := v.Tables[table]
		if t == nil {
			err = flightwire.NotFoundStatus(fmt.Sprintf("table %d was dropped", table), flightwire.ReasonNoSuchTable, 0)
			return
		}
		if !n.heldBy(v.TablePrivileges(id.Role, t)) {
			err = permissionStatus(&access.PermissionError{Table: t.Spec.Name, Need: n.privs})
		}
	})
	return err
}

// authorizeName is authorize for a table by name. A table that does not
// exist passes, for the call to report it.
func (s *Service) authorizeName(ctx context.Context, name string, n need) error {
	var id catalog.TableID
	s.cfg.Meta.Read(func(v *catalog.View) {
		if t, ok := v.TableNamed(name); ok {
			id = t.ID
		}
	})
	if id == 0 {
		return nil
	}
	return s.authorize(ctx, id, n)
}

// authorizeBucket is authorize for the table of a bucket. A bucket that
// does not exist passes, for the call to report it.
func (s *Service) authorizeBucket(ctx context.Context, bucket uint64, n need) error {
	var id catalog.TableID
	s.cfg.Meta.Read(func(v *catalog.View) {
		if b, ok := v.Buckets[catalog.BucketID(bucket)]; ok {
			id = b.Table
		}
	})
	if id == 0 {
		return nil
	}
	return s.authorize(ctx, id, n)
}

// visible reports whether the caller of ctx may see table t in a listing
// (read within the caller's view).
func (s *Service) visible(ctx context.Context, v *catalog.View, t *catalog.Table) bool {
	if s.cfg.Access == nil {
		return true
	}
	id, ok := access.FromContext(ctx)
	return ok && v.TablePrivileges(id.Role, t) != 0
}

// permissionStatus is the status of a missing privilege.
func permissionStatus(err error) error {
	var pe *access.PermissionError
	if errors.As(err, &pe) {
		return status.Error(codes.PermissionDenied, pe.Error())
	}
	return status.Error(codes.PermissionDenied, err.Error())
}
