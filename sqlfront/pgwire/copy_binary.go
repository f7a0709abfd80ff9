package pgwire

import (
	"encoding/binary"
	"fmt"
)

// The binary COPY format (PostgreSQL's "Binary Format" of COPY):
//
//	header:  "PGCOPY\n\377\r\n\0" (11 bytes)
//	         int32 flags      bit 16: OIDs included (rejected); bits 17-31
//	                          are critical and must be 0; bits 0-15 are ignored
//	         int32 ext_len    then ext_len bytes of header extension, skipped
//	tuple:   int16 field count (-1 is the trailer, which ends the data)
//	         per field: int32 length (-1 for NULL), then that many bytes of
//	         the type's binary representation
//
// All integers are big-endian.
var binarySignature = []byte("PGCOPY\n\xff\r\n\x00")

func binaryHeader() []byte {
	h := append([]byte(nil), binarySignature...)
	return append(h, 0, 0, 0, 0, 0, 0, 0, 0) // flags 0, no extension
}

// binaryParser parses the binary format.
type binaryParser struct {
	ncols  int
	maxRow int

	pending   []byte
	gotHeader bool
	extLeft   int // header extension bytes still to skip
	tuple     int64
	done      bool // saw the trailer
	fields    [][]byte
}

func (p *binaryParser) line() int64 { return p.tuple + 1 }

func (p *binaryParser) feed(data []byte, emit emitFunc) error {
	if p.done {
		if len(data) > 0 {
			return &lineError{line: p.tuple + 1, err: Errorf(CodeBadCopyFileFormat, "received copy data after EOF marker")}
		}
		return nil
	}
	p.pending = append(p.pending, data...)
	pos := 0
	defer func() {
		n := copy(p.pending, p.pending[pos:])
		p.pending = p.pending[:n]
	}()
	for {
		n, err := p.parseOne(p.pending[pos:], emit)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		pos += n
		if p.done && pos < len(p.pending) {
			return &lineError{line: p.tuple + 1, err: Errorf(CodeBadCopyFileFormat, "received copy data after EOF marker")}
		}
	}
}

func (p *binaryParser) finish(emit emitFunc) error {
	if p.done {
		return nil
	}
	if !p.gotHeader || p.extLeft > 0 {
		return &lineError{line: 0, err: Errorf(CodeBadCopyFileFormat, "COPY file signature not recognized")}
	}
	if len(p.pending) > 0 {
		// PostgreSQL accepts input that ends without the trailer, but not a
		// partial tuple.
		return &lineError{line: p.tuple + 1, err: Errorf(CodeBadCopyFileFormat, "unexpected EOF in COPY data")}
	}
	return nil
}

// parseOne consumes the header, part of the header extension or one tuple
// from b and returns how many bytes it used, 0 when b holds too little.
func (p *binaryParser) parseOne(b []byte, emit emitFunc) (int, error) {
	if !p.gotHeader {
		const headerLen = 11 + 4 + 4
		if len(b) < headerLen {
			// Reject a wrong signature as soon as its bytes are in.
			n := min(len(b), len(binarySignature))
			if string(b[:n]) != string(binarySignature[:n]) {
				return 0, &lineError{line: 0, err: Errorf(CodeBadCopyFileFormat, "COPY file signature not recognized")}
			}
			return 0, nil
		}
		if string(b[:11]) != string(binarySignature) {
			return 0, &lineError{line: 0, err: Errorf(CodeBadCopyFileFormat, "COPY file signature not recognized")}
		}
		flags := binary.BigEndian.Uint32(b[11:])
		if flags&(1<<16) != 0 {
			return 0, &lineError{line: 0, err: Errorf(CodeBadCopyFileFormat, "invalid COPY file header (WITH OIDS)")}
		}
		if flags>>17 != 0 {
			return 0, &lineError{line: 0, err: Errorf(CodeBadCopyFileFormat, "unrecognized critical flags in COPY file header")}
		}
		ext := int32(binary.BigEndian.Uint32(b[15:]))
		if ext < 0 {
			return 0, &lineError{line: 0, err: Errorf(CodeBadCopyFileFormat, "invalid COPY file header (missing length)")}
		}
		p.gotHeader, p.extLeft = true, int(ext)
		return headerLen, nil
	}
	if p.extLeft > 0 {
		n := min(p.extLeft, len(b))
		p.extLeft -= n
		return n, nil
	}
	if len(b) < 2 {
		return 0, nil
	}
	count := int16(binary.BigEndian.Uint16(b))
	if count == -1 {
		p.done = true
		return 2, nil
	}
	line := p.tuple + 1
	if int(count) != p.ncols {
		return 0, &lineError{line: line, err: Errorf(CodeBadCopyFileFormat, "row field count is %d, expected %d", count, p.ncols)}
	}
	pos := 2
	p.fields = p.fields[:0]
	for range p.ncols {
		if len(b)-pos < 4 {
			return 0, nil
		}
		size := int32(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		switch {
		case size == -1:
			p.fields = append(p.fields, nil)
			continue
		case size < -1:
			return 0, &lineError{line: line, err: Errorf(CodeBadCopyFileFormat, "invalid field size")}
		case p.maxRow > 0 && pos+int(size) > p.maxRow:
			return 0, rowTooLong(line, p.maxRow)
		case len(b)-pos < int(size):
			return 0, nil
		}
		p.fields = append(p.fields, b[pos:pos+int(size):pos+int(size)])
		pos += int(size)
	}
	p.tuple++
	if err := emit(line, p.fields); err != nil {
		return 0, err
	}
	return pos, nil
}

// appendBinaryRow appends one tuple of the binary format.
func (w *copyWriter) appendBinaryRow(buf []byte, row []any) ([]byte, error) {
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(row)))
	for i, v := range row {
		lenAt := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		out, null, err := w.codec.encode(buf, w.columns[i].TypeOID, binaryFormat, v)
		if err != nil {
			return buf[:lenAt], fmt.Errorf("column %q: %w", w.columns[i].Name, err)
		}
		if null {
			binary.BigEndian.PutUint32(buf[lenAt:], 0xffffffff)
			continue
		}
		buf = out
		binary.BigEndian.PutUint32(buf[lenAt:], uint32(len(buf)-lenAt-4))
	}
	return buf, nil
}
