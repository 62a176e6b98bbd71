package approval

import (
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// BenchmarkArgsHash: the hash of one call with 1 KiB of arguments, paid
// once per held call.
func BenchmarkArgsHash(b *testing.B) {
	args := `{"to":"a@example.com","subject":"report","body":"` + strings.Repeat("lorem ipsum ", 80) + `"}`
	calls := []validator.ToolCall{{Name: "send_email", Arguments: args}}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		ArgsHash(calls)
		Paths(args)
	}
}
