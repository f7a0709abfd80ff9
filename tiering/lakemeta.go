package tiering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/minkdb/mink/catalog"
)

// ErrNoLakeMetadata: no metadata version of a table's lake has the snapshot
// asked for as its current snapshot.
var ErrNoLakeMetadata = errors.New("no lake metadata version has the snapshot as current")

// CommittedMetadata is one metadata version of a table's lake as it is
// stored: what an external Iceberg reader is given for the table.
type CommittedMetadata struct {
	// Location is the version's absolute Iceberg location
	// (<store URL>/lake/<id>/metadata/v<N>.metadata.json).
	Location string
	Version  int
	// JSON is the metadata file's content, unchanged.
	JSON []byte
}

// MetadataAt returns the newest metadata version of table id's lake whose
// current snapshot is snapshot: the version that committed it, or a later
// one that left it current (an ADD COLUMN schema change, expired older
// snapshots). Versions newer than that whose current snapshot is another
// one (a lake commit whose CommitTieringRound is not recorded, or was
// rejected) are skipped, so a caller that passes the metadata log's
// snapshot gets what the log records, on every node. ErrNoLakeMetadata
// when no listed version has it.
func (l *Lake) MetadataAt(ctx context.Context, id catalog.TableID, snapshot int64) (CommittedMetadata, error) {
	prefix := LakePrefix(id) + "metadata/v"
	objs, err := l.store.List(ctx, prefix)
	if err != nil {
		return CommittedMetadata{}, fmt.Errorf("list lake metadata of table %d: %w", id, err)
	}
	var versions []int
	for _, o := range objs {
		s, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), ".metadata.json")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			versions = append(versions, n)
		}
	}
	slices.Sort(versions)
	for _, version := range slices.Backward(versions) {
		key := metadataKey(id, version)
		data, err := l.store.Get(ctx, key)
		if err != nil {
			return CommittedMetadata{}, fmt.Errorf("read lake metadata %s: %w", key, err)
		}
		var head struct {
			CurrentSnapshotID *int64 `json:"current-snapshot-id"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return CommittedMetadata{}, fmt.Errorf("parse lake metadata %s: %w", key, err)
		}
		if head.CurrentSnapshotID != nil && *head.CurrentSnapshotID == snapshot {
			return CommittedMetadata{Location: l.Location(key), Version: version, JSON: data}, nil
		}
	}
	return CommittedMetadata{}, fmt.Errorf("table %d, snapshot %d (versions %v): %w", id, snapshot, versions, ErrNoLakeMetadata)
}
