package provenance

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFold(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"punctuation and case", "Tangerine!Ferry42", "tangerineferry42"},
		{"spaced letters", "T a n g e r i n e ! F e r r y 4 2", "tangerineferry42"},
		{"zero-width", "Tan\u200bger\u200cine\u2060Ferry42", "tangerineferry42"},
		{"look-alikes", "Т\u0430ngerine Ferry42", "tangerineferry42"}, // Cyrillic Т and а
		{"full-width", "ＴａｎｇｅｒｉｎｅＦｅｒｒｙ４２", "tangerineferry42"},
		{"tag characters", "\U000E0054\U000E0061n", "tan"},
		{"digits stay digits", "0O1l", "0o1l"},
		{"invalid UTF-8", "ab\xffcd", "abcd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(Fold(nil, c.in)); got != c.want {
				t.Errorf("Fold(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func rot(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		}
		return r
	}, s)
}

const key = "flt_8Kd2Qw9Zr4Tx7Vb1"

func testIndex() *Index {
	return New([]Source{
		{Kind: System, Msg: 0, Text: "You are the assistant of Orrin Logistics. The fleet API key is " + key + "."},
		{Kind: User, Msg: 1, Text: "Send the route plan for Orrin Logistics to karl."},
		{Kind: Result, Msg: 3, Tool: "read_file", Text: "Route A: depot - Kessel - Vorn - Alder; driver Ezra +49 151 2233 4455"},
		{Kind: Result, Msg: 5, Tool: "read_file", Text: "depot 9 Kessel, then Orrin depot 9 Kessel depot 9 Vorn"},
		{Kind: Declaration, Msg: -1, Tool: "send_email", Text: "send_email\nSend an e-mail to the recipients."},
	})
}

func TestTrace(t *testing.T) {
	cases := []struct {
		name  string
		value string
		kind  Kind
		via   Encoding
		min   int // folded bytes found at least
	}{
		{"verbatim", "the key: " + key, System, Plain, 17},
		{"hex", "id " + hex.EncodeToString([]byte(key)), System, Hex, 17},
		{"hex at an odd offset", "x" + hex.EncodeToString([]byte(key)), System, Hex, 17},
		{"base64", base64.StdEncoding.EncodeToString([]byte(key)), System, Base64, 17},
		{"base64 inside a longer run", "blob:" + base64.StdEncoding.EncodeToString([]byte("xyz!"+key+"!pad")), System, Base64, 17},
		{"rot13", rot(key), System, ROT13, 17},
		{"URL-escaped", url.QueryEscape("k=" + key), System, Plain, 17},
		{"zero-width", strings.Join(strings.Split(key, ""), "\u200b"), System, Plain, 17},
		{"result data", "Kessel - Vorn - Alder; driver Ezra", Result, Plain, 20},
		{"a copy whose grams came earlier in the source", "Orrin depot 9 Kessel depot 9 Vorn", Result, Plain, 25},
	}
	ix := testIndex()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr Trace
			tr = trace(ix, c.value)
			best := Run{Src: -1}
			for _, r := range tr.Runs {
				if r.Len > best.Len {
					best = r
				}
			}
			if best.Src < 0 || ix.Sources[best.Src].Kind != c.kind || best.Len < c.min {
				t.Fatalf("runs %+v: want one of at least %d bytes from %s", tr.Runs, c.min, c.kind)
			}
			if c.via != Plain && best.Via != c.via {
				t.Errorf("found via %s, want %s", best.Via, c.via)
			}
		})
	}
}

// TestTraceShared: what the user also wrote is not private, and the
// model's own words come from nowhere.
func TestTraceShared(t *testing.T) {
	ix := testIndex()
	for _, v := range []string{"Orrin Logistics", "a friendly hello from the depot team", "send an e-mail to the recipients"} {
		var tr Trace
		tr = trace(ix, v)
		for _, r := range tr.Runs {
			if r.Len >= 8 {
				t.Errorf("%q: private run %+v", v, r)
			}
		}
	}
	var tr Trace
	tr = trace(ix, "Orrin Logistics")
	if tr.Found[User] == 0 || tr.Found[System] == 0 {
		t.Errorf("Found %v: want bytes from the user and the system prompt", tr.Found)
	}
}

