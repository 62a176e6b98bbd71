package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Case is one recorded exchange, the input of `aegis check`: the request,
// the assistant's text and its tool calls.
type Case struct {
	ID        json.RawMessage    `json:"id"`
	Request   openai.ChatRequest `json:"request"`
	Output    string             `json:"output"`
	ToolCalls []openai.ToolCall  `json:"tool_calls"`
}

// IDString returns the case id as text: a JSON string unquoted, any other
// JSON value as written.
func (c *Case) IDString() string { return idString(c.ID) }

func idString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// fixedClock makes offline checks independent of wall time: the stall
// watchdog never fires on recorded text. Nothing ever advances it.
var fixedClock = clock.NewFake(time.Unix(0, 0))

// CheckCase runs the policy's checks over a case as one attempt and
// returns its verdict (attempt is the 1-based attempt number for Decide).
// Every check sees the whole output, so the verdict lists every finding.
func CheckCase(p *policy.Policy, c *Case, attempt int) (validator.Verdict, error) {
	a, err := New(p, c.Request.ValidatorRequest(), Options{Clock: fixedClock, Complete: true})
	if err != nil {
		return validator.Verdict{}, err
	}
	a.Write([]byte(c.Output))
	for i, tc := range c.ToolCalls {
		a.ToolCall(tc.Validator(i))
	}
	Wait(a, a.CloseAt(fixedClock.Now()), fixedClock.Now())
	a.Stop()
	v := a.Verdict(attempt)
	v.ID = c.IDString()
	return v, nil
}

// Wait waits until the attempt is done: until every background check
// (the guard model) has answered or its deadline has passed. step is the
// attempt's last step, taken at now on the attempt's clock; the wait
// advances that clock with the wall clock, so a recorded case keeps its
// fixed time and the guard's deadline is still real.
func Wait(a *Attempt, step Step, now time.Time) Step {
	if step.State == Done {
		return step
	}
	start := time.Now()
	at := func() time.Time { return now.Add(time.Since(start)) }
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for step.State != Done {
		t.Stop()
		if !step.Wake.IsZero() {
			t.Reset(step.Wake.Sub(at()))
		}
		select {
		case <-a.Notify():
		case <-t.C:
		}
		step = a.Tick(at())
	}
	return step
}

// MaxLine is the longest case line CheckLines accepts.
const MaxLine = 16 << 20

// Stats counts the cases CheckLines judged.
type Stats struct {
	Cases, Failed, Malformed int
}

// ErrorVerdict is the verdict-shaped answer for a case that could not be
// judged (a malformed line): verdict fail, action halt, no reason, and the
// error naming where the line is.
func ErrorVerdict(id string, err error) validator.Verdict {
	return validator.Verdict{ID: id, Verdict: validator.Fail, Risk: validator.RiskLow, Action: validator.ActionHalt,
		Findings: []validator.Finding{}, Error: err.Error()}
}

type job struct {
	seq   int
	first int // line number of lines[0]
	lines [][]byte
	bad   map[int]error // index -> read error (line too long)
	out   []byte
	stats Stats
}

// CheckLines reads cases, one JSON object per line, from r (name is used
// in errors as name:line), judges them in parallel over workers goroutines
// (0 means GOMAXPROCS) and writes one verdict per non-blank line to w, in
// input order. A malformed or oversized line yields an ErrorVerdict and the
// rest still run. The error is for reading r or writing w.
func CheckLines(p *policy.Policy, r io.Reader, name string, w io.Writer, attempt, workers int) (Stats, error) {
	return CheckLinesScreened(p, nil, r, name, w, attempt, workers)
}

// InputScreen judges a request before its output, as the gateway's input
// check does (the guard's prompt-injection screen): a failing verdict
// with action block is the case's verdict, and its output is not judged.
type InputScreen func(ctx context.Context, req *validator.Request) *validator.Verdict

