package mdimage

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

type found struct {
	URL              string
	Start, End, Bang int
}

// scanAll feeds text in the given pieces and collects every image.
func scanAll(text string, cuts []int) []found {
	var s Scanner
	var out []found
	take := func(img Image) {
		out = append(out, found{string(img.URL), img.Start, img.End, img.Bang})
	}
	prev := 0
	for _, c := range append(cuts, len(text)) {
		p, at := []byte(text[prev:c]), prev
		for len(p) > 0 {
			n, img, ok := s.Scan(p, at)
			if ok {
				take(img)
			}
			p, at = p[n:], at+n
		}
		prev = c
	}
	if img, ok := s.End(); ok {
		take(img)
	}
	return out
}

var cases = []struct {
	name, text string
	want       []found
}{
	{"one image", "see ![x](https://a.example/p.png) here", []found{{"https://a.example/p.png", 9, 32, 4}}},
	{"two images", "![a](u1) and ![b](u2)", []found{{"u1", 5, 7, 0}, {"u2", 18, 20, 13}}},
	{"ends at a space", "![a](https://a.example/x y)", []found{{"https://a.example/x", 5, 24, 0}}},
	{"runs to the end", "![a](https://a.example/?k=abc", []found{{"https://a.example/?k=abc", 5, 29, 0}}},
	{"a link is no image", "[a](https://a.example/)", nil},
	{"a bang before the bang", "!![a](u)", []found{{"u", 6, 7, 1}}},
	{"alt text broken by a line end", "![a\nb](u)", nil},
	{"empty url", "![a]()", []found{{"", 5, 5, 0}}},
	{"no paren after the alt", "![a] (u)", nil},
	{"over-long alt text", "![" + strings.Repeat("a", MaxAlt+1) + "](u)", nil},
}

func TestScanner(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := scanAll(c.text, nil); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestScannerSplits: whole, a byte at a time and in random pieces, the
// scanner finds the same images.
func TestScannerSplits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, c := range cases {
		whole := scanAll(c.text, nil)
		var bytewise []int
		for i := 1; i < len(c.text); i++ {
			bytewise = append(bytewise, i)
		}
		if got := scanAll(c.text, bytewise); !reflect.DeepEqual(got, whole) {
			t.Errorf("%s byte by byte: %+v, whole %+v", c.name, got, whole)
		}
		for range 20 {
			var cuts []int
			for i := 1; i < len(c.text); i++ {
				if rng.Intn(4) == 0 {
					cuts = append(cuts, i)
				}
			}
			if got := scanAll(c.text, cuts); !reflect.DeepEqual(got, whole) {
				t.Errorf("%s cut at %v: %+v, whole %+v", c.name, cuts, got, whole)
			}
		}
	}
}

func TestLongURLIsCut(t *testing.T) {
	got := scanAll("![a]("+strings.Repeat("u", 3*MaxURL)+")", nil)
	if len(got) != 1 || len(got[0].URL) != MaxURL {
		t.Fatalf("got %d images, first URL %d bytes; want one of %d", len(got), len(got[0].URL), MaxURL)
	}
}

func TestPending(t *testing.T) {
	var s Scanner
	s.Scan([]byte("ab ![x](htt"), 0)
	if bang, url := s.Pending(); bang != 3 || url != 8 {
		t.Fatalf("pending %d, %d; want 3, 8", bang, url)
	}
	if s.State() != URL || s.State().String() != "url" {
		t.Fatalf("state %v", s.State())
	}
}

func TestScanAllocs(t *testing.T) {
	var s Scanner
	text := []byte("plain text with no image at all, and one ![a](https://a.example/x) here")
	s.Scan(text, 0) // grow the buffer
	n := testing.AllocsPerRun(100, func() {
		p := text
		for len(p) > 0 {
			k, _, _ := s.Scan(p, 0)
			p = p[k:]
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations a run", n)
	}
}

func FuzzScanner(f *testing.F) {
	for _, c := range cases {
		f.Add(c.text, 3)
	}
	f.Fuzz(func(t *testing.T, text string, cut int) {
		whole := scanAll(text, nil)
		if cut > 0 && cut < len(text) {
			if got := scanAll(text, []int{cut}); !reflect.DeepEqual(got, whole) {
				t.Fatalf("cut at %d: %+v, whole %+v", cut, got, whole)
			}
		}
		for _, img := range whole {
			if img.Start < 0 || img.End > len(text) || img.Start > img.End || img.Bang >= img.Start {
				t.Fatalf("image %+v outside %d bytes", img, len(text))
			}
		}
	})
}
