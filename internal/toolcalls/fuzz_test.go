package toolcalls

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"
)

// reference assembles decoded OpenAI deltas the plain way: one map entry
// per index, the first id and name kept, argument strings concatenated. It
// knows nothing of limits or problems, so it is compared only with streams
// the accumulator found nothing wrong with.
func reference(chunks [][]wireDelta) map[int][3]string {
	out := map[int][3]string{}
	for _, ds := range chunks {
		for pos, d := range ds {
			idx := pos
			if d.Index != nil {
				idx = *d.Index
			}
			c := out[idx]
			if c[0] == "" {
				c[0] = d.ID
			}
			if c[1] == "" {
				c[1] = d.Function.Name
			}
			var s string
			raw := bytes.TrimSpace(d.Function.Arguments)
			if json.Unmarshal(raw, &s) == nil {
				c[2] += s
			} else if len(raw) > 0 && raw[0] == '{' {
				c[2] += string(raw)
			}
			out[idx] = c
		}
	}
	return out
}

// FuzzAccumulator holds the accumulator to the reference on arbitrary
// chunks (split from the input at newlines): no panic, the limits hold,
// and whenever no problem was reported the calls equal the reference's.
// It also rebuilds a well-formed stream from the input's calls, split into
// deltas at input-chosen points, and wants those calls back exactly.
func FuzzAccumulator(f *testing.F) {
	seeds := []string{
		`[{"index":0,"id":"c0","type":"function","function":{"name":"send_email","arguments":"{\"to\":"}}]` + "\n" +
			`[{"index":0,"function":{"arguments":"\"a@b.example\"}"}}]`,
		`[{"id":"a","type":"function","function":{"name":"x","arguments":"{\"q\":1}"}},{"id":"b","function":{"name":"y","arguments":"{}"}}]`,
		`[{"index":0,"id":"a","function":{"name":"x","arguments":"{}"}}]` + "\n" + `[{"index":2,"id":"c","function":{"name":"z"}}]`,
		`[{"index":0,"function":{"arguments":"{\"a\":1}"}}]`,
		`[{"index":0,"id":"a","function":{"name":"x","arguments":42}}]`,
		`[{"index":0,"id":"a","function":{"name":"x","arguments":{"k":"v"}}}]`,
		`[{"index":99999999999,"function":{"name":"z"}}]`,
		`{"not":"an array"}`,
		"[]\n\n[null]",
	}
	for _, s := range seeds {
		f.Add(s, uint64(7))
	}
	f.Fuzz(func(t *testing.T, input string, splits uint64) {
		lim := Limits{MaxCalls: 8, MaxArgs: 256}
		a := Accumulator{Limits: lim}
		var decoded [][]wireDelta
		for _, line := range splitLines(input) {
			a.AddOpenAI(json.RawMessage(line))
			var ds []wireDelta
			if json.Unmarshal([]byte(line), &ds) == nil {
				decoded = append(decoded, ds)
			}
		}
		o := Accumulator{Limits: lim}
		o.AddOllama(json.RawMessage(input))
		l := Accumulator{Limits: lim}
		l.AddFunctionCall(json.RawMessage(input))
		for _, x := range []*Accumulator{&a, &o, &l} {
			x.Finish()
			x.Findings()
			calls := x.Calls()
			if len(calls) > lim.MaxCalls {
				t.Fatalf("%d calls past the limit %d", len(calls), lim.MaxCalls)
			}
			for _, c := range calls {
				if len(c.Arguments) > lim.MaxArgs {
					t.Fatalf("call %d holds %d bytes of arguments past the limit", c.Index, len(c.Arguments))
				}
			}
		}
		if len(a.Problems()) == 0 {
			ref := reference(decoded)
			calls := a.Calls()
			if len(calls) != len(ref) {
				t.Fatalf("%d calls, reference %d", len(calls), len(ref))
			}
			for _, c := range calls {
				r := ref[c.Index]
				if c.ID != r[0] || c.Name != r[1] || c.Arguments != r[2] {
					t.Fatalf("call %d = %+v, reference %q", c.Index, c, r)
				}
			}
		}

		// A well-formed stream of the same calls, cut where splits says.
		var want []wireDelta
		for _, ds := range decoded {
			want = append(want, ds...)
		}
		if len(want) > lim.MaxCalls {
			want = want[:lim.MaxCalls]
		}
		s := Accumulator{Limits: Limits{MaxCalls: 8, MaxArgs: 1 << 20}}
		var args []string
		for i, d := range want {
			var text string
			json.Unmarshal(d.Function.Arguments, &text)
			args = append(args, text)
			name := "f" + strconv.Itoa(i)
			cut := 0
			if len(text) > 0 {
				cut = int(splits % uint64(len(text)+1))
				for cut < len(text) && !utf8.RuneStart(text[cut]) {
					cut++ // a JSON string piece holds whole characters
				}
			}
			splits = splits*6364136223846793005 + 1442695040888963407
			pieces := []string{text[:cut], text[cut:]}
			for k, p := range pieces {
				idx := i
				w := map[string]any{"index": idx, "function": map[string]any{"arguments": p}}
				if k == 0 {
					w["id"] = "id" + strconv.Itoa(i)
					w["type"] = "function"
					w["function"].(map[string]any)["name"] = name
				}
				b, _ := json.Marshal([]any{w})
				s.AddOpenAI(b)
			}
		}
		s.Finish()
		if ps := s.Problems(); len(ps) > 0 {
			t.Fatalf("well-formed stream has problems: %v", ps)
		}
		got := s.Calls()
		if len(got) != len(want) {
			t.Fatalf("well-formed stream: %d calls, want %d", len(got), len(want))
		}
		for i, c := range got {
			// encoding/json replaces invalid UTF-8 when it encodes.
			var w string
			b, _ := json.Marshal(args[i])
			json.Unmarshal(b, &w)
			if c.Name != "f"+strconv.Itoa(i) || c.ID != "id"+strconv.Itoa(i) || c.Arguments != w {
				t.Fatalf("well-formed stream: call %d = %+v, want arguments %q", i, c, w)
			}
		}
	})
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
