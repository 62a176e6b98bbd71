package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// GuardEval is the guard model judged on a labelled set in its own
// protocol: false positives (safe texts it fails) and false negatives
// (unsafe texts it passes), and the time each verdict took.
type GuardEval struct {
	File     string `json:"file"`
	Protocol string `json:"protocol"`
	Server   string `json:"server"`
	N        int    `json:"n"`
	TP       int    `json:"true_positives"`
	FP       int    `json:"false_positives"`
	TN       int    `json:"true_negatives"`
	FN       int    `json:"false_negatives"`
	// Errors counts texts the guard gave no verdict on (left out of the
	// rates).
	Errors int `json:"errors"`
	// FPR is FP/(FP+TN), FNR FN/(FN+TP); -1 when the set has no text of
	// that label.
	FPR       float64 `json:"false_positive_rate"`
	FNR       float64 `json:"false_negative_rate"`
	VerdictMS Stat    `json:"verdict_ms"`
	Error     string  `json:"error,omitempty"`
}

// Repair is the failure path's latency: from the moment a check fails on
// the main model's streamed answer to the first byte of the repaired
// answer, as the gateway's hidden retry does it: stop reading the failed
// stream, ask again with the correction, wait for its first content.
type Repair struct {
	Server string `json:"server"`
	MS     Stat   `json:"ms"`
	// FindingAfterMS is when the failing finding came, after the request
	// was sent (the first content byte of the failed answer).
	FindingAfterMS Stat   `json:"finding_after_ms"`
	Error          string `json:"error,omitempty"`
}

// EvalCase is one line of a labelled set (JSONL): the text, whether it is
// unsafe, and optionally the user message it answers (then the guard
// moderates a response, else a prompt).
type EvalCase struct {
	Text   string `json:"text"`
	Unsafe *bool  `json:"unsafe"`
	Label  string `json:"label"` // "safe" or "unsafe", when unsafe is absent
	User   string `json:"user"`
}

// maxEvalLine bounds one line of a labelled set.
const maxEvalLine = 1 << 20

// ReadEvalFile reads a labelled set.
func ReadEvalFile(path string) ([]EvalCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: eval set: %w", err)
	}
	defer f.Close()
	return parseEvalCases(f, path)
}

func parseEvalCases(r io.Reader, name string) ([]EvalCase, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEvalLine)
	var out []EvalCase
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var c EvalCase
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("bench: %s:%d: %w", name, n, err)
		}
		if c.Unsafe == nil {
			switch c.Label {
			case "safe", "unsafe":
				u := c.Label == "unsafe"
				c.Unsafe = &u
			default:
				return nil, fmt.Errorf("bench: %s:%d: want \"unsafe\": true|false or \"label\": \"safe\"|\"unsafe\"", name, n)
			}
		}
		if c.Text == "" {
			return nil, fmt.Errorf("bench: %s:%d: empty text", name, n)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: %s: no cases", name)
	}
	return out, nil
}

// evalGuard runs the guard at url over the labelled set in protocol p.
func evalGuard(ctx context.Context, url string, p llm.Protocol, cases []EvalCase) GuardEval {
	c := &llm.Client{BaseURL: url, Slot: -1}
	ge := GuardEval{Protocol: p.String(), Server: url, FPR: -1, FNR: -1}
	var ms []float64
	for _, ec := range cases {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		fail, took, err := judge(cctx, c, p, ec)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				ge.Error = ctx.Err().Error()
				break
			}
			ge.Errors++
			ge.Error = err.Error()
			continue
		}
		ms = append(ms, took)
		ge.N++
		switch unsafe := *ec.Unsafe; {
		case unsafe && fail:
			ge.TP++
		case unsafe:
			ge.FN++
		case fail:
			ge.FP++
		default:
			ge.TN++
		}
	}
	if ge.FP+ge.TN > 0 {
		ge.FPR = float64(ge.FP) / float64(ge.FP+ge.TN)
	}
	if ge.FN+ge.TP > 0 {
		ge.FNR = float64(ge.FN) / float64(ge.FN+ge.TP)
	}
	ge.VerdictMS = summarize(ms)
	return ge
}

// judge asks the guard about one case: a response when the case has a
// user message, else a prompt.
func judge(ctx context.Context, c *llm.Client, p llm.Protocol, ec EvalCase) (fail bool, took float64, err error) {
	var res *llm.Result
	if p == llm.ProtocolVerdictJSON {
		res, err = c.Check(ctx, llm.TaskSafety, llm.BuildPrompt(llm.TaskSafety, ec.User, ec.Text))
	} else {
		s := llm.Subject{Mode: llm.ModePrompt, Text: ec.Text}
		if ec.User != "" {
			s = llm.Subject{Mode: llm.ModeResponse, User: ec.User, Text: ec.Text}
		}
		res, err = c.CheckNative(ctx, p, s)
	}
	if err != nil {
		return false, 0, err
	}
	return res.Verdict.Verdict == validator.Fail, ms(res.Elapsed), nil
}

// repairRequest is the main model's request in the failure-path test.
const repairPrompt = "Tell me a story about a little girl and her dog."

