package s3stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/minkdb/mink/catalog"
)

// The byte layouts below are documented in docs/format/s3stream.md. All
// integers are little-endian; every object ends with a CRC-32C of all the
// bytes before it, so a torn or corrupted object is detected on read.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned when an object fails its checksum or its framing.
var ErrCorrupt = errors.New("s3stream: corrupt object")

const (
	walMagic    = "MKWL"
	objMagic    = "MKSO"
	formatV1    = 1
	flagSeal    = 1 << 0
	walHeader   = 4 + 1 + 1 + 2 + 4 + 8 + 8 + 4 // magic, version, flags, reserved, node, epoch, seq, count
	walEntryHdr = 8 + 8 + 8 + 4 + 4             // stream, stream epoch, offset, records, payload length
	objHeader   = 4 + 1 + 1 + 2 + 8 + 8 + 8 + 8 + 4
	objEntryHdr = 8 + 4 + 4 // offset, records, payload length
	trailer     = 4
)

// Entry is one appended batch: Count records at offsets [Offset, Offset+Count).
// Payload is opaque to s3stream.
type Entry struct {
	Offset  uint64
	Count   uint32
	Payload []byte
}

// End is the offset just past the entry.
func (e Entry) End() uint64 { return e.Offset + uint64(e.Count) }

// walEntry is an entry tagged with the stream and stream epoch it belongs to.
type walEntry struct {
	Stream      catalog.StreamID
	StreamEpoch uint64
	Entry
}

// walObject is the decoded form of one WAL object.
type walObject struct {
	Node    catalog.NodeID
	Epoch   uint64 // node epoch
	Seq     uint64
	Sealed  bool // written by a node taking over: the WAL ends here
	Entries []walEntry
}

func encodeWAL(w walObject) []byte {
	size := walHeader + trailer
	for _, e := range w.Entries {
		size += walEntryHdr + len(e.Payload)
	}
	b := make([]byte, 0, size)
	b = append(b, walMagic...)
	b = append(b, formatV1)
	var flags byte
	if w.Sealed {
		flags |= flagSeal
	}
	b = append(b, flags, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(w.Node))
	b = binary.LittleEndian.AppendUint64(b, w.Epoch)
	b = binary.LittleEndian.AppendUint64(b, w.Seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(w.Entries)))
	for _, e := range w.Entries {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Stream))
		b = binary.LittleEndian.AppendUint64(b, e.StreamEpoch)
		b = binary.LittleEndian.AppendUint64(b, e.Offset)
		b = binary.LittleEndian.AppendUint32(b, e.Count)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Payload)))
		b = append(b, e.Payload...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeWAL(b []byte) (walObject, error) {
	var w walObject
	body, err := checkFrame(b, walMagic, walHeader)
	if err != nil {
		return w, err
	}
	w.Sealed = body[5]&flagSeal != 0
	w.Node = catalog.NodeID(binary.LittleEndian.Uint32(body[8:]))
	w.Epoch = binary.LittleEndian.Uint64(body[12:])
	w.Seq = binary.LittleEndian.Uint64(body[20:])
	n := binary.LittleEndian.Uint32(body[28:])
	p := body[walHeader:]
	if uint64(n) > uint64(len(p))/walEntryHdr {
		return w, fmt.Errorf("%w: entry count %d exceeds object size", ErrCorrupt, n)
	}
	w.Entries = make([]walEntry, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(p) < walEntryHdr {
			return w, fmt.Errorf("%w: truncated entry %d", ErrCorrupt, i)
		}
		e := walEntry{
			Stream:      catalog.StreamID(binary.LittleEndian.Uint64(p)),
			StreamEpoch: binary.LittleEndian.Uint64(p[8:]),
		}
		e.Offset = binary.LittleEndian.Uint64(p[16:])
		e.Count = binary.LittleEndian.Uint32(p[24:])
		ln := binary.LittleEndian.Uint32(p[28:])
		p = p[walEntryHdr:]
		if uint64(ln) > uint64(len(p)) {
			return w, fmt.Errorf("%w: entry %d payload length %d exceeds object", ErrCorrupt, i, ln)
		}
		e.Payload = p[:ln:ln]
		p = p[ln:]
		w.Entries = append(w.Entries, e)
	}
	if len(p) != 0 {
		return w, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(p))
	}
	return w, nil
}

