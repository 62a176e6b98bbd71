package llm

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestGuardFindingRiskMatchesVerdict: the verdict's risk is the policy's
// for the reason (here unsafe_content at medium); the guard model's own
// risk word (high, from p_fail 0.95) must not appear in the finding to
// contradict it.
func TestGuardFindingRiskMatchesVerdict(t *testing.T) {
	srv := httptest.NewServer(&fakeLlama{fail: true})
	defer srv.Close()
	g, err := New(Config{URL: srv.URL, CadenceTokens: 4, Deadline: time.Minute}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("One sentence here. Another sentence there."))
	g.Close()
	waitDone(t, g)
	g.Wait()
	fs := g.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	pol, err := policy.Parse([]byte("actions:\n  unsafe_content: {action: halt, risk: medium}\n"), "test", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	v := pol.Decide(fs, 1)
	for _, r := range []validator.Risk{validator.RiskLow, validator.RiskMedium, validator.RiskHigh} {
		if r != v.Risk && strings.Contains(fs[0].Message, "risk "+r.String()) {
			t.Fatalf("finding says %q in a verdict of risk %s", fs[0].Message, v.Risk)
		}
	}
}
