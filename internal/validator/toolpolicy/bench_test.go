package toolpolicy

import (
	"encoding/json"
	"fmt"
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

// history is a long agent session: turns rounds of a contact search whose
// result names an address among 1.5 KiB of notes, then an e-mail to that
// address with a short body. Every earlier e-mail goes to a destination
// only a tool result named, so the flow rule takes in what each sent (a
// key split across turns counts) when the request's first call is judged.
func history(turns int) (*validator.Request, validator.ToolCall) {
	notes := strings.Repeat("Met at the Leeds depot review; prefers calls before ten, ships pallets through Espoo on Tuesdays. ", 15)
	msgs := []validator.Message{sys("You are the logistics team's mail assistant."), user("Write to each supplier on the list about the December schedule.")}
	mail := func(i int) string { return fmt.Sprintf("supplier%d@vendor%d.example", i, i) }
	for i := range turns {
		id := fmt.Sprintf("c%d", 2*i)
		msgs = append(msgs, calls(id, "search_contacts"), toolResult(id, fmt.Sprintf(`{"name":"Supplier %d","email":"%s","notes":%q}`, i, mail(i), notes)))
		args, _ := json.Marshal(map[string]string{"to": mail(i), "body": fmt.Sprintf("Hello Supplier %d, the December schedule moves the Espoo pickups to Wednesday. Regards, logistics.", i)})
		msgs = append(msgs, validator.Message{Role: "assistant", ToolCalls: []validator.ToolCall{{ID: fmt.Sprintf("c%d", 2*i+1), Name: "send_email", Arguments: string(args)}}},
			toolResult(fmt.Sprintf("c%d", 2*i+1), `{"status":"sent"}`))
	}
	args, _ := json.Marshal(map[string]string{"to": mail(turns), "body": "Hello, the December schedule moves the Espoo pickups to Wednesday. Regards, logistics."})
	msgs = append(msgs, calls("cx", "search_contacts"), toolResult("cx", fmt.Sprintf(`{"email":"%s","notes":%q}`, mail(turns), notes)))
	return req(msgs...), validator.ToolCall{Name: "send_email", Arguments: string(args)}
}

// BenchmarkFlowHistory is the flow rule's work on a request of a long
// agent session (history): the conversation indexed, the earlier turns'
// e-mails taken in, and this turn's e-mail judged. us/KiB is over the
// conversation and the arguments.
func BenchmarkFlowHistory(b *testing.B) {
	for _, turns := range []int{5, 30} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			r, call := history(turns)
			total := len(call.Arguments)
			for _, m := range r.Messages {
				total += len(m.Content)
				for _, c := range m.ToolCalls {
					total += len(c.Arguments)
				}
			}
			b.SetBytes(int64(total))
			b.ReportAllocs()
			v, _ := New(DefaultConfig(), r, nil)
			b.Logf("%d KiB, findings %v", total/1024, v.CheckToolCall(call))
			for b.Loop() {
				v, _ := New(DefaultConfig(), r, nil)
				v.CheckToolCall(call)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/(float64(total)/1024), "us/KiB")
		})
	}
}