// streamObject is the decoded form of one stream object: the entries of one
// stream covering [Start, End) without gaps.
type streamObject struct {
	Stream  catalog.StreamID
	Epoch   uint64
	Start   uint64
	End     uint64
	Entries []Entry
}

func encodeStreamObject(o streamObject) []byte {
	size := objHeader + trailer
	for _, e := range o.Entries {
		size += objEntryHdr + len(e.Payload)
	}
	b := make([]byte, 0, size)
	b = append(b, objMagic...)
	b = append(b, formatV1, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(o.Stream))
	b = binary.LittleEndian.AppendUint64(b, o.Epoch)
	b = binary.LittleEndian.AppendUint64(b, o.Start)
	b = binary.LittleEndian.AppendUint64(b, o.End)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(o.Entries)))
	for _, e := range o.Entries {
		b = binary.LittleEndian.AppendUint64(b, e.Offset)
		b = binary.LittleEndian.AppendUint32(b, e.Count)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.Payload)))
		b = append(b, e.Payload...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeStreamObject(b []byte) (streamObject, error) {
	var o streamObject
	body, err := checkFrame(b, objMagic, objHeader)
	if err != nil {
		return o, err
	}
	o.Stream = catalog.StreamID(binary.LittleEndian.Uint64(body[8:]))
	o.Epoch = binary.LittleEndian.Uint64(body[16:])
	o.Start = binary.LittleEndian.Uint64(body[24:])
	o.End = binary.LittleEndian.Uint64(body[32:])
	n := binary.LittleEndian.Uint32(body[40:])
	p := body[objHeader:]
	if uint64(n) > uint64(len(p))/objEntryHdr {
		return o, fmt.Errorf("%w: entry count %d exceeds object size", ErrCorrupt, n)
	}
	o.Entries = make([]Entry, 0, n)
	next := o.Start
	for i := uint32(0); i < n; i++ {
		if len(p) < objEntryHdr {
			return o, fmt.Errorf("%w: truncated entry %d", ErrCorrupt, i)
		}
		e := Entry{Offset: binary.LittleEndian.Uint64(p), Count: binary.LittleEndian.Uint32(p[8:])}
		ln := binary.LittleEndian.Uint32(p[12:])
		p = p[objEntryHdr:]
		if uint64(ln) > uint64(len(p)) {
			return o, fmt.Errorf("%w: entry %d payload length %d exceeds object", ErrCorrupt, i, ln)
		}
		if e.Offset != next || e.Count == 0 {
			return o, fmt.Errorf("%w: entry %d at offset %d count %d, want offset %d", ErrCorrupt, i, e.Offset, e.Count, next)
		}
		next = e.End()
		e.Payload = p[:ln:ln]
		p = p[ln:]
		o.Entries = append(o.Entries, e)
	}
	if len(p) != 0 || next != o.End {
		return o, fmt.Errorf("%w: entries end at %d, header says %d", ErrCorrupt, next, o.End)
	}
	return o, nil
}

// checkFrame verifies magic, version and checksum and returns b without the
// trailer.
func checkFrame(b []byte, magic string, header int) ([]byte, error) {
	if len(b) < header+trailer {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a header", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-trailer], binary.LittleEndian.Uint32(b[len(b)-trailer:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: checksum %08x, stored %08x", ErrCorrupt, got, sum)
	}
	if string(body[:4]) != magic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrCorrupt, body[:4], magic)
	}
	if body[4] != formatV1 {
		return nil, fmt.Errorf("%w: unknown format version %d", ErrCorrupt, body[4])
	}
	return body, nil
}

// Object keys. Numbers are zero-padded so that keys sort numerically.

func walPrefix(node catalog.NodeID, epoch uint64) string {
	return fmt.Sprintf("wal/%d/%020d/", node, epoch)
}

func walKey(node catalog.NodeID, epoch, seq uint64) string {
	return fmt.Sprintf("%s%020d", walPrefix(node, epoch), seq)
}

func streamPrefix(stream catalog.StreamID) string {
	return fmt.Sprintf("streams/%d/", stream)
}

// streamObjectKey names the object holding [start, end) of stream, written at
// epoch. Two writers at different epochs never collide; the same writer
// retrying the same range writes the same bytes.
func streamObjectKey(stream catalog.StreamID, start, end, epoch uint64) string {
	return fmt.Sprintf("%s%020d-%020d.%d", streamPrefix(stream), start, end, epoch)
}
