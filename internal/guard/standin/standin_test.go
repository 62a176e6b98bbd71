package standin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

type answer struct {
	Content string `json:"content"`
	Probs   []struct {
		Token string `json:"token"`
		Top   []struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
	Timings struct {
		CacheN      int     `json:"cache_n"`
		PromptN     int     `json:"prompt_n"`
		PredictedN  int     `json:"predicted_n"`
		PromptMS    float64 `json:"prompt_ms"`
		PredictedMS float64 `json:"predicted_ms"`
	} `json:"timings"`
}

// post sends body to the stand-in and returns its answer once the fake
// clock has been moved past the task's work.
func post(t *testing.T, url string, fk *clock.Fake, body map[string]any) (answer, int) {
	t.Helper()
	armed := fk.Armed()
	type res struct {
		a    answer
		code int
	}
	done := make(chan res, 1)
	b, _ := json.Marshal(body)
	go func() {
		resp, err := http.Post(url+"/completion", "application/json", bytes.NewReader(b))
		if err != nil {
			done <- res{}
			return
		}
		defer resp.Body.Close()
		var a answer
		_ = json.NewDecoder(resp.Body).Decode(&a)
		done <- res{a, resp.StatusCode}
	}()
	select {
	case r := <-done: // refused before any work
		return r.a, r.code
	case <-armed:
	}
	next, _ := fk.Next()
	fk.Set(next)
	r := <-done
	return r.a, r.code
}

func words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("word")
	}
	return b.String()
}

// TestStandinTiming: a prefill costs its uncached tokens at the prefill
// speed, a verdict after it only the new tokens and one decode step, and
// the answer carries llama-server's timings and probabilities.
func TestStandinTiming(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fk := clock.NewFake(t0)
	s := New(Config{PrefillTPS: 600, DecodeTPS: 50, Clock: fk})
	srv := httptest.NewServer(s)
	defer srv.Close()

	prompt := words(60)
	a, code := post(t, srv.URL, fk, map[string]any{"prompt": prompt, "n_predict": 0, "id_slot": 0, "cache_prompt": true})
	if code != 200 || a.Timings.PromptN != 60 || a.Timings.CacheN != 0 || a.Content != "" {
		t.Fatalf("prefill: %d %+v", code, a)
	}
	if got := fk.Now().Sub(t0); got != 100*time.Millisecond {
		t.Errorf("60 tokens at 600/s took %v, want 100ms", got)
	}
	t1 := fk.Now()
	a, code = post(t, srv.URL, fk, map[string]any{"prompt": prompt + words(7)[4:], "n_predict": 1, "n_probs": 5,
		"grammar": `root ::= "pass" | "fail"`, "id_slot": 0})
	if code != 200 || a.Content != "pass" || a.Timings.CacheN != 60 || a.Timings.PromptN != 6 || a.Timings.PredictedN != 1 {
		t.Fatalf("verdict: %d %+v", code, a)
	}
	if got := fk.Now().Sub(t1); got != 30*time.Millisecond {
		t.Errorf("6 tokens and a decode step took %v, want 10ms + 20ms", got)
	}
	if len(a.Probs) != 1 || len(a.Probs[0].Top) != 2 || a.Probs[0].Top[0].Logprob < a.Probs[0].Top[1].Logprob {
		t.Errorf("probabilities %+v", a.Probs)
	}
	a, _ = post(t, srv.URL, fk, map[string]any{"prompt": "UNSAFE " + prompt, "n_predict": 1,
		"grammar": `root ::= "unsafe" | "safe"`})
	if a.Content != "unsafe" || a.Timings.CacheN != 0 {
		t.Errorf("unsafe prompt answered %+v", a)
	}
	_, code = post(t, srv.URL, fk, map[string]any{"prompt": "x", "n_predict": 4, "grammar": `root ::= "a" x`})
	if code != http.StatusBadRequest {
		t.Errorf("an unsupported grammar gave %d", code)
	}
	if n := len(s.Tasks()); n != 3 {
		t.Errorf("%d tasks recorded, want 3", n)
	}
}

// TestStandinOneSlotQueues: with one slot a second task starts when the
// first ends, as llama-server defers it.
func TestStandinOneSlotQueues(t *testing.T) {
	s := New(Config{PrefillTPS: 100, DecodeTPS: 10, Overhead: time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	done := make(chan struct{}, 2)
	for i := range 2 {
		go func() {
			b, _ := json.Marshal(map[string]any{"prompt": words(3 + i*40), "n_predict": 0, "id_slot": 0})
			resp, err := http.Post(srv.URL+"/completion", "application/json", bytes.NewReader(b))
			if err == nil {
				resp.Body.Close()
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	ts := s.Tasks()
	if len(ts) != 2 {
		t.Fatalf("tasks %+v", ts)
	}
	if ts[1].Started.Before(ts[0].Ended) {
		t.Errorf("the second task started at %v, before the first ended at %v", ts[1].Started, ts[0].Ended)
	}
}

func TestAlternatives(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
		err      bool
	}{
		{"verdict", `root ::= "pass" | "fail"`, []string{"pass", "fail"}, false},
		{"native", "root ::= \"unsafe\" | \"safe\"\n", []string{"unsafe", "safe"}, false},
		{"escaped", `root ::= "a\"b" | "c"`, []string{`a"b`, "c"}, false},
		{"empty", "", nil, false},
		{"rule", `root ::= "a" x`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := alternatives(tc.in)
			if (err != nil) != tc.err || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %q %v, want %q err %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func FuzzAlternatives(f *testing.F) {
	for _, s := range []string{`root ::= "pass" | "fail"`, `root ::= "a\"b" | "c"`, `root ::= "a" x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, g string) {
		ws, err := alternatives(g)
		if err != nil && ws != nil {
			t.Fatal("words with an error")
		}
	})
}
