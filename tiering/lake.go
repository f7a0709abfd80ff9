package tiering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// Snapshot summary properties written by every tiering round. OffsetsProperty
// holds the complete per-bucket tiered offsets of the table after the round
// ({"<bucket id>": <exclusive end offset>}), so the newest lake snapshot alone
// says what is tiered: this is what repairs a round whose lake commit
// succeeded while its CommitTieringRound was lost or rejected.
const (
	OffsetsProperty = "mink.tiered-offsets"
	EpochProperty   = "mink.coordinator-epoch"
)

// ErrLakeConflict: another writer committed a lake snapshot first (a
// create-only put of the next metadata version found it taken, or the
// table's current snapshot is not the one the round started from). Nothing
// of this round is visible; the next round starts from the new snapshot.
var ErrLakeConflict = errors.New("lake commit conflict")

// LakePrefix is the object-key prefix of a table's lake (docs/format/lake.md).
func LakePrefix(id catalog.TableID) string { return fmt.Sprintf("lake/%d/", id) }

func metadataKey(id catalog.TableID, version int) string {
	return fmt.Sprintf("%smetadata/v%d.metadata.json", LakePrefix(id), version)
}

// Lake is the set of lake tables in one object store: it loads, creates and
// commits their Iceberg metadata. Safe for concurrent use; commits of one
// table are serialized by the create-only put of the next metadata version.
type Lake struct {
	store objstore.Store
	// base is the store's URL; Iceberg locations are base + "/" + key.
	base string
}

// NewLake returns the lake in store, whose URL (the --object-store value,
// "file:///abs/path" or "s3://bucket/prefix") is base.
func NewLake(store objstore.Store, base string) *Lake {
	return &Lake{store: store, base: strings.TrimSuffix(base, "/")}
}

// Location is the Iceberg location (absolute URL) of an object key.
func (l *Lake) Location(key string) string { return l.base + "/" + key }

func (l *Lake) fs(ctx context.Context) table.FSysF {
	return func(context.Context) (iceio.IO, error) {
		return &storeIO{ctx: ctx, store: l.store, base: l.base}, nil
	}
}

// currentVersion returns the highest committed metadata version of a table's
// lake, 0 if the lake does not exist yet.
func (l *Lake) currentVersion(ctx context.Context, id catalog.TableID) (int, error) {
	prefix := LakePrefix(id) + "metadata/v"
	objs, err := l.store.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("list lake metadata of table %d: %w", id, err)
	}
	version := 0
	for _, o := range objs {
		s, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), ".metadata.json")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(s); err == nil && n > version {
			version = n
		}
	}
	return version, nil
}

// Load returns the current lake table of table id, or nil (and no error) if
// it has no lake yet. ctx bounds every read the returned table makes.
func (l *Lake) Load(ctx context.Context, id catalog.TableID) (*table.Table, error) {
	version, err := l.currentVersion(ctx, id)
	if err != nil || version == 0 {
		return nil, err
	}
	return l.loadVersion(ctx, id, version)
}

func (l *Lake) loadVersion(ctx context.Context, id catalog.TableID, version int) (*table.Table, error) {
	key := metadataKey(id, version)
	data, err := l.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read lake metadata %s: %w", key, err)
	}
	meta, err := table.ParseMetadataBytes(data)
	if err != nil {
		return nil, fmt.Errorf("parse lake metadata %s: %w", key, err)
	}
	cat := &lakeCatalog{lake: l, id: id, ctx: ctx}
	return table.New(ident(id), meta, l.Location(key), l.fs(ctx), cat), nil
}

func ident(id catalog.TableID) table.Identifier {
	return table.Identifier{"mink", strconv.FormatUint(uint64(id), 10)}
}

