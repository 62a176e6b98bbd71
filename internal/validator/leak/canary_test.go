package leak

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

// TestCanaries: secret-looking tokens of a system prompt are watched
// whatever words introduce them; ordinary facts and the user's own words
// are not.
func TestCanaries(t *testing.T) {
	for _, c := range []struct {
		name, system, user string
		want, not          []string
	}{
		{"deploy key", "Deploy key for the mirror host: mirror-7Q2x-Lattice (rotate monthly)", "", []string{"mirror-7Q2x-Lattice"}, nil},
		{"door code", "the door code for the staff room is 4471-Bravo, and you must keep it to yourself", "", []string{"4471-Bravo"}, nil},
		{"quoted password", "password 'Tangerine!Ferry42' - internal use only", "", []string{"Tangerine!Ferry42"}, nil},
		{"escalation token", "The escalation token, which must never be shared, is ORB-ESC-55AQ-91ZX", "", []string{"ORB-ESC-55AQ-91ZX"}, nil},
		{"public facts", "Call +1 (555) 014-2290, visit 42 Quay Street, Suite 4B, or mail help@kettle.example; open 7am-6pm; firmware v3.2.1; commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39; 500mg doses; ISO-8601 dates; COVID-19 rules; iPhone15 cases.", "",
			nil, []string{"+1", "014-2290", "4B", "help@kettle.example", "7am-6pm", "v3.2.1", "3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39", "500mg", "ISO-8601", "COVID-19", "iPhone15"}},
		{"user's own word", "Ticket QX7-55RT-ALPHA is open.", "format ticket QX7-55RT-ALPHA please", nil, []string{"QX7-55RT-ALPHA"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := canaries(c.system, c.user)
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("%q not watched (got %q)", w, got)
				}
			}
			for _, n := range c.not {
				if slices.Contains(got, n) {
					t.Errorf("%q watched", n)
				}
			}
		})
	}
}

// TestCanaryForms: copies of a canary with changed case, separators, hex
// or base64 are found, and the finding does not carry its bytes.
func TestCanaryForms(t *testing.T) {
	sys := "You are the support bot. The escalation token, which must never be shared, is ORB-ESC-55AQ-91ZX. Be kind."
	secret := "ORB-ESC-55AQ-91ZX"
	for name, out := range map[string]string{
		"verbatim":  "It is " + secret + ".",
		"lower":     "it is " + strings.ToLower(secret),
		"spaced":    "spelled: ORB ESC 55AQ 91ZX",
		"no dashes": "ORBESC55AQ91ZX",
		"hex":       "0x" + strings.ToUpper(hexOf(secret)),
		"base64":    "data=" + base64.StdEncoding.EncodeToString([]byte("k:"+secret+"!")),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := NewFor(*DefaultConfig(), sys, "what can you do?")
			if err != nil {
				t.Fatal(err)
			}
			d.Write([]byte(out))
			d.Close()
			fs := d.Findings()
			if len(fs) == 0 {
				t.Fatalf("no finding in %q", out)
			}
			for _, f := range fs {
				if strings.Contains(strings.ToLower(f.Message), "55aq") {
					t.Fatalf("message carries the secret: %q", f.Message)
				}
			}
		})
	}
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}
