package fence

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// Kind is the type of a reply Value.
type Kind uint8

// The reply kinds. RESP2 has the first five; RESP3's types (maps, sets,
// doubles, booleans, big numbers, pushes) would be added here and in
// readValue's switch, nowhere else.
const (
	KindNil    Kind = iota // RESP2 null bulk string or null array
	KindStatus             // +OK
	KindError              // -CODE message
	KindInt                // :42
	KindBulk               // $3 abc
	KindArray              // *2 ...
)

// Value is one decoded reply.
type Value struct {
	Kind  Kind    // which of the fields below holds the reply
	Str   []byte  // KindStatus, KindError, KindBulk
	Int   int64   // KindInt
	Array []Value // KindArray
}

// String renders v for messages.
func (v Value) String() string {
	switch v.Kind {
	case KindNil:
		return "(nil)"
	case KindStatus, KindBulk:
		return strconv.Quote(string(v.Str))
	case KindError:
		return "(error) " + string(v.Str)
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindArray:
		s := "["
		for i, e := range v.Array {
			if i > 0 {
				s += " "
			}
			s += e.String()
		}
		return s + "]"
	}
	return "(?)"
}

// Reader limits: a reply larger than these is a protocol error (the
// connection is then closed), so a hostile or broken server cannot make the
// client allocate without bound.
const (
	maxBulkLen   = 64 << 20 // largest bulk string accepted
	maxArrayLen  = 1 << 20  // most elements of one array
	maxDepth     = 8        // deepest nesting of arrays
	maxLineLen   = 64 << 10 // longest +, -, : line
	maxReplySize = 256 << 20
)

// errProto marks a malformed reply; wrapped as ErrProtocol.
func protoErr(format string, a ...interface{}) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// respReader decodes replies from a buffered stream.
type respReader struct {
	r      *bufio.Reader
	budget int // bytes still allowed for the reply being read
}

// readLine returns one CRLF-terminated line without the CRLF. The slice is
// valid until the next read.
func (rr *respReader) readLine() ([]byte, error) {
	line, err := rr.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Longer than the buffer: collect it, bounded.
		buf := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(buf) > maxLineLen {
				return nil, protoErr("reply line longer than %d bytes", maxLineLen)
			}
			line, err = rr.r.ReadSlice('\n')
			buf = append(buf, line...)
		}
		if len(buf) > maxLineLen {
			return nil, protoErr("reply line longer than %d bytes", maxLineLen)
		}
		line = buf
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protoErr("reply line not ended by CRLF")
	}
	return line[:len(line)-2], nil
}

// parseInt parses a RESP integer strictly (optional '-', digits only).
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, protoErr("bad integer %q", b)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || (b[0] == '+') {
		return 0, protoErr("bad integer %q", b)
	}
	return n, nil
}

// read decodes one whole reply.
func (rr *respReader) read() (Value, error) {
	rr.budget = maxReplySize
	return rr.readValue(0)
}

func (rr *respReader) readValue(depth int) (Value, error) {
	line, err := rr.readLine()
	if err != nil {
		return Value{}, err
	}
	if len(line) == 0 {
		return Value{}, protoErr("empty reply line")
	}
	rr.budget -= len(line) + 2
	if rr.budget < 0 {
		return Value{}, protoErr("reply larger than %d bytes", maxReplySize)
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return Value{Kind: KindStatus, Str: append([]byte(nil), body...)}, nil
	case '-':
		return Value{Kind: KindError, Str: append([]byte(nil), body...)}, nil
	case ':':
		n, err := parseInt(body)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindInt, Int: n}, nil
	case '$':
		n, err := parseInt(body)
		if err != nil {
			return Value{}, err
		}
		if n == -1 {
			return Value{Kind: KindNil}, nil
		}
		if n < 0 || n > maxBulkLen || int(n) > rr.budget {
			return Value{}, protoErr("bulk length %d out of range", n)
		}
		// Grow with the bytes that arrive, so that a length the server
		// never sends costs no memory.
		buf, err := readN(rr.r, int(n)+2)
		if err != nil {
			return Value{}, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return Value{}, protoErr("bulk string not ended by CRLF")
		}
		rr.budget -= int(n) + 2
		return Value{Kind: KindBulk, Str: buf[:n:n]}, nil
	case '*':
		n, err := parseInt(body)
		if err != nil {
			return Value{}, err
		}
		if n == -1 {
			return Value{Kind: KindNil}, nil
		}
		if n < 0 || n > maxArrayLen {
			return Value{}, protoErr("array length %d out of range", n)
		}
		if depth+1 > maxDepth {
			return Value{}, protoErr("arrays nested deeper than %d", maxDepth)
		}
		// Each element costs at least 3 bytes on the wire: bound the
		// allocation by what the budget can still hold.
		if int(n)*3 > rr.budget {
			return Value{}, protoErr("array length %d out of range", n)
		}
		arr := make([]Value, 0, minInt(int(n), 64))
		for i := 0; i < int(n); i++ {
			e, err := rr.readValue(depth + 1)
			if err != nil {
				return Value{}, err
			}
			arr = append(arr, e)
		}
		return Value{Kind: KindArray, Array: arr}, nil
	}
	return Value{}, protoErr("unknown reply type %q", line[0])
}

// readN reads exactly n bytes, allocating in steps of at most 64 KiB.
func readN(r *bufio.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, minInt(n, 64<<10))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), minInt(n, 2*cap(buf)))
			copy(nb, buf)
			buf = nb
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// appendCommand encodes args as a RESP array of bulk strings.
func appendCommand(b []byte, args []string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