// CheckLinesScreened is CheckLines with the requests screened first by
// screen (nil: none), so that a case gets the verdict serve would give.
func CheckLinesScreened(p *policy.Policy, screen InputScreen, r io.Reader, name string, w io.Writer, attempt, workers int) (Stats, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const batch = 64
	jobs := make(chan *job, workers*2)
	done := make(chan *job, workers*2)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.run(p, screen, name, attempt)
				done <- j
			}
		}()
	}
	var (
		stats   Stats
		werr    error
		written = make(chan struct{})
	)
	go func() { // the writer restores input order
		defer close(written)
		pending := map[int]*job{}
		next := 0
		for j := range done {
			pending[j.seq] = j
			for {
				j, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				stats.Cases += j.stats.Cases
				stats.Failed += j.stats.Failed
				stats.Malformed += j.stats.Malformed
				if werr == nil {
					_, werr = w.Write(j.out)
				}
			}
		}
	}()
	rerr := readBatches(r, batch, jobs)
	close(jobs)
	wg.Wait()
	close(done)
	<-written
	if rerr != nil {
		return stats, fmt.Errorf("%s: %w", name, rerr)
	}
	if werr != nil {
		return stats, fmt.Errorf("writing verdicts: %w", werr)
	}
	return stats, nil
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLine)

func readBatches(r io.Reader, batch int, jobs chan<- *job) error {
	br := bufio.NewReaderSize(r, 256<<10)
	seq, lineNo := 0, 0
	j := &job{seq: seq, first: 1}
	flush := func() {
		if len(j.lines) > 0 {
			jobs <- j
			seq++
		}
		j = &job{seq: seq, first: lineNo + 1}
	}
	for {
		line, err := readLine(br)
		if err == io.EOF && line == nil {
			break
		}
		lineNo++
		if errors.Is(err, errLineTooLong) {
			if j.bad == nil {
				j.bad = map[int]error{}
			}
			j.bad[len(j.lines)] = err
			j.lines = append(j.lines, nil)
		} else if err != nil && err != io.EOF {
			flush()
			return err
		} else {
			j.lines = append(j.lines, line)
		}
		if len(j.lines) == batch {
			flush()
		}
		if err == io.EOF {
			break
		}
	}
	flush()
	return nil
}

// readLine returns the next line without its newline, in a fresh slice.
// A line past MaxLine is skipped to its end and reported as errLineTooLong.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > MaxLine+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			return []byte{}, errLineTooLong
		}
		buf = append(buf, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			if len(buf) == 0 {
				return nil, io.EOF
			}
			return buf, io.EOF
		}
		if err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte{'\n'}), []byte{'\r'}), nil
	}
}

func (j *job) run(p *policy.Policy, screen InputScreen, name string, attempt int) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, line := range j.lines {
		lineNo := j.first + i
		var v validator.Verdict
		if err, bad := j.bad[i]; bad {
			v = ErrorVerdict("", fmt.Errorf("%s:%d: %w", name, lineNo, err))
			j.stats.Malformed++
		} else {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var c Case
			if err := json.Unmarshal(line, &c); err != nil {
				v = ErrorVerdict(lenientID(line), fmt.Errorf("%s:%d: malformed case: %w", name, lineNo, err))
				j.stats.Malformed++
			} else if blocked := screenCase(screen, &c); blocked != nil {
				v = *blocked
			} else if verdict, err := CheckCase(p, &c, attempt); err != nil {
				v = ErrorVerdict(c.IDString(), fmt.Errorf("%s:%d: %w", name, lineNo, err))
				j.stats.Malformed++
			} else {
				v = verdict
			}
		}
		j.stats.Cases++
		if v.Verdict == validator.Fail {
			j.stats.Failed++
		}
		if err := enc.Encode(&v); err != nil {
			// A verdict always encodes; keep the line count right regardless.
			fmt.Fprintf(&buf, "{\"verdict\":\"fail\",\"error\":%q}\n", err.Error())
		}
	}
	j.out = buf.Bytes()
	j.lines = nil
}

// screenCase returns the verdict of a case whose request the screen
// blocks, else nil.
func screenCase(screen InputScreen, c *Case) *validator.Verdict {
	if screen == nil {
		return nil
	}
	v := screen(context.Background(), c.Request.ValidatorRequest())
	if v == nil || v.Verdict != validator.Fail || v.Action != validator.ActionBlock {
		return nil
	}
	out := *v
	out.ID = c.IDString()
	return &out
}

// lenientID recovers the id of a malformed case when its top level still
// parses far enough.
func lenientID(line []byte) string {
	var c struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &c) == nil {
		return idString(c.ID)
	}
	return ""
}
