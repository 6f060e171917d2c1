package fence

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func readOne(s string) (Value, error) {
	rr := respReader{r: bufio.NewReaderSize(strings.NewReader(s), 16)}
	return rr.read()
}

func TestRespReader(t *testing.T) {
	good := map[string]string{
		"+OK\r\n":                               `"OK"`,
		"-NOLEASE gone\r\n":                     "(error) NOLEASE gone",
		":42\r\n":                               "42",
		":-1\r\n":                               "-1",
		"$3\r\na\r\n\r\n":                       `"a\r\n"`,
		"$0\r\n\r\n":                            `""`,
		"$-1\r\n":                               "(nil)",
		"*-1\r\n":                               "(nil)",
		"*2\r\n:4\r\n:5\r\n":                    "[4 5]",
		"*2\r\n*1\r\n$1\r\nx\r\n*0\r\n":         `[["x"] []]`,
		"+" + strings.Repeat("a", 100) + "\r\n": `"` + strings.Repeat("a", 100) + `"`,
	}
	for in, want := range good {
		v, err := readOne(in)
		if err != nil || v.String() != want {
			t.Errorf("%q: %v %v, want %s", in, v, err, want)
		}
	}
	bad := []string{
		"?x\r\n", "\r\n", "+OK\n", ":abc\r\n", ":+1\r\n", ":\r\n", ":123456789012345678901\r\n",
		"$-2\r\n", "$99999999999\r\n", "$3\r\nabcd\r\n", "*-2\r\n", "*99999999\r\n",
		"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
		"+" + strings.Repeat("a", maxLineLen+10) + "\r\n",
		"*3000\r\n",
	}
	for _, in := range bad {
		if _, err := readOne(in); !errors.Is(err, ErrProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%.40q: %v, want a protocol error", in, err)
		}
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, []string{"LOCK", "a b", ""}))
	if got != "*3\r\n$4\r\nLOCK\r\n$3\r\na b\r\n$0\r\n\r\n" {
		t.Fatalf("%q", got)
	}
}

func TestParseError(t *testing.T) {
	var se *StaleError
	if err := parseError([]byte("STALE 3 7 token 3 is older")); !errors.As(err, &se) || se.Token != 3 || se.Highest != 7 || !errors.Is(err, ErrStale) {
		t.Fatalf("%#v", err)
	}
	var sv *ServerError
	if err := parseError([]byte("NOTLEADER 127.0.0.1:7701")); !errors.As(err, &sv) || sv.Code != "NOTLEADER" || sv.Message != "127.0.0.1:7701" || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("%#v", err)
	}
	if err := parseError([]byte("STALE x")); !errors.Is(err, ErrStale) {
		t.Fatalf("malformed STALE: %#v", err)
	}
	for code, sentinel := range map[string]error{"NOLEASE": ErrLeaseLost, "NOPERM": ErrNoPerm, "WRONGPASS": ErrAuth,
		"NOAUTH": ErrAuth, "LIMIT": ErrLimit, "WRONGFENCE": ErrWrongFence, "BADTOKEN": ErrBadToken, "FULL": ErrFull} {
		if err := parseError([]byte(code + " m")); !errors.Is(err, sentinel) {
			t.Errorf("%s does not match %v", code, sentinel)
		}
	}
	if errors.Is(parseError([]byte("ERR x")), ErrStale) {
		t.Error("ERR matches ErrStale")
	}
}

// FuzzReader: any bytes give a value or an error, never a panic, and a
// value re-encoded by the test reads back the same (seed corpus in
// testdata/fuzz/FuzzReader; go test runs the seeds, go test -fuzz=FuzzReader
// explores).
func FuzzReader(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$1\r\nx\r\n", "$-1\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:2\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "$5\r\nab\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rr := respReader{r: bufio.NewReaderSize(bytes.NewReader(data), 16)}
		for i := 0; i < 4; i++ {
			v, err := rr.read()
			if err != nil {
				return
			}
			enc := encodeValue(nil, v)
			back, err := (&respReader{r: bufio.NewReader(bytes.NewReader(enc))}).read()
			if err != nil || back.String() != v.String() {
				t.Fatalf("%q -> %v -> %q -> %v %v", data, v, enc, back, err)
			}
		}
	})
}

func encodeValue(b []byte, v Value) []byte {
	switch v.Kind {
	case KindNil:
		return append(b, "$-1\r\n"...)
	case KindStatus:
		return append(append(append(b, '+'), v.Str...), "\r\n"...)
	case KindError:
		return append(append(append(b, '-'), v.Str...), "\r\n"...)
	case KindInt:
		return append(append(append(b, ':'), []byte(Value{Kind: KindInt, Int: v.Int}.String())...), "\r\n"...)
	case KindBulk:
		b = append(b, '$')
		b = append(b, []byte(Value{Kind: KindInt, Int: int64(len(v.Str))}.String())...)
		b = append(b, "\r\n"...)
		return append(append(b, v.Str...), "\r\n"...)
	case KindArray:
		b = append(b, '*')
		b = append(b, []byte(Value{Kind: KindInt, Int: int64(len(v.Array))}.String())...)
		b = append(b, "\r\n"...)
		for _, e := range v.Array {
			b = encodeValue(b, e)
		}
	}
	return b
}

// A hostile server announcing a huge bulk string or array that it never
// sends costs the client no memory to speak of.
func TestHostileLengths(t *testing.T) {
	for _, in := range []string{"$67108864\r\nabc", "*1048576\r\n:1\r\n", "*8\r\n$67108864\r\n"} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := readOne(in)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%q: no error", in)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("%q allocated %d bytes", in, d)
		}
	}
}
