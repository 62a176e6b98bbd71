// Package standin is a stand-in for a guard model's llama-server: an HTTP
// server that answers /completion the way llama-server does for a guard
// (grammar-constrained pass/fail words with their probabilities, n_predict
// 0 prefills, a timings object) and takes the time a real guard would:
// prompt tokens not in the slot's cache at the prefill speed, generated
// tokens at the decode speed, one task at a time per slot, in the order
// they arrive. Its slots keep the last prompt as llama-server's prompt
// cache does (cache_prompt, id_slot), so a guard that keeps its prefix warm
// is rewarded as it is on a real server.
//
// It lets the guard's scheduling be tested with a fake clock and
// benchmarked with the real one at the speeds of a recorded machine,
// without the machine.
package standin

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

// Config sets the stand-in's speed and behaviour.
type Config struct {
	// PrefillTPS and DecodeTPS are the prompt and generation speeds in
	// tokens per second (recorded H200 machine's CPU guard: 600 and 50).
	PrefillTPS, DecodeTPS float64
	// Slots is the number of slots (-np); default 1.
	Slots int
	// BytesPerToken, when set, counts a token per that many bytes of
	// prompt; zero counts as a Llama tokenizer does English, about a token
	// per word with its leading space, per digit and per punctuation mark,
	// so a main model's streamed tokens are as many guard tokens.
	BytesPerToken int
	// Overhead is added to every task (HTTP, sampling, scheduling).
	Overhead time.Duration
	// Fail decides the answer: true picks the failing word. Default: the
	// prompt contains "UNSAFE".
	Fail func(prompt string) bool
	// Clock times the work; nil is the wall clock.
	Clock clock.Clock
}

// Task is one /completion the stand-in ran, for tests.
type Task struct {
	Slot                     int
	Queued, Started, Ended   time.Time
	PromptN, CacheN, Predict int
	NPredict                 int
	Prompt                   string
	Content                  string
	Canceled                 bool
}

// Server is the stand-in. Build it with New; it is an http.Handler.
type Server struct {
	cfg   Config
	clk   clock.Clock
	slots []*slot

	mu    sync.Mutex
	tasks []Task
}

type slot struct {
	turn  chan struct{} // a token: held by the task running on the slot
	mu    sync.Mutex
	cache string // the prompt and answer of the last task
	busy  bool
	last  time.Time
}

// New returns a stand-in with cfg's speeds.
func New(cfg Config) *Server {
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	if cfg.PrefillTPS <= 0 {
		cfg.PrefillTPS = 600
	}
	if cfg.DecodeTPS <= 0 {
		cfg.DecodeTPS = 50
	}
	if cfg.Fail == nil {
		cfg.Fail = func(p string) bool { return strings.Contains(p, "UNSAFE") }
	}
	s := &Server{cfg: cfg, clk: clock.Or(cfg.Clock)}
	for range cfg.Slots {
		sl := &slot{turn: make(chan struct{}, 1)}
		sl.turn <- struct{}{}
		s.slots = append(s.slots, sl)
	}
	return s
}

// Tasks returns the tasks run so far.
func (s *Server) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Task(nil), s.tasks...)
}

// Evict empties every slot's prompt cache (another user's request took
// the slot).
func (s *Server) Evict() {
	for _, sl := range s.slots {
		sl.mu.Lock()
		sl.cache = ""
		sl.mu.Unlock()
	}
}

// wordRe splits English as a Llama tokenizer roughly does.
var wordRe = regexp.MustCompile(`\s?[A-Za-z]+|\s?[0-9]|\s?[^A-Za-z0-9\s]|\s+`)

// Tokens is how many tokens the stand-in counts in text.
func (s *Server) Tokens(text string) int {
	if s.cfg.BytesPerToken > 0 {
		return (len(text) + s.cfg.BytesPerToken - 1) / s.cfg.BytesPerToken
	}
	return len(wordRe.FindAllStringIndex(text, -1))
}

