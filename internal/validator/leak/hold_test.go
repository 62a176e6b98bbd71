package leak

import (
	"strings"
	"testing"
)

// TestPawsDoesNotHoldLine: the detector holds text only from where a
// credential can still begin. "aws" inside a word, and the rest of a line
// after an "aws" label or a placeholder assignment, flow on; a real AWS
// secret or assigned password is still caught before any of it is
// released.
func TestPawsDoesNotHoldLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		leak bool
	}{
		{"paws", "The dog wiped its paws on the mat. Then step 0 is to sit down and wait", false},
		{"draws and jaws", "She draws jaws and laws, then the story goes on for many words", false},
		{"aws label then prose", "Set AWS_REGION to eu-west-1 and then carry on with the rest of the steps", false},
		{"placeholder key", `api_key = "YOUR_API_KEY_HERE" then call the client with it and wait`, false},
		{"placeholder password", `password: "changeme123" and log in, then change it at once please`, false},
		{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9a8b7c6d and more words after it", true},
		{"aws secret spoken", "Your AWS secret key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9a8b7c6d so keep it safe", true},
		{"assigned password", `password = "Zq8#kW2!vR5x" and then the rest of the line`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(*DefaultConfig(), "")
			if err != nil {
				t.Fatal(err)
			}
			released := 0
			for i := range len(tc.text) {
				d.Write([]byte(tc.text[i : i+1]))
				released = max(released, d.Settled())
				if fs := d.Findings(); len(fs) > 0 && released > fs[0].Start {
					t.Fatalf("released up to %d, past the leak at %d", released, fs[0].Start)
				}
			}
			fs := d.Findings()
			if tc.leak {
				d.Close()
				fs = d.Findings()
				if len(fs) == 0 {
					t.Fatalf("no finding in %q", tc.text)
				}
				return
			}
			if len(fs) > 0 {
				t.Fatalf("false finding %+v", fs)
			}
			if last := strings.LastIndexByte(tc.text, ' ') + 1; released < last {
				t.Fatalf("held from %d (%q); only the last word may wait", released, tc.text[released:])
			}
		})
	}
}
