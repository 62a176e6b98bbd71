package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// LineTooLongError reports a line over the reader's limit. The line was
// skipped up to its end; Head and Tail keep its first and last bytes, so
// the id of the message can still be found.
type LineTooLongError struct {
	Limit, Size int
	Head, Tail  []byte
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("message of %d bytes is over the limit of %d", e.Size, e.Limit)
}

// IDHint returns the id the line seems to carry, or nil.
func (e *LineTooLongError) IDHint() []byte {
	for _, b := range [][]byte{e.Head, e.Tail} {
		if m := idPattern.FindSubmatch(b); m != nil {
			return m[1]
		}
	}
	return nil
}

var idPattern = regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?[0-9]{1,20})`)

// keepBytes is how much of a too-long line's head and tail is kept.
const keepBytes = 4096

// LineReader reads newline-delimited messages (the stdio transport) with
// a size limit. Blank lines are skipped; a trailing carriage return is
// removed.
type LineReader struct {
	br    *bufio.Reader
	limit int
	buf   []byte
}

// NewLineReader reads from r, refusing lines over limit bytes.
func NewLineReader(r io.Reader, limit int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

// Next returns the next line without its newline. The slice is valid
// until the next call. A line over the limit returns a *LineTooLongError
// and the reader goes on with the line after it. At the end it returns
// io.EOF (a last line without newline is returned first).
func (l *LineReader) Next() ([]byte, error) {
	for {
		l.buf = l.buf[:0]
		var tooLong *LineTooLongError
		for {
			frag, err := l.br.ReadSlice('\n')
			n := len(l.buf) + len(frag)
			if len(frag) > 0 && frag[len(frag)-1] == '\n' {
				n-- // the newline is not part of the message
			}
			if tooLong == nil && n > l.limit {
				tooLong = &LineTooLongError{Limit: l.limit}
				tooLong.Head = append(tooLong.Head, l.buf[:min(len(l.buf), keepBytes)]...)
				if len(tooLong.Head) < keepBytes {
					tooLong.Head = append(tooLong.Head, frag[:min(len(frag), keepBytes-len(tooLong.Head))]...)
				}
				tooLong.Size = len(l.buf)
				l.buf = l.buf[:0]
			}
			if tooLong != nil {
				tooLong.Size += len(frag)
				tooLong.Tail = append(tooLong.Tail, frag...)
				if len(tooLong.Tail) > 2*keepBytes {
					tooLong.Tail = append(tooLong.Tail[:0], tooLong.Tail[len(tooLong.Tail)-keepBytes:]...)
				}
			} else {
				l.buf = append(l.buf, frag...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if tooLong != nil {
				tooLong.Tail = bytes.TrimRight(tooLong.Tail, "\r\n")
				if len(tooLong.Tail) > keepBytes {
					tooLong.Tail = tooLong.Tail[len(tooLong.Tail)-keepBytes:]
				}
				return nil, tooLong
			}
			line := bytes.TrimRight(l.buf, "\r\n")
			if len(bytes.TrimSpace(line)) == 0 {
				if err != nil {
					return nil, io.EOF
				}
				break // a blank line: read the next
			}
			return line, nil
		}
	}
}
