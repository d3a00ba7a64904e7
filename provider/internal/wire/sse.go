package wire

import (
	"bytes"
	"errors"
	"io"
)

// Event is one server-sent event.
type Event struct {
	// Type is the event's "event:" field; "" when it had none, which the
	// standard reads as "message".
	Type string
	// Data is the event's "data:" lines joined with "\n". It is valid until
	// the next call to SSE.Next.
	Data []byte
	// End marks no event of the stream's own: Stream hands a Handler this
	// one, with no Type and no Data, when the body ends cleanly before the
	// Handler said the answer was done, so that the Handler can judge
	// whether the provider had already said it finished (a finish reason
	// without the sentinel that usually follows it).
	End bool
}

// The errors SSE.Next returns when the server sends more than the limit in
// one line or one event.
var (
	ErrLineTooLong   = errors.New("server-sent event line too long")
	ErrEventTooLarge = errors.New("server-sent event too large")
)

// sseBuf is the size of the read buffer; lines longer than this are
// gathered in a growing buffer, up to the limit.
const sseBuf = 4096

// sseKeep is the largest line or data buffer kept for reuse between events:
// a server that once sent a huge event does not pin its memory for the rest
// of the stream.
const sseKeep = 64 << 10

// SSE reads server-sent events from an event stream incrementally, as the
// WHATWG HTML standard ("Interpreting an event stream") defines them: lines
// end in CRLF, LF or CR; a line starting with ":" is a comment; "event:"
// sets the type and "data:" adds a line of data (one space after the colon
// is dropped); "id:", "retry:" and unknown fields are ignored; a blank line
// dispatches the event, unless it had no data; a leading UTF-8 BOM is
// skipped; an event not finished by a blank line when the stream ends is
// discarded.
//
// It reads only when Next is called, on the caller's goroutine, and never
// holds more than the read buffer plus one line and one event of at most
// limit bytes each. It is not safe for concurrent use.
type SSE struct {
	r     io.Reader
	limit int

	buf      []byte // the read buffer
	pos, end int    // the unread part of buf
	rerr     error  // the read error, returned once buf is used up
	empty    int    // consecutive empty reads

	line   []byte // the start of a line that spans reads
	skipLF bool   // the last line ended in CR: a LF next belongs to it
	begun  bool   // the first line has been read (for the BOM)

	typ     []byte // the event type buffer
	data    []byte // the data buffer
	hasData bool   // a data field was seen: the event is dispatched

	err error // sticky: once Next fails, it keeps failing the same way
}

// NewSSE returns an SSE reading r, failing with ErrLineTooLong for a line,
// and ErrEventTooLarge for an event's data, longer than limit bytes. A limit
// below 1 is taken as 1.
func NewSSE(r io.Reader, limit int) *SSE {
	return &SSE{r: r, limit: max(limit, 1), buf: make([]byte, min(sseBuf, max(limit, 64)))}
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// a read error is returned as is. Once Next has returned an error it
// returns the same error on every later call.
func (s *SSE) Next() (Event, error) {
	if s.err != nil {
		return Event{}, s.err
	}
	if cap(s.data) > sseKeep {
		s.data = nil
	}
	s.data, s.hasData = s.data[:0], false
	for {
		line, err := s.readLine()
		if err != nil {
			s.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if !s.hasData {
				s.typ = s.typ[:0]
				continue
			}
			ev := Event{Type: string(s.typ), Data: s.data}
			s.typ = s.typ[:0]
			return ev, nil
		}
		if err := s.field(line); err != nil {
			s.err = err
			return Event{}, err
		}
	}
}

// field processes one non-blank line.
func (s *SSE) field(line []byte) error {
	if line[0] == ':' {
		return nil // a comment
	}
	name, value := line, line[len(line):]
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		s.typ = append(s.typ[:0], value...)
	case "data":
		n := len(s.data) + len(value)
		if s.hasData {
			n++
		}
		if n > s.limit {
			return ErrEventTooLarge
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
	return nil
}

// readLine returns the next line without its end. The line is valid until
// the next call.
func (s *SSE) readLine() ([]byte, error) {
	if cap(s.line) > sseKeep {
		s.line = nil
	}
	s.line = s.line[:0]
	for {
		if s.pos < s.end {
			if s.skipLF {
				s.skipLF = false
				if s.buf[s.pos] == '\n' {
					s.pos++
					continue
				}
			}
			chunk := s.buf[s.pos:s.end]
			if i := bytes.IndexAny(chunk, "\r\n"); i >= 0 {
				if len(s.line)+i > s.limit {
					return nil, ErrLineTooLong
				}
				s.skipLF = chunk[i] == '\r'
				s.pos += i + 1
				line := chunk[:i]
				if len(s.line) > 0 {
					s.line = append(s.line, line...)
					line = s.line
				}
				return s.bom(line), nil
			}
			if len(s.line)+len(chunk) > s.limit {
				return nil, ErrLineTooLong
			}
			s.line = append(s.line, chunk...)
			s.pos = s.end
		}
		if s.rerr != nil {
			return nil, s.rerr // an unfinished line at the end is discarded
		}
		n, err := s.r.Read(s.buf)
		s.pos, s.end = 0, n
		s.rerr = err
		if n == 0 && err == nil {
			if s.empty++; s.empty >= 100 {
				s.rerr = io.ErrNoProgress
			}
		} else {
			s.empty = 0
		}
	}
}

// bom strips a UTF-8 byte order mark from the stream's first line.
func (s *SSE) bom(line []byte) []byte {
	if !s.begun {
		s.begun = true
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	}
	return line
}
