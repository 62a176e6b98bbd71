package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeErrorNamesNoGoTypes: a request field of the wrong type is
// reported by its JSON name and kind.
func TestDecodeErrorNamesNoGoTypes(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"max_tokens":"ten","messages":[]}`, "max_tokens: want a whole number, got a string"},
		{`{"messages":{"role":"user"}}`, "messages: want an array, got an object"},
		{`{"stream":"yes","messages":[]}`, "stream: want true or false, got a string"},
		{`{"messages":[{"role":7}]}`, "messages.role: want a string, got a number"},
		{`{"messages":[`, "not valid JSON"},
	} {
		var cr ChatRequest
		err := json.Unmarshal([]byte(tc.body), &cr)
		if err == nil {
			t.Fatalf("%s: no error", tc.body)
		}
		got := DecodeError(err).Error()
		if !strings.Contains(got, tc.want) || strings.Contains(got, "Go ") || strings.Contains(got, "ChatRequest") {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
	}
}