// open returns the lake table of a table, creating it (metadata version 1,
// no snapshot) if it does not exist.
func (l *Lake) open(ctx context.Context, id catalog.TableID, ls *lakeSchema) (*table.Table, error) {
	tbl, err := l.Load(ctx, id)
	if err != nil || tbl != nil {
		return tbl, err
	}
	spec := ls.partitionSpec()
	props := iceberg.Properties{
		"format-version":                  "2",
		"write.parquet.compression-codec": "zstd",
		table.CommitNumRetriesKey:         "0",
		"mink.table-id":                   strconv.FormatUint(uint64(id), 10),
	}
	meta, err := table.NewMetadata(ls.createdSchema(), &spec, table.UnsortedSortOrder,
		l.Location(strings.TrimSuffix(LakePrefix(id), "/")), props)
	if err != nil {
		return nil, fmt.Errorf("new lake metadata of table %d: %w", id, err)
	}
	data, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("encode lake metadata of table %d: %w", id, err)
	}
	err = l.store.PutIfAbsent(ctx, metadataKey(id, 1), data)
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return nil, fmt.Errorf("create lake of table %d: %w", id, err)
	}
	// Created by us or by a concurrent round: either way version 1 exists.
	return l.Load(ctx, id)
}

// evolve brings the lake's current Iceberg schema up to ls, after giving
// ls the lake's names of the table's columns (adoptLakeNames: a renamed
// column keeps its name in the lake): the columns
// ALTER TABLE added since the lake was last written are added as optional
// fields with new field ids (after the ids of every earlier schema: Iceberg's
// last-column-id), placed before __bucket and __offset, with the table's
// name mapping extended to them. It is a metadata version of its own (the
// old schemas stay in the metadata; the current snapshot is unchanged) and
// it returns the table at that version, or tbl when the lake has every
// column. Files written before keep their schema: a reader gives a column a
// file lacks its missing value (LakeReader, widenRows).
//
// A lake with a column ls lacks was evolved by a writer whose catalog view
// was newer than this one's: an error (ErrLakeConflict), so that nothing is
// written with fewer columns than the lake; a later round, whose view has
// caught up, succeeds.
func (l *Lake) evolve(ctx context.Context, id catalog.TableID, tbl *table.Table, ls *lakeSchema) (*table.Table, error) {
	cur := tbl.Schema()
	if err := ls.adoptLakeNames(cur); err != nil {
		return nil, fmt.Errorf("the lake of table %d: %w", id, err)
	}
	for _, f := range cur.Fields() {
		if _, ok := ls.column(f.Name); !ok {
			return nil, fmt.Errorf("%w: the lake of table %d has column %q, which this node's catalog view does not have yet", ErrLakeConflict, id, f.Name)
		}
	}
	var missing, relaxed []lakeColumn
	for _, c := range ls.cols {
		if f, ok := cur.FindFieldByName(c.name); ok {
			// ALTER COLUMN … DROP NOT NULL: the lake field becomes
			// optional. Never the reverse (Column.LakeOptional).
			if f.Required && !c.field.Required {
				relaxed = append(relaxed, c)
			}
			continue
		}
		if !c.added {
			return nil, fmt.Errorf("the lake of table %d has no column %q, which the table was created with", id, c.name)
		}
		missing = append(missing, c)
	}
	if len(missing) == 0 && len(relaxed) == 0 {
		return tbl, nil
	}
	tx := tbl.NewTransaction()
	var opts []table.UpdateSchemaOption
	if nm := tbl.Metadata().NameMapping(); nm != nil {
		opts = append(opts, table.WithNameMapping(nm))
	}
	update := tx.UpdateSchema(true, false, opts...)
	for _, c := range missing {
		update.AddColumn([]string{c.name}, c.field.Type, "", false, nil).
			MoveBefore([]string{c.name}, []string{BucketColumn})
	}
	for _, c := range relaxed {
		update.UpdateColumn([]string{c.name}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Valid: true, Val: false}})
	}
	if err := update.Commit(); err != nil {
		return nil, fmt.Errorf("evolve the lake schema of table %d (%d columns added, %d made optional): %w", id, len(missing), len(relaxed), err)
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("commit the lake schema of table %d: %w", id, err)
	}
	return committed, nil
}

