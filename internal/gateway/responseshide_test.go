package gateway

import (
	"strings"
	"testing"
)

// TestResponsesHideReasoning: every Responses event that repeats the
// reasoning whole comes out blanked, the rest byte for byte.
func TestResponsesHideReasoning(t *testing.T) {
	const thought = "Pondering the secret KESTREL-7731."
	for _, tc := range []struct {
		name, in string
		same     bool
	}{
		{"text done", `{"type":"response.reasoning_text.done","item_id":"rs_1","output_index":0,"text":"` + thought + `"}`, false},
		{"summary done", `{"type":"response.reasoning_summary_text.done","item_id":"rs_1","text":"` + thought + `"}`, false},
		{"summary part", `{"type":"response.reasoning_summary_part.done","item_id":"rs_1","part":{"type":"summary_text","text":"` + thought + `"}}`, false},
		{"reasoning part", `{"type":"response.content_part.done","item_id":"rs_1","part":{"type":"reasoning_text","text":"` + thought + `"}}`, false},
		{"item done", `{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"` + thought + `"}],"content":[{"type":"reasoning_text","text":"` + thought + `"}]}}`, false},
		{"completed", `{"type":"response.completed","response":{"id":"r","output":[{"type":"reasoning","id":"rs_1","content":[{"type":"reasoning_text","text":"` + thought + `"}]},{"type":"message","id":"m","content":[{"type":"output_text","text":"Hi."}]}]}}`, false},
		{"message item", `{"type":"response.output_item.done","output_index":1,"item":{"type":"message","id":"m","content":[{"type":"output_text","text":"Hi about reasoning."}]}}`, true},
		{"text part", `{"type":"response.content_part.done","item_id":"m","part":{"type":"output_text","text":"reasoning"}}`, true},
		{"delta", `{"type":"response.output_text.delta","item_id":"m","delta":"Hi"}`, true},
		{"not json", `{"type":"response.reasoning_text.done",`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(responsesDialect{}.hideReasoning([]byte(tc.in)))
			if tc.same {
				if got != tc.in {
					t.Fatalf("changed:\n%s\nto\n%s", tc.in, got)
				}
				return
			}
			if strings.Contains(got, "KESTREL") || strings.Contains(got, "Pondering") {
				t.Fatalf("reasoning left in %s", got)
			}
			if strings.Contains(tc.in, `"Hi."`) && !strings.Contains(got, `"Hi."`) {
				t.Fatalf("the answer went with it: %s", got)
			}
		})
	}
}