// measureRepair measures the failure path n times against the main
// model's server at url (OpenAI chat API, streamed).
func measureRepair(ctx context.Context, url string, n int) Repair {
	rp := Repair{Server: url}
	hc := llamaserver.NewClient(2 * time.Minute)
	var took, after []float64
	for i := range n {
		start := time.Now()
		// The answer streams; its first content byte is where a check
		// fails (the worst case for a hold-back: nothing released yet).
		first, stop, err := streamFirst(ctx, hc, url, []map[string]string{
			{"role": "user", "content": fmt.Sprintf("%s (%d)", repairPrompt, i)},
		})
		if err != nil {
			rp.Error = err.Error()
			break
		}
		finding := time.Now()
		stop()
		_, stop2, err := streamFirst(ctx, hc, url, []map[string]string{
			{"role": "user", "content": fmt.Sprintf("%s (%d)", repairPrompt, i)},
			{"role": "assistant", "content": first},
			{"role": "user", "content": "Your previous answer was rejected by a safety check (unsafe_content). Answer again, following the instructions and without that content."},
		})
		if err != nil {
			rp.Error = err.Error()
			break
		}
		took = append(took, ms(time.Since(finding)))
		after = append(after, ms(finding.Sub(start)))
		stop2()
	}
	rp.MS, rp.FindingAfterMS = summarize(took), summarize(after)
	return rp
}

// streamFirst sends a streamed chat request and reads until the first
// non-empty content delta; stop abandons the rest of the stream.
func streamFirst(ctx context.Context, hc *http.Client, url string, msgs []map[string]string) (string, func(), error) {
	b, _ := json.Marshal(map[string]any{"messages": msgs, "stream": true, "max_tokens": 64, "temperature": 0})
	rctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimRight(url, "/")+"/v1/chat/completions", strings.NewReader(string(b)))
	if err != nil {
		cancel()
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("failure path: %w", err)
	}
	stop := func() { cancel(); resp.Body.Close() }
	if resp.StatusCode != http.StatusOK {
		stop()
		return "", nil, fmt.Errorf("failure path: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			return chunk.Choices[0].Delta.Content, stop, nil
		}
	}
	stop()
	if err := sc.Err(); err != nil {
		return "", nil, fmt.Errorf("failure path: %w", err)
	}
	return "", nil, errors.New("failure path: the stream ended without content")
}

// guardRows measures the rows on the guard's answers and the failure
// path: the labelled set on a CPU server of the model, and the repair
// latency on the main model's server.
func (r *runner) guardRows(ctx context.Context, rep *Report, main *endpoint) {
	o := r.o
	if o.EvalFile != "" {
		ge := &GuardEval{File: o.EvalFile, FPR: -1, FNR: -1}
		rep.GuardEval = ge
		p, err := llm.ParseProtocol(o.Protocol)
		if err == nil && p == llm.ProtocolAuto {
			p, err = llm.DetectFile(o.Model)
		}
		var cases []EvalCase
		if err == nil {
			cases, err = ReadEvalFile(o.EvalFile)
		}
		var ep *endpoint
		if err == nil {
			ep, err = r.open(ctx, devices.Device{Name: "none"}, o.URLs["CPU"])
		}
		if err != nil {
			ge.Error = err.Error()
		} else {
			*ge = evalGuard(ctx, ep.url, p, cases)
			ge.File = o.EvalFile
			ep.close()
		}
		r.step("guard on the labelled set")
	}
	if o.Repairs > 0 {
		if main == nil {
			m, err := r.open(ctx, devices.Device{Name: "none"}, o.MainURL)
			if err != nil {
				rep.Repair = &Repair{Error: err.Error()}
				return
			}
			defer m.close()
			main = m
		}
		rp := measureRepair(ctx, main.url, o.Repairs)
		rep.Repair = &rp
		r.step("failure path")
	}
}

// writeGuardRows prints the guard rows of the table.
func (rep *Report) writeGuardRows(w io.Writer) {
	if rep.Protocol != "" {
		fmt.Fprintf(w, "time to verdict asked in the %s protocol\n", rep.Protocol)
	}
	if ge := rep.GuardEval; ge != nil {
		fmt.Fprintf(w, "\nguard on %s (%s protocol, %s): ", ge.File, ge.Protocol, ge.Server)
		if ge.N == 0 {
			fmt.Fprintf(w, "no verdicts: %s\n", ge.Error)
		} else {
			fmt.Fprintf(w, "%d texts, false positives %d (rate %s), false negatives %d (rate %s), %d errors, verdict %.1f ms median\n",
				ge.N, ge.FP, rate(ge.FPR), ge.FN, rate(ge.FNR), ge.Errors, ge.VerdictMS.Median)
		}
	}
	if rp := rep.Repair; rp != nil {
		if rp.MS.N == 0 {
			fmt.Fprintf(w, "failure path: not measured: %s\n", rp.Error)
			return
		}
		fmt.Fprintf(w, "failure path (finding -> first byte of the repaired answer, %s): %.1f ms median (min %.1f, max %.1f, n %d); the finding came %.1f ms after the request\n",
			rp.Server, rp.MS.Median, rp.MS.Min, rp.MS.Max, rp.MS.N, rp.FindingAfterMS.Median)
	}
}

func rate(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}