// lakeCatalog commits a lake table's metadata: a commit is the create-only
// put of the next metadata version, validated against the version current
// at that moment. It is the table.CatalogIO of tables loaded by Lake.
type lakeCatalog struct {
	lake *Lake
	id   catalog.TableID
	ctx  context.Context
}

func (c *lakeCatalog) LoadTable(ctx context.Context, _ table.Identifier) (*table.Table, error) {
	return c.lake.Load(ctx, c.id)
}

func (c *lakeCatalog) CommitTable(ctx context.Context, _ table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	version, err := c.lake.currentVersion(ctx, c.id)
	if err != nil {
		return nil, "", err
	}
	if version == 0 {
		return nil, "", fmt.Errorf("commit lake of table %d: no metadata", c.id)
	}
	cur, err := c.lake.loadVersion(ctx, c.id, version)
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(cur.Metadata()); err != nil {
			// Not iceberg-go's ErrCommitFailed: the transaction must not be
			// replayed onto the new snapshot (that would tier rows twice).
			return nil, "", fmt.Errorf("%w: table %d metadata version %d: %v", ErrLakeConflict, c.id, version, err)
		}
	}
	updated, err := table.UpdateTableMetadata(cur.Metadata(), updates, cur.MetadataLocation())
	if err != nil {
		return nil, "", fmt.Errorf("apply lake updates of table %d: %w", c.id, err)
	}
	data, err := json.Marshal(updated)
	if err != nil {
		return nil, "", fmt.Errorf("encode lake metadata of table %d: %w", c.id, err)
	}
	key := metadataKey(c.id, version+1)
	if err := c.lake.store.PutIfAbsent(ctx, key, data); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, "", fmt.Errorf("%w: %s was committed by another writer", ErrLakeConflict, key)
		}
		return nil, "", fmt.Errorf("commit lake metadata %s: %w", key, err)
	}
	return updated, c.lake.Location(key), nil
}

// LakeState is what the current lake snapshot of a table says.
type LakeState struct {
	// Version is the metadata version (0: no lake yet).
	Version    int
	SnapshotID int64
	Sequence   uint64
	// Offsets are the tiered offsets recorded in the snapshot summary.
	Offsets map[catalog.BucketID]uint64
}

// stateOf reads the tiered offsets from the current snapshot of tbl.
func stateOf(tbl *table.Table) (LakeState, error) {
	var st LakeState
	if tbl == nil {
		return st, nil
	}
	st.Version = metadataVersion(tbl.MetadataLocation())
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return st, nil
	}
	st.SnapshotID, st.Sequence = snap.SnapshotID, uint64(snap.SequenceNumber)
	if snap.Summary == nil {
		return st, fmt.Errorf("lake snapshot %d has no summary", snap.SnapshotID)
	}
	raw, ok := snap.Summary.Properties[OffsetsProperty]
	if !ok {
		return st, fmt.Errorf("lake snapshot %d has no %s property", snap.SnapshotID, OffsetsProperty)
	}
	offsets, err := decodeOffsets(raw)
	if err != nil {
		return st, fmt.Errorf("lake snapshot %d: %w", snap.SnapshotID, err)
	}
	st.Offsets = offsets
	return st, nil
}

func metadataVersion(loc string) int {
	s := loc[strings.LastIndexByte(loc, '/')+1:]
	s = strings.TrimSuffix(strings.TrimPrefix(s, "v"), ".metadata.json")
	n, _ := strconv.Atoi(s)
	return n
}

func encodeOffsets(offsets map[catalog.BucketID]uint64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, id := range slices.Sorted(maps.Keys(offsets)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", strconv.FormatUint(uint64(id), 10), offsets[id])
	}
	b.WriteByte('}')
	return b.String()
}

func decodeOffsets(raw string) (map[catalog.BucketID]uint64, error) {
	var m map[string]uint64
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("bad %s %q: %w", OffsetsProperty, raw, err)
	}
	out := make(map[catalog.BucketID]uint64, len(m))
	for k, v := range m {
		id, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad %s %q: bucket %q", OffsetsProperty, raw, k)
		}
		out[catalog.BucketID(id)] = v
	}
	return out, nil
}
