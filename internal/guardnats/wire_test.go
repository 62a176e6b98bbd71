package guardnats

import (
	"encoding/json"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

var replySeeds = []struct {
	name, data string
	worker     string
	wantErr    bool
	wantNil    bool
}{
	{"pass", `{"worker":"w1","result":{"Verdict":{"verdict":"pass","risk":"low","reason":null,"action":"release"},"PFail":0.1,"HasProbs":true}}`, "w1", false, false},
	{"fail", `{"worker":"w2","result":{"Verdict":{"verdict":"fail","risk":"high","reason":"unsafe_content","action":"halt"}}}`, "w2", false, false},
	{"prefill", `{"worker":"w1"}`, "w1", false, true},
	{"worker error", `{"worker":"w1","error":"guard server not serving"}`, "w1", true, true},
	{"no verdict", `{"worker":"w1","result":{"PFail":0.5}}`, "w1", true, true},
	{"bad risk", `{"worker":"w1","result":{"Verdict":{"verdict":"fail","risk":"extreme"}}}`, "", true, true},
	{"not json", `pass`, "", true, true},
	{"empty", ``, "", true, true},
}

func TestParseReply(t *testing.T) {
	for _, tc := range replySeeds {
		t.Run(tc.name, func(t *testing.T) {
			w, res, err := parseReply([]byte(tc.data))
			if (err != nil) != tc.wantErr || (res == nil) != tc.wantNil || w != tc.worker {
				t.Errorf("parseReply = %q, %+v, %v", w, res, err)
			}
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	in := &llm.Result{Verdict: &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonUnsafeContent,
		Action: validator.ActionHalt, Findings: []validator.Finding{{Check: "guard_llm", Start: 1, End: 4}}}, PFail: 0.93, HasProbs: true, PromptTokens: 7}
	b, err := json.Marshal(reply{Worker: "w", Result: in})
	if err != nil {
		t.Fatal(err)
	}
	w, out, err := parseReply(b)
	if err != nil || w != "w" || out.PFail != in.PFail || out.Verdict.Risk != validator.RiskHigh ||
		out.Verdict.Reason != validator.ReasonUnsafeContent || len(out.Verdict.Findings) != 1 || out.PromptTokens != 7 {
		t.Errorf("round trip: %q %+v %+v %v", w, out, out.Verdict, err)
	}
}

func FuzzParseReply(f *testing.F) {
	for _, s := range replySeeds {
		f.Add([]byte(s.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, res, err := parseReply(data)
		if err == nil && res != nil && res.Verdict == nil {
			t.Fatalf("accepted a result without a verdict: %q", data)
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"protocol":"verdict-json","task":"safety","text":"hello","timeout_ns":2000000000}`,
		`{"protocol":"llama-guard","text":"x","user":"u","policies":["hate"],"prefill":true}`,
		`{"timeout_ns":-1}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := parseRequest(data)
		if err == nil && req.Timeout < 0 {
			t.Fatalf("accepted a negative timeout: %q", data)
		}
	})
}
