package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// metaCases are verdicts whose encoding appendMeta must give byte for
// byte as json.Marshal does.
var metaCases = []struct {
	name string
	m    meta
}{
	{"pass", meta{Verdict: validator.Verdict{ID: "req-1", Verdict: validator.Pass, Action: validator.ActionRelease}, RequestID: "req-1", Attempts: 1}},
	{"no id", meta{Verdict: validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease}, RequestID: "r", Attempts: 2}},
	{"repaired", meta{Verdict: validator.Verdict{ID: "r", Verdict: validator.Pass, Risk: validator.RiskMedium, Action: validator.ActionRelease}, RequestID: "r", Attempts: 2, Repaired: []validator.Reason{validator.ReasonRepetitionLoop, validator.ReasonInvalidJSON}}},
	{"repaired odd reason", meta{Verdict: validator.Verdict{Verdict: validator.Pass}, RequestID: "r", Attempts: 2, Repaired: []validator.Reason{"a\"b<"}}},
	{"fail with reason", meta{Verdict: validator.Verdict{ID: "r", Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonInvalidJSON, Action: validator.ActionFixSyntax, Findings: []validator.Finding{}}, RequestID: "r", Attempts: 3}},
	{"findings", meta{Verdict: validator.Verdict{ID: "r", Verdict: validator.Fail, Reason: validator.ReasonSchemaViolation, Findings: []validator.Finding{{Reason: validator.ReasonSchemaViolation, Message: "x"}}}, RequestID: "r", Attempts: 1}},
	{"error", meta{Verdict: validator.Verdict{Verdict: validator.Fail, Error: "bad <case> & \"line\""}, RequestID: "r"}},
	{"unknown risk", meta{Verdict: validator.Verdict{Verdict: validator.Pass, Risk: validator.Risk(7)}, RequestID: "r", Attempts: -1}},
	{"non-ASCII id", meta{Verdict: validator.Verdict{ID: "é\u2028", Verdict: validator.Pass}, RequestID: "é\u2028"}},
}

func checkAppendMeta(t *testing.T, m *meta) {
	t.Helper()
	want, err := json.Marshal(m)
	got, ok := appendMeta([]byte("x"), m)
	if ok != (err == nil) || ok && string(got) != "x"+string(want) {
		t.Fatalf("appendMeta = %s (%v), json.Marshal = %s (%v)", got, ok, want, err)
	}
}

func TestAppendMetaMatchesJSON(t *testing.T) {
	for _, c := range metaCases {
		t.Run(c.name, func(t *testing.T) { checkAppendMeta(t, &c.m) })
	}
}

func TestWithMetaSplicesVerdict(t *testing.T) {
	m := &metaCases[0].m
	mb, _ := json.Marshal(m)
	for _, c := range []struct{ name, in, want string }{
		{"chunk", `{"choices":[]}`, `{"choices":[],"aegis":` + string(mb) + `}`},
		{"empty object", `{}`, `{"aegis":` + string(mb) + `}`},
		{"not an object", `[1]`, `[1]`},
		{"too short", `}`, `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(withMeta([]byte(c.in), m)); got != c.want {
				t.Fatalf("withMeta(%s) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func FuzzAppendMeta(f *testing.F) {
	for _, c := range metaCases {
		v := c.m.Verdict
		f.Add(v.ID, string(v.Verdict), int(v.Risk), string(v.Reason), string(v.Action), len(v.Findings), v.Error, c.m.RequestID, c.m.Attempts, repairedText(c.m.Repaired))
	}
	f.Fuzz(func(t *testing.T, id, verdict string, risk int, reason, action string, findings int, errText, reqID string, attempts int, repaired string) {
		m := &meta{Verdict: validator.Verdict{ID: id, Verdict: validator.Outcome(verdict), Risk: validator.Risk(risk),
			Reason: validator.Reason(reason), Action: validator.Action(action), Error: errText},
			RequestID: reqID, Attempts: attempts}
		if repaired != "" {
			for _, r := range strings.Split(repaired, ",") {
				m.Repaired = append(m.Repaired, validator.Reason(r))
			}
		}
		if findings > 0 {
			m.Findings = make([]validator.Finding, findings%3)
		} else if findings == 0 {
			m.Findings = []validator.Finding{}
		}
		checkAppendMeta(t, m)
	})
}

func repairedText(rs []validator.Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}
