package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// cutRecorder wraps the pipeline's attempt and records how much text the
// attempt had received when it first failed.
type cutRecorder struct {
	*pipeline.Attempt
	n     int
	cutAt *[]int
}

func (c *cutRecorder) Feed(p []byte, at time.Time) pipeline.Step {
	c.n += len(p)
	was := c.Attempt.Failed()
	step := c.Attempt.Feed(p, at)
	if !was && c.Attempt.Failed() {
		*c.cutAt = append(*c.cutAt, c.n)
	}
	return step
}

// TestTestbedLoop: "Once upon a time" at temperature 0 makes stories260K
// tell its story and then start it again from the top. Aegis must cut the
// generation within 64 tokens of the loop's start and then repair (a
// retry with DRY sampling continuing the released text) or halt.
func TestTestbedLoop(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	if _, ok := validator.Default.Lookup("repetition"); !ok {
		t.Fatal("the repetition check is not registered")
	}
	up := mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)
	body := `{"prompt":"Once upon a time","stream":true,"temperature":0,"max_tokens":490}`
	d := direct(t, env.LlamaCPUURL+"/v1/completions", body, false)
	loopStart := strings.Index(d.content[20:], "Once upon a time") + 20
	if loopStart < 20 || !strings.HasPrefix(d.content[loopStart+len("Once upon a time"):], d.content[:80]) {
		t.Fatalf("the direct answer does not loop as expected: %q", d.content)
	}

	var cuts []int
	pol := policy.Default()
	g := &Gateway{Upstreams: []*upstream.Upstream{up}, NewChecker: func(req *validator.Request) (Checker, error) {
		a, err := pipeline.New(pol, req, pipeline.Options{})
		if err != nil {
			return nil, err
		}
		return &cutRecorder{Attempt: a, cutAt: &cuts}, nil
	}}
	srv := start(t, g)
	s := readStream(t, post(t, srv.URL+"/v1/completions", body), false)
	if len(cuts) == 0 {
		t.Fatalf("the loop was not cut; content %q", s.content)
	}
	cut := cuts[0]
	if cut < loopStart {
		t.Fatalf("cut at byte %d, before the loop starts at %d", cut, loopStart)
	}
	code, b, err := up.Get(t.Context(), "/health")
	if err != nil || code != 200 {
		t.Fatal(code, err)
	}
	_ = b
	tokens := countTokens(t, up, d.content[loopStart:cut])
	t.Logf("loop starts at byte %d; first attempt cut at byte %d, %d tokens into the loop; attempts cut at %v", loopStart, cut, tokens, cuts)
	if tokens > 64 {
		t.Fatalf("cut %d tokens after the loop's start, want <= 64", tokens)
	}
	var m meta
	if s.errEv != nil {
		var e errorBody
		json.Unmarshal(mustJSON(s.errEv), &e)
		if e.Error.Code != "aegis_repetition_loop" {
			t.Fatalf("halted with %q: %s", e.Error.Code, e.Error.Message)
		}
		t.Logf("halted after %d attempts", e.Aegis.Attempts)
		m = *e.Aegis
	} else {
		json.Unmarshal(s.last["aegis"], &m)
		if len(m.Repaired) == 0 || m.Verdict.Verdict != validator.Pass {
			t.Fatalf("neither repaired nor halted: %+v", m)
		}
		t.Logf("repaired in %d attempts: %q", m.Attempts, s.content)
		// The retry continued within the client's budget (max_tokens 490 for
		// the whole answer). Re-tokenizing the text is not exactly the
		// generation's tokens (a character split over two tokens streams as
		// one chunk), hence 1 % of slack; without the budget the retry asks
		// for all 490 again.
		if n := countTokens(t, up, s.content); n > 495 {
			t.Fatalf("the repaired answer has %d tokens, over max_tokens 490", n)
		}
	}
	// The client never saw the loop: the text it got does not restart the story.
	if strings.Contains(s.content[min(len(s.content), 20):], d.content[:80]) {
		t.Fatalf("the client saw the loop: %q", s.content)
	}
}

func countTokens(t *testing.T, up *upstream.Upstream, text string) int {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"content": text})
	resp, err := up.Post(t.Context(), "/tokenize", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Tokens []int }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return len(out.Tokens)
}
