package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type got struct {
	name, data, id string
}

func readAll(t testing.TB, r io.Reader, max int) ([]got, error) {
	rd := NewReaderSize(r, max)
	var out []got
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, got{ev.Name, string(ev.Data), ev.ID})
	}
}

var sseCases = []struct {
	name string
	in   string
	want []got
}{
	{"llama-server", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []got{{"", `{"a":1}`, ""}, {"", "[DONE]", ""}}},
	{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []got{{"", "x", ""}, {"", "y", ""}}},
	{"no space", "data:x\n\n", []got{{"", "x", ""}}},
	{"keep-alive comments", ":\n\n: ping\n\ndata: x\n\n:\n\n", []got{{"", "x", ""}}},
	{"multi-line data", "data: a\ndata: b\n\n", []got{{"", "a\nb", ""}}},
	{"event and id", "event: error\nid: 7\ndata: {}\n\n", []got{{"error", "{}", "7"}}},
	{"unterminated last", "data: a\n\ndata: b", []got{{"", "a", ""}, {"", "b", ""}}},
	{"event without data skipped", "event: x\n\ndata: y\n\n", []got{{"", "y", ""}}},
	{"empty data", "data:\n\n", []got{{"", "", ""}}},
	{"unknown field ignored", "retry: 10\ndata: z\n\n", []got{{"", "z", ""}}},
	{"empty", "", nil},
}

func TestReader(t *testing.T) {
	for _, tc := range sseCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "bytes", "half"} {
				var r io.Reader = strings.NewReader(tc.in)
				switch mode {
				case "bytes":
					r = iotest.OneByteReader(r)
				case "half":
					r = iotest.HalfReader(r)
				}
				out, err := readAll(t, r, 0)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if len(out) != len(tc.want) {
					t.Fatalf("%s: got %q, want %q", mode, out, tc.want)
				}
				for i := range out {
					if out[i] != tc.want[i] {
						t.Errorf("%s: event %d = %q, want %q", mode, i, out[i], tc.want[i])
					}
				}
			}
		})
	}
}

func TestDone(t *testing.T) {
	ev := Event{Data: []byte("[DONE]")}
	if !ev.Done() {
		t.Fatal("[DONE] not recognised")
	}
	ev.Data = []byte(`{"x":"[DONE]"}`)
	if ev.Done() {
		t.Fatal("false [DONE]")
	}
}

func TestLineTooLong(t *testing.T) {
	in := "data: " + strings.Repeat("x", 100<<10) + "\n\n"
	if _, err := readAll(t, strings.NewReader(in), 64<<10); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	out, err := readAll(t, strings.NewReader(in), 200<<10)
	if err != nil || len(out) != 1 || len(out[0].data) != 100<<10 {
		t.Fatalf("long line under the limit: %v %d", err, len(out))
	}
}

func TestReadError(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(io.ErrUnexpectedEOF))
	out, err := readAll(t, r, 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(out) != 1 {
		t.Fatalf("out %q err %v", out, err)
	}
}

func TestLineReader(t *testing.T) {
	in := "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in))} {
		lr := NewLineReader(r)
		var lines []string
		for {
			l, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(l))
		}
		if strings.Join(lines, "|") != `{"a":1}|{"b":2}|{"c":3}` {
			t.Fatalf("lines = %q", lines)
		}
	}
}

func TestAppendRoundTrip(t *testing.T) {
	for _, p := range []string{"", "x", "a\nb", "{\"k\":\"v\"}", "\n\n"} {
		var b []byte
		b = AppendData(b, []byte(p))
		b = AppendDone(b)
		out, err := readAll(t, bytes.NewReader(b), 0)
		if err != nil || len(out) != 2 || out[0].data != p || out[1].data != "[DONE]" {
			t.Fatalf("%q: %q %v", p, out, err)
		}
	}
	if got := string(AppendLine(nil, []byte("{}"))); got != "{}\n" {
		t.Fatal(got)
	}
}

// FuzzReader checks split independence: any input read whole, byte by
// byte, or in halves gives the same events and the same error.
func FuzzReader(f *testing.F) {
	for _, tc := range sseCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		whole, werr := readAll(t, strings.NewReader(in), 4096)
		bytewise, berr := readAll(t, iotest.OneByteReader(strings.NewReader(in)), 4096)
		if (werr == nil) != (berr == nil) || len(whole) != len(bytewise) {
			t.Fatalf("whole %q %v vs bytewise %q %v", whole, werr, bytewise, berr)
		}
		for i := range whole {
			if whole[i] != bytewise[i] {
				t.Fatalf("event %d: %q vs %q", i, whole[i], bytewise[i])
			}
		}
		for _, ev := range whole {
			if strings.Contains(ev.data, "\r") {
				continue // a CR before a line end is framing, not data
			}
			// Re-framing a data payload must read back the same payload.
			out, err := readAll(t, bytes.NewReader(AppendData(nil, []byte(ev.data))), 1<<20)
			if err != nil || len(out) != 1 || out[0].data != ev.data {
				t.Fatalf("re-frame %q: %q %v", ev.data, out, err)
			}
		}
	})
}

func FuzzLineReader(f *testing.F) {
	f.Add("{}\n{}\n")
	f.Add("\r\n\n x\n")
	f.Fuzz(func(t *testing.T, in string) {
		read := func(r io.Reader) []string {
			lr := NewLineReaderSize(r, 4096)
			var out []string
			for {
				l, err := lr.Next()
				if err != nil {
					return append(out, "ERR:"+err.Error())
				}
				out = append(out, string(l))
			}
		}
		a := read(strings.NewReader(in))
		b := read(iotest.OneByteReader(strings.NewReader(in)))
		if strings.Join(a, "\x00") != strings.Join(b, "\x00") {
			t.Fatalf("%q vs %q", a, b)
		}
	})
}

func BenchmarkReader(b *testing.B) {
	chunk := `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" there"}}],"created":1795326338,"id":"chatcmpl-8ZVJm47Ms6Hju8CnJArPyBFZRlZAUmuD","model":"/work/shared/models/stories260K.gguf","system_fingerprint":"b11669-Debian","object":"chat.completion.chunk"}` + "\n\n"
	in := []byte(strings.Repeat(chunk, 1000))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		rd := NewReader(bytes.NewReader(in))
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
	}
}

// TestReleasedReaderForgetsItsStream: a reader released in the middle of
// an event (a long line, data buffered but not read) serves the next
// stream with nothing of the first.
func TestReleasedReaderForgetsItsStream(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	first := "event: error\nid: 7\ndata: one\ndata: " + long + "\n\ndata: never read\n\n"
	rd := NewReader(strings.NewReader(first))
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	rd.Release()
	for range 3 { // whichever pooled reader comes back
		rd := NewReader(strings.NewReader("data: two\n\n"))
		ev, err := rd.Next()
		if err != nil || ev.Name != "" || ev.ID != "" || string(ev.Data) != "two" {
			t.Fatalf("got %+v, %v; want only the event \"two\"", ev, err)
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("after the last event: %v, want io.EOF", err)
		}
		rd.Release()
	}
	lr := NewLineReader(strings.NewReader(`{"a":1}` + "\n" + long + "\n"))
	if _, err := lr.Next(); err != nil {
		t.Fatal(err)
	}
	lr.Release()
	lr = NewLineReader(strings.NewReader(`{"b":2}` + "\n"))
	if l, err := lr.Next(); err != nil || string(l) != `{"b":2}` {
		t.Fatalf("got %q, %v", l, err)
	}
	if _, err := lr.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
}
