package approval

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// FuzzArguments: any arguments give paths within the cap and a hash that
// does not change with spacing.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"to":"x","body":"y"}`, `{"msg":{"to":["a","b"],"meta":{}},"n":1}`, `{"a/b":1,"c~d":2}`, `{"to":`, `"t"`, `[[[[1]]]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if n := len(Paths(args)); n > MaxPaths {
			t.Fatalf("%d paths", n)
		}
		h := ArgsHash([]validator.ToolCall{{Name: "t", Arguments: args}})
		if string(canonical(args)) == string(canonical(" "+args+" ")) && ArgsHash([]validator.ToolCall{{Name: "t", Arguments: " " + args + " "}}) != h {
			t.Fatal("same canonical form, other hash")
		}
	})
}
