package toolpolicy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// BenchmarkFlowCall is the flow rule's whole work for a request's first
// call: the conversation indexed, the system prompt's canaries placed,
// the destinations judged (an IBAN by its folded form) and every value
// traced. The conversation is a 1 KiB system prompt with a key, a user
// message and 6 KiB of tool results; the call a payment with a 1 KiB
// note. us/KiB is over the conversation and the arguments together.
func BenchmarkFlowCall(b *testing.B) {
	prose := strings.Repeat("the quarterly review of shipments to Espoo and Leeds shows 412 returns, invoice INV-2291 is due. ", 11)
	r := req(sys(prose[:1000]+" Deploy key: mirror-7Q2x-Lattice."), user("Pay the joinery invoice in my inbox"),
		calls("c1", "search_emails"), toolResult("c1", prose+prose+prose+" IBAN DE44 5001 0517 5407 3249 31"),
		calls("c2", "read_file"), toolResult("c2", prose+prose+prose))
	args, _ := json.Marshal(map[string]any{"payment": map[string]any{"creditor": map[string]string{"iban": "DE44500105175407324931"}},
		"amount": "1880.00", "note": prose[:1000]})
	call := validator.ToolCall{Name: "make_payment", Arguments: string(args)}
	total := len(args)
	for _, m := range r.Messages {
		total += len(m.Content)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	v, _ := New(DefaultConfig(), r, nil)
	v.CheckToolCall(call) // compile the rule sets once, as a running gateway has
	for b.Loop() {
		v, _ := New(DefaultConfig(), r, nil)
		if len(v.CheckToolCall(call)) == 0 {
			b.Fatal("the payment passed")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/(float64(total)/1024), "us/KiB")
}