func TestNamedAndSecretlike(t *testing.T) {
	ix := testIndex()
	m, src := ix.Named("kessel")
	if !m.Has(Result) || src != 2 {
		t.Errorf("Named(kessel) = %b, %d", m, src)
	}
	if m, _ := ix.Named("orrin logistics"); !m.Has(User) || !m.Has(System) {
		t.Errorf("Named(orrin logistics) = %b", m)
	}
	f := ix.Sources[0].folded
	i := strings.Index(string(f), "flt8kd2")
	if !ix.Secretlike(0, i, 19) || ix.Secretlike(0, 0, 10) || ix.Secretlike(9, 0, 1) || ix.Secretlike(0, 0, 1<<20) {
		t.Error("Secretlike")
	}
	for k := Nowhere; k <= numKinds; k++ {
		if k.String() == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
}

// TestGrow: a call larger than the table a smaller call left in the
// pool keeps every gram, and the table reused for a smaller call forgets
// the larger one's.
func TestGrow(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		b.WriteByte(byte('a' + i%26))
		b.WriteByte(byte('0' + i*7%10))
	}
	long := b.String()
	ix := New([]Source{{Kind: System, Text: "x " + long}})
	vals := []string{long[1000:1100], long[3000:3400]}
	ts := make([]Trace, 2)
	trace(ix, "a small call first")
	ix.TraceAll(vals, ts)
	for i, tr := range ts {
		if len(tr.Runs) == 0 {
			t.Fatalf("value %d: not found", i)
		}
	}
	var tr Trace
	tr = trace(ix, "nothing of the sort here")
	if len(tr.Runs) != 0 {
		t.Fatalf("runs %+v from a reused table", tr.Runs)
	}
}

// FuzzNormalise: folding and every decoding take any bytes without a
// panic, fold to letters and digits only, and find a value's own copy.
func FuzzNormalise(f *testing.F) {
	for _, s := range []string{key, "T a n g e r i n e", "\u200b\u200c", "%zz%4", "6d69727", "YWJj", "\xff\xfe", "Т\u0430ngerine", "ＴａｎＧ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		folded := Fold(nil, s)
		for _, r := range string(folded) {
			if r == utf8.RuneError {
				t.Fatalf("Fold(%q) holds an invalid rune", s)
			}
		}
		ix := New([]Source{{Kind: System, Text: s}})
		var tr Trace
		tr = trace(ix, s)
		if len(folded) >= Gram {
			n := 0
			for _, r := range tr.Runs {
				if r.Via == Plain {
					n += r.Len
				}
			}
			if n < len(folded) {
				t.Fatalf("the value's own text %q: plain runs cover %d of %d bytes", s, n, len(folded))
			}
		}
	})
}

// trace traces one value.
func trace(ix *Index, v string) Trace {
	ts := make([]Trace, 1)
	ix.TraceAll([]string{v}, ts)
	return ts[0]
}

// TestRunWhoseFirstGramComesEarlier: a key whose first gram the source
// also holds earlier, in another word, is found whole.
func TestRunWhoseFirstGramComesEarlier(t *testing.T) {
	ix := New([]Source{{Kind: System, Text: "Deploy key for the mirror host: mirror-7Q2x-Lattice (rotate monthly)."}})
	tr := trace(ix, "ref mirror-7Q2x-Lattice zzq")
	best := 0
	for _, r := range tr.Runs {
		best = max(best, r.Len)
	}
	if want := len("mirror7q2xlattice"); best != want {
		t.Fatalf("runs %+v: longest %d, want %d", tr.Runs, best, want)
	}
}

// containsCases are TestContains's cases and FuzzContains's seeds.
var containsCases = []struct{ name, text, s string }{
	{"an address", `{"from":"supplier12@vendor12.example","to":"me@x.example"}`, "supplier12@vendor12.example"},
	{"at the start", "@vendor12.example says hi", "@vendor12.example"},
	{"at the end", "write to vendor12.example", "vendor12.example"},
	{"cut off at the end", "write to vendor12.exampl", "vendor12.example"},
	{"rare byte repeated", "@@@@ a@b", "a@b"},
	{"absent", "nothing here", "x@y"},
	{"longer than the text", "ab", "abc"},
	{"empty needle", "abc", ""},
	{"empty text", "", "a"},
}

// checkContains holds contains, which searches for the rarest byte of
// the needle, to strings.Contains.
func checkContains(t *testing.T, text, s string) {
	t.Helper()
	if got, want := contains(text, s, rarest(s)), strings.Contains(text, s); got != want {
		t.Errorf("contains(%q, %q) = %v, want %v", text, s, got, want)
	}
}

func TestContains(t *testing.T) {
	for _, c := range containsCases {
		t.Run(c.name, func(t *testing.T) { checkContains(t, c.text, c.s) })
	}
}

func FuzzContains(f *testing.F) {
	for _, c := range containsCases {
		f.Add(c.text, c.s)
	}
	f.Fuzz(checkContains)
}

// TestNamedKept: Named answers the same when asked again, from what it
// kept.
func TestNamedKept(t *testing.T) {
	ix := New([]Source{{Kind: User, Text: "Mail Dana at dana@halcyon.example"}, {Kind: Result, Tool: "search", Text: `{"url":"https://evil.example/x"}`}})
	for range 2 {
		if m, first := ix.Named("dana@halcyon.example"); !m.Has(User) || m.Has(Result) || first != -1 {
			t.Errorf("dana: %v %d", m, first)
		}
		if m, first := ix.Named("evil.example"); m.Has(User) || !m.Has(Result) || first != 1 {
			t.Errorf("evil: %v %d", m, first)
		}
	}
	if len(ix.named) != 2 {
		t.Errorf("%d answers kept, want 2", len(ix.named))
	}
}
