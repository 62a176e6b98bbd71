package cli

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/guardnats"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// The output a guard that cannot judge is asked about.
const unjudgedText = "The sun is the star at the centre of the solar system. It gives light and heat."

// failClosed is the README's fail-closed rule.
const failClosed = "actions: {guard_unavailable: {action: halt}}\n"

// judgement is an attempt's verdict and how much of its text went out.
type judgement struct {
	v        validator.Verdict
	released int
}

// judged runs text through one attempt of pol's checks until its verdict
// is in.
func judged(t *testing.T, pol *policy.Policy) judgement {
	t.Helper()
	req := &validator.Request{Messages: []validator.Message{{Role: "user", Content: "Tell me about the sun."}}}
	a, err := pipeline.New(pol, req, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	a.Feed([]byte(unjudgedText), time.Now())
	now := time.Now()
	st := pipeline.Wait(a, a.CloseAt(now), now) // the guard's deadline ends it
	return judgement{a.Verdict(1), st.Release}
}

// unjudgedNoted fails the test unless v passed with a guard_unavailable
// finding over the text and all of it was released.
func unjudgedNoted(t *testing.T, j judgement) {
	t.Helper()
	v, released := j.v, j.released
	if v.Verdict != validator.Pass || released != len(unjudgedText) || !hasUnjudged(v) {
		t.Errorf("verdict %s (%s), %d of %d bytes released, findings %+v; want a pass that says the text went out unjudged",
			v.Verdict, v.Reason, released, len(unjudgedText), v.Findings)
	}
}

// unjudgedHalted fails the test unless v halts on guard_unavailable and
// none of the text was released.
func unjudgedHalted(t *testing.T, j judgement) {
	t.Helper()
	v, released := j.v, j.released
	if v.Verdict != validator.Fail || v.Reason != validator.ReasonGuardUnavailable || v.Action != validator.ActionHalt || released != 0 {
		t.Errorf("verdict %s (%s, %s), %d bytes released, findings %+v; want a guard_unavailable halt with nothing released",
			v.Verdict, v.Reason, v.Action, released, v.Findings)
	}
}

func hasUnjudged(v validator.Verdict) bool {
	for _, f := range v.Findings {
		if f.Reason == validator.ReasonGuardUnavailable {
			return true
		}
	}
	return false
}

func mustParse(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	checks.RegisterDefault()
	p, err := policy.Parse([]byte(doc), "test", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestGuardWorkersWithNoLiveWorkerSayUnjudged: --guard-workers on a real
// NATS server with no worker listening: every answer's verdict says its
// text was not judged (never a pass with no findings), and the fail-closed
// rule halts it.
func TestGuardWorkersWithNoLiveWorkerSayUnjudged(t *testing.T) {
	n := testbed.StartNATS(t)
	guardnats.Register(quiet)
	extra := workerExtra(nil, guardServerConfig{Deadline: time.Second}, fleetConfig{NATS: n.URL, GuardWorkers: "guard"}, quiet)
	t.Run("default", func(t *testing.T) {
		unjudgedNoted(t, judgedWith(t, policy.Default(), extra))
	})
	t.Run("fail closed", func(t *testing.T) {
		unjudgedHalted(t, judgedWith(t, mustParse(t, failClosed), extra))
	})
}

func judgedWith(t *testing.T, pol *policy.Policy, extra func(*validator.Request) []validator.Validator) judgement {
	return judged(t, pol.With(guardCheck(extra)))
}

// deadURL is the address of a server that is gone: connections to it are
// refused.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

// TestDeadGuardServerSaysUnjudged: a --guard-model server that is not
// serving (the supervisor has no server up) or that refuses connections:
// the verdict says the text was not judged, and the fail-closed rule halts.
func TestDeadGuardServerSaysUnjudged(t *testing.T) {
	notServing := guardExtra(supervisor.New(supervisor.Config{}), guardServerConfig{Deadline: time.Second}, quiet)
	url := deadURL(t)
	refusing := func(req *validator.Request) []validator.Validator {
		return []validator.Validator{guardLLM(llm.Config{URL: url, Kind: "llama-server", Deadline: time.Second}, req, quiet)}
	}
	for name, extra := range map[string]func(*validator.Request) []validator.Validator{"not serving": notServing, "refusing": refusing} {
		t.Run(name, func(t *testing.T) {
			unjudgedNoted(t, judgedWith(t, policy.Default(), extra))
		})
		t.Run(name+", fail closed", func(t *testing.T) {
			unjudgedHalted(t, judgedWith(t, mustParse(t, failClosed), extra))
		})
	}
}

// TestGuardServerFailOpenFalseHalts: serve's guard_server: {fail_open:
// false} is the fail-closed rule, as the policy's own key is.
func TestGuardServerFailOpenFalseHalts(t *testing.T) {
	pol, err := policy.Default().WithFailOpen(false, "guard_server.fail_open")
	if err != nil {
		t.Fatal(err)
	}
	unjudgedHalted(t, judgedWith(t, pol, guardExtra(supervisor.New(supervisor.Config{}), guardServerConfig{}, quiet)))
}

// TestPolicyGuardLLMFailClosedHoldsUnjudgedText: a policy's guard_llm with
// fail_open: false does not release text its dead server never judged.
func TestPolicyGuardLLMFailClosedHoldsUnjudgedText(t *testing.T) {
	pol := mustParse(t, "checks: {guard_llm: {url: "+deadURL(t)+", fail_open: false, deadline: 1s}}\n")
	unjudgedHalted(t, judged(t, pol))
}

// TestVerdictSaysWhenTextWasNotJudged: a policy's guard_llm whose server
// is gone, failing open by the default rule or by its own fail_open,
// releases the answer with a verdict that carries guard_unavailable (the
// supervised server and the fleet's workers are the tests above).
func TestVerdictSaysWhenTextWasNotJudged(t *testing.T) {
	url := deadURL(t)
	unjudgedNoted(t, judged(t, mustParse(t, "checks: {guard_llm: {url: "+url+", deadline: 1s}}\n")))
	unjudgedNoted(t, judged(t, mustParse(t, "checks: {guard_llm: {url: "+url+", fail_open: true, deadline: 1s}}\n")))
}

// TestGuardSectionFailOpenAccepted: the policy's guard: {fail_open: false},
// as docs/policy.md shows it, starts serve (the input screen's section
// takes it) and is the fail-closed rule.
func TestGuardSectionFailOpenAccepted(t *testing.T) {
	pol := mustParse(t, "guard: {input: \"off\", fail_open: false}\n")
	if _, err := serveInputGuard(pol, ""); err != nil {
		t.Fatalf("serve refuses the guard section: %v", err)
	}
	if a := pol.Rule(validator.ReasonGuardUnavailable).Action; a != validator.ActionHalt {
		t.Errorf("guard_unavailable rule %s, want halt", a)
	}
}
