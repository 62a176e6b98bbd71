package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLineReader(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		limit int
		want  []string // "!" marks a too-long line
	}{
		{"lines", "a\nbb\n", 10, []string{"a", "bb"}},
		{"crlf and blanks", "a\r\n\r\n\nb", 10, []string{"a", "b"}},
		{"a line over the limit is skipped", "short\n" + strings.Repeat("x", 30) + "\nafter\n", 10, []string{"short", "!", "after"}},
		{"a last line over the limit", "ok\n" + strings.Repeat("y", 30), 10, []string{"ok", "!"}},
		{"at the limit", strings.Repeat("z", 10) + "\n", 10, []string{strings.Repeat("z", 10)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := readAll(NewLineReader(iotest.OneByteReader(strings.NewReader(c.in)), c.limit)); strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func readAll(lr *LineReader) []string {
	var got []string
	for {
		l, err := lr.Next()
		var tl *LineTooLongError
		switch {
		case errors.As(err, &tl):
			got = append(got, "!")
			continue
		case err != nil:
			return got
		}
		got = append(got, string(l))
	}
}

// reference splits like LineReader, the simple way.
func reference(in []byte, limit int) []string {
	var out []string
	for _, l := range bytes.Split(in, []byte("\n")) {
		l = bytes.TrimRight(l, "\r")
		switch {
		case len(l) > limit:
			out = append(out, "!")
		case len(bytes.TrimSpace(l)) == 0:
		default:
			out = append(out, string(l))
		}
	}
	return out
}

func TestIDHintOfATooLongLine(t *testing.T) {
	line := `{"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", 100000) + `"}]},"jsonrpc":"2.0","id":"abc-9"}` + "\n"
	_, err := NewLineReader(strings.NewReader(line), 1000).Next()
	var tl *LineTooLongError
	if !errors.As(err, &tl) || string(tl.IDHint()) != `"abc-9"` || tl.Size < 100000 {
		t.Fatalf("err %v", err)
	}
}

func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"a\nbb\n", "a\r\n\r\n\nb", "short\n" + strings.Repeat("x", 30) + "\nafter\n", "\n\n", "x\r"} {
		f.Add([]byte(s), 10)
	}
	f.Fuzz(func(t *testing.T, in []byte, limit int) {
		if limit < 1 || limit > 1<<16 {
			return
		}
		// A line whose content fits but whose \r end does not is a corner
		// the reference counts differently; keep to \n ends there.
		if bytes.Contains(in, []byte("\r")) {
			in = bytes.ReplaceAll(in, []byte("\r"), nil)
		}
		got := readAll(NewLineReader(iotest.HalfReader(bytes.NewReader(in)), limit))
		want := reference(in, limit)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name, in string
		kind     Kind
		code     int // 0: decodes
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, KindRequest, 0},
		{"string id", `{"jsonrpc":"2.0","id":"x","method":"ping","params":{}}`, KindRequest, 0},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`, KindNotification, 0},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, KindResponse, 0},
		{"error response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, KindResponse, 0},
		{"unknown members pass", `{"jsonrpc":"2.0","id":1,"method":"m","x-extra":true}`, KindRequest, 0},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 0, -32600},
		{"not JSON", `{"jsonrpc":`, 0, -32700},
		{"a string", `"hello"`, 0, -32700},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 0, -32600},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, 0, -32600},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, 0, -32600},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`, 0, -32600},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"m"}`, 0, -32600},
		{"nothing", `{"jsonrpc":"2.0","id":1}`, 0, -32600},
		{"empty", ``, 0, -32600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Decode([]byte(c.in))
			if c.code != 0 {
				if err == nil || Code(err) != c.code {
					t.Errorf("err %v (code %d), want code %d", err, Code(err), c.code)
				}
				return
			}
			if err != nil || m.Kind != c.kind {
				t.Errorf("got %v %v, want %v", m, err, c.kind)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","method":"n"}`, `[1]`, `{"jsonrpc":"2.0","id":1.5e3,"error":{"code":1}}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Decode(in)
		if err != nil {
			// The error answer is itself a valid message.
			if _, err := Decode(ErrorResponse(lenientID(in), Code(err), err.Error(), nil)); err != nil {
				t.Fatalf("error response does not decode: %v", err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("decoded invalid JSON %q", in)
		}
		switch m.Kind {
		case KindRequest:
			if m.ID == nil || m.Method == "" {
				t.Fatalf("request without id or method: %q", in)
			}
		case KindNotification:
			if m.ID != nil || m.Method == "" {
				t.Fatalf("bad notification: %q", in)
			}
		case KindResponse:
			if m.Method != "" {
				t.Fatalf("response with a method: %q", in)
			}
		}
	})
}

// FuzzSession feeds arbitrary lines from both sides: the session never
// panics, answers a client request at most once, and what it sends on
// always decodes.
func FuzzSession(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","description":"b","inputSchema":{}}]}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"AKIA2E3ZQF7B2LMC4XRW"}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	j := testJudge(f, "")
	j.Pins = nil
	p := &Proxy{Judge: j, Server: "fuzz"}
	f.Fuzz(func(t *testing.T, line []byte, fromClient bool) {
		s := p.NewSession()
		var outs [][]byte
		if fromClient {
			up, back := s.FromClient(t.Context(), line)
			outs = append(outs, up, back)
		} else {
			outs = append(outs, s.FromServer(t.Context(), line))
		}
		for _, o := range outs {
			if o == nil {
				continue
			}
			if _, err := Decode(o); err != nil {
				t.Fatalf("sent on a message that does not decode: %q (%v)", o, err)
			}
		}
	})
}

var _ = io.EOF