// cachedTokens is how many tokens of prompt the cache holds: the tokens
// of the common prefix, less one when it ends inside a token.
func (s *Server) cachedTokens(cache, prompt string) int {
	n := commonPrefix(cache, prompt)
	if s.cfg.BytesPerToken > 0 {
		return n / s.cfg.BytesPerToken
	}
	t := s.Tokens(prompt[:n])
	if n < len(prompt) && n > 0 && t > 0 && s.Tokens(prompt[:n+1]) == t {
		t-- // the token at the cut goes on past it
	}
	return t
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health":
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	case r.URL.Path == "/props" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"total_slots": len(s.slots), "model_path": "standin-guard.gguf",
			"build_info": "standin", "chat_template": ""})
	case r.URL.Path == "/slots" && r.Method == http.MethodGet:
		var out []map[string]any
		for i, sl := range s.slots {
			sl.mu.Lock()
			out = append(out, map[string]any{"id": i, "is_processing": sl.busy, "n_ctx": 4096})
			sl.mu.Unlock()
		}
		writeJSON(w, http.StatusOK, out)
	case r.URL.Path == "/completion" && r.Method == http.MethodPost:
		s.completion(w, r)
	default:
		writeJSON(w, http.StatusNotFound, errBody(http.StatusNotFound, "File Not Found"))
	}
}

type request struct {
	Prompt      string   `json:"prompt"`
	NPredict    *int     `json:"n_predict"`
	Grammar     string   `json:"grammar"`
	NProbs      int      `json:"n_probs"`
	CachePrompt *bool    `json:"cache_prompt"`
	IDSlot      *int     `json:"id_slot"`
	Stream      bool     `json:"stream"`
	Temperature *float64 `json:"temperature"`
}

