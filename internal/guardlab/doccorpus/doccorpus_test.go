package doccorpus

import (
	"strings"
	"testing"
)

// TestBuild: the corpus is built from whatever of its places this machine
// has (GOROOT's sources and documents, /usr/include, /etc and the
// embedded e-mails and API answers are on every build machine), with
// documents in both parts, and the same documents and split every time.
func TestBuild(t *testing.T) {
	opt := DefaultOptions()
	opt.PerKind = 20
	a, err := Build(opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("two builds differ: %d and %d documents", len(a), len(b))
	}
	kinds := map[Kind]int{}
	var held int
	for i, d := range a {
		if d.Path != b[i].Path || d.HeldOut != b[i].HeldOut {
			t.Fatalf("document %d differs between builds: %s and %s", i, d.Path, b[i].Path)
		}
		if len(d.Text) > opt.MaxBytes {
			t.Errorf("%s: %d bytes, more than %d", d.Path, len(d.Text), opt.MaxBytes)
		}
		kinds[d.Kind]++
		if d.HeldOut {
			held++
		}
	}
	// Kinds every Go build machine has: Go and C source, config, web
	// pages (Go's own), e-mails and JSON (embedded at least).
	for _, k := range []Kind{GoCode, CCode, Config, HTML, Email, JSON} {
		if kinds[k] == 0 {
			t.Errorf("no %s documents", k)
		}
	}
	if held == 0 || held == len(a) {
		t.Errorf("held out %d of %d: want both parts", held, len(a))
	}
}

// TestEmbedded: the hand-written documents parse into entries with no
// leading comment, e-mails with headers and JSON that is valid.
func TestEmbedded(t *testing.T) {
	docs, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if strings.HasPrefix(d.Text, "#") {
			t.Errorf("%s starts with a comment", d.Path)
		}
		if d.Kind == Email && !strings.HasPrefix(d.Text, "From:") {
			t.Errorf("%s: an e-mail without a From header", d.Path)
		}
	}
}

func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		size int
		want []string
	}{
		{"short", "a\nb\n", 10, []string{"a\nb\n"}},
		{"lines", "aa\nbb\ncc\n", 6, []string{"aa\nbb\n", "cc\n"}},
		{"long line", "abcdefgh", 4, []string{"abcd", "efgh"}},
		{"runes kept whole", "aéééé", 4, []string{"aé", "éé", "é"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := chunks(tc.in, tc.size)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("chunks(%q, %d) = %q, want %q", tc.in, tc.size, got, tc.want)
			}
		})
	}
}
