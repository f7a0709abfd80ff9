package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
)

// errCorruptFile marks a lake data file that fails verifyParquet.
var errCorruptFile = errors.New("fails its page checksums or does not decode")

// verifyParquet reads every page of a lake data file, which checks the
// CRC-32 that the tiering writer records in each page header (Parquet's
// optional page checksum; parquet-go writes and checks it, arrow-go, which
// iceberg-go reads with, does neither). A flipped byte in a page is found
// here instead of being decoded into wrong values, and a damaged page
// header here instead of in arrow-go's decoder (which may panic on one).
// The footer has no checksum: a damaged footer fails only if it no longer
// decodes. The file is then decoded whole with arrow-go too, in this
// goroutine, where a panic of its decoder on damaged bytes is recovered:
// in the scan, it decodes in goroutines of its own, and a panic there
// would end the process.
func verifyParquet(data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errCorruptFile, p)
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("%w: %v", errCorruptFile, err)
	}
	for _, rg := range f.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			pages := cc.Pages()
			for {
				p, err := pages.ReadPage()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					pages.Close()
					return fmt.Errorf("%w: %v", errCorruptFile, err)
				}
				parquet.Release(p)
			}
			if err := pages.Close(); err != nil {
				return fmt.Errorf("%w: %v", errCorruptFile, err)
			}
		}
	}
	return verifyArrow(data)
}

// verifyArrow decodes every column of a Parquet file with arrow-go.
func verifyArrow(data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errCorruptFile, p)
		}
	}()
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", errCorruptFile, err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{Parallel: false, BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%w: %v", errCorruptFile, err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errCorruptFile, err)
	}
	defer rr.Release()
	for rr.Next() {
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %v", errCorruptFile, err)
	}
	return nil
}