func (s *Server) completion(w http.ResponseWriter, r *http.Request) {
	queued := s.clk.Now()
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest, "invalid JSON: "+err.Error()))
		return
	}
	if req.Stream {
		writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest, "the stand-in does not stream"))
		return
	}
	nPredict := -1
	if req.NPredict != nil {
		nPredict = *req.NPredict
	}
	words, err := alternatives(req.Grammar)
	if err != nil && nPredict != 0 {
		writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest, "Failed to parse grammar: "+err.Error()))
		return
	}
	if nPredict != 0 && len(words) == 0 {
		writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest, "the stand-in answers only grammars of alternative words"))
		return
	}
	id := 0
	if req.IDSlot != nil && *req.IDSlot >= 0 {
		if *req.IDSlot >= len(s.slots) {
			writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest, fmt.Sprintf("invalid id_slot %d", *req.IDSlot)))
			return
		}
		id = *req.IDSlot
	} else {
		id = s.pickSlot()
	}
	sl := s.slots[id]
	select { // wait for the slot, as llama-server defers a task
	case <-sl.turn:
	case <-r.Context().Done():
		return
	}
	defer func() { sl.turn <- struct{}{} }()
	started := s.clk.Now()
	sl.mu.Lock()
	sl.busy = true
	cached := sl.cache
	sl.mu.Unlock()

	total := s.Tokens(req.Prompt)
	cacheN := 0
	if req.CachePrompt == nil || *req.CachePrompt {
		cacheN = min(s.cachedTokens(cached, req.Prompt), total)
	}
	if cacheN == total && nPredict != 0 && total > 0 {
		cacheN-- // the last prompt token is evaluated again for its logits
	}
	promptN := total - cacheN
	content, predicted := "", 0
	var probs []map[string]any
	if nPredict != 0 {
		fail := s.cfg.Fail(req.Prompt)
		content = pick(words, fail)
		predicted = 1
		probs = probsFor(words, content, fail)
	}
	promptDur := time.Duration(float64(promptN) / s.cfg.PrefillTPS * float64(time.Second))
	predDur := time.Duration(float64(predicted) / s.cfg.DecodeTPS * float64(time.Second))
	t := s.clk.NewTimer(s.cfg.Overhead + promptDur + predDur)
	canceled := false
	select {
	case <-t.C():
	case <-r.Context().Done():
		t.Stop()
		canceled = true
	}
	ended := s.clk.Now()
	sl.mu.Lock()
	sl.busy, sl.last = false, ended
	if canceled {
		// Work cut short: what was evaluated before is all that is kept,
		// roughly the part already in the cache.
		sl.cache = req.Prompt[:commonPrefix(cached, req.Prompt)]
	} else {
		sl.cache = req.Prompt + content
	}
	sl.mu.Unlock()
	s.mu.Lock()
	s.tasks = append(s.tasks, Task{Slot: id, Queued: queued, Started: started, Ended: ended, PromptN: promptN, CacheN: cacheN,
		Predict: predicted, NPredict: nPredict, Prompt: req.Prompt, Content: content, Canceled: canceled})
	s.mu.Unlock()
	if canceled {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	perSec := func(n int, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	perTok := func(n int, d time.Duration) float64 {
		if n == 0 {
			return 0
		}
		return ms(d) / float64(n)
	}
	out := map[string]any{
		"content": content, "stop": true, "stop_type": "limit", "tokens_cached": cacheN + promptN + predicted,
		"tokens_evaluated": promptN, "id_slot": id,
		"timings": map[string]any{
			"cache_n": cacheN, "prompt_n": promptN, "prompt_ms": ms(promptDur), "prompt_per_token_ms": perTok(promptN, promptDur),
			"prompt_per_second": perSec(promptN, promptDur), "predicted_n": predicted, "predicted_ms": ms(predDur),
			"predicted_per_token_ms": perTok(predicted, predDur), "predicted_per_second": perSec(predicted, predDur),
		},
	}
	if req.NProbs > 0 && probs != nil {
		out["completion_probabilities"] = probs
	}
	writeJSON(w, http.StatusOK, out)
}

// pickSlot is an idle slot, else the least recently used one.
func (s *Server) pickSlot() int {
	best, bestT := 0, time.Time{}
	for i, sl := range s.slots {
		sl.mu.Lock()
		busy, last := sl.busy, sl.last
		sl.mu.Unlock()
		if !busy && (bestT.IsZero() || last.Before(bestT)) {
			best, bestT = i, last
			if last.IsZero() {
				break
			}
		}
	}
	return best
}

// failWords and passWords are the decision words of the guard protocols.
var (
	failWords = map[string]bool{"fail": true, "unsafe": true, "Yes": true, "Unsafe": true}
	passWords = map[string]bool{"pass": true, "safe": true, "No": true, "Safe": true}
)

// pick returns the alternative the stand-in answers with.
func pick(words []string, fail bool) string {
	for _, w := range words {
		if fail && failWords[w] || !fail && passWords[w] {
			return w
		}
	}
	return words[0]
}

// probsFor reports the chosen word with probability 0.97 and the others
// sharing the rest, in llama-server's completion_probabilities shape.
func probsFor(words []string, chosen string, _ bool) []map[string]any {
	var top []map[string]any
	rest := 0.03 / math.Max(1, float64(len(words)-1))
	for _, w := range words {
		p := rest
		if w == chosen {
			p = 0.97
		}
		top = append(top, map[string]any{"token": w, "logprob": math.Log(p)})
	}
	return []map[string]any{{"token": chosen, "logprob": math.Log(0.97), "top_logprobs": top}}
}

var altRe = regexp.MustCompile(`^root\s*::=\s*("(?:[^"\\]|\\.)*"(?:\s*\|\s*"(?:[^"\\]|\\.)*")*)\s*$`)
var litRe = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// alternatives reads a grammar of the form root ::= "a" | "b" | ...
func alternatives(g string) ([]string, error) {
	g = strings.TrimSpace(g)
	if g == "" {
		return nil, nil
	}
	m := altRe.FindStringSubmatch(g)
	if m == nil {
		return nil, fmt.Errorf("not a list of alternative words: %.80q", g)
	}
	var out []string
	for _, l := range litRe.FindAllStringSubmatch(m[1], -1) {
		out = append(out, strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n").Replace(l[1]))
	}
	return out, nil
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func errBody(code int, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": msg, "type": "invalid_request_error"}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
