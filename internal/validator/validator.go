package validator

import (
	"time"
)

// Validator is one incremental check over the output text of one attempt.
//
// The pipeline calls Write with each piece of text as it streams, in order,
// and Close once at the end. A Validator must give the same findings for
// the same text however it is split: whole, byte by byte, or in random
// pieces (split independence). Offsets are bytes from the start of the
// output. A Validator is used by one goroutine at a time and is not reused
// across attempts.
type Validator interface {
	// Name returns the registry name of the check, such as "json_syntax".
	Name() string

	// Write feeds the next piece of output. It never fails: a failure of
	// the output is a Finding, not an error. It returns len(p), nil.
	Write(p []byte) (int, error)

	// Settled returns the byte offset up to which this validator has
	// cleared the output for good: no finding it reports later will start
	// before it. Text that may still be judged (a repetition that has
	// begun, a possible secret, an unfinished regex match, a JSON document
	// that must be whole before it can be released) stays after it. The
	// release point of an attempt is the minimum over its validators.
	Settled() int

	// Findings returns the failures seen so far, in order of Start.
	// A non-empty result means the output fails this check.
	Findings() []Finding

	// Close marks the end of the output and runs the end-of-output checks
	// (a required pattern never seen, an unfinished JSON document, a
	// schema's required property missing). After Close, Settled returns
	// the length of the whole output unless there is a finding.
	Close()
}

// Ticker is implemented by validators that judge time, not text (the stall
// watchdog). The pipeline calls Tick with the current time whenever a chunk
// arrives and on a timer while waiting, so deadlines fire without text.
type Ticker interface {
	// Tick tells the validator the time now. It may add findings.
	Tick(now time.Time)
	// NextDeadline returns when the validator next needs a Tick, or the
	// zero time when it needs none.
	NextDeadline() time.Time
}

// ProgressWatcher is implemented by Tickers that watch the upstream's
// liveness (the stall watchdog). The pipeline calls Progress when the
// upstream shows progress that is not text: at at, output says it was a
// piece of the answer (a tool call's), else a sign of work before any
// output (prompt processing reported by the server, token counts).
type ProgressWatcher interface {
	Progress(at time.Time, output bool)
}

// Carrier is implemented by checks that judge the upstream's timing (the
// stall watchdog). A retry that continues text an earlier attempt already
// released feeds that text to its fresh checks again, so that the text
// checks see the whole answer; Carry(n) says the next n bytes written are
// such carried text, not output the upstream just sent, so the wait for
// the new attempt's first token is still a wait for a first token.
type Carrier interface {
	Carry(n int)
}

// ToolCall is one function call the model made, with its arguments as the
// raw JSON text the model produced.
type ToolCall struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Read, when set, is what one reading of Arguments found
	// (toolcalls.Read): the checks that judge the call use it rather than
	// reading the arguments again. It is not part of the call's JSON.
	Read *ReadArgs `json:"-"`
}

// ArgValue is one string value inside a call's arguments, decoded from
// its JSON escapes, with the JSON pointer-like path to it ("body",
// "attachments/0/name"; "" for arguments that are a bare string).
type ArgValue struct {
	Path string
	Text string
}

// ReadArgs is what one reading of a call's arguments found: their string
// values in document order, and whether they are one JSON value.
type ReadArgs struct {
	Arguments string
	Values    []ArgValue
	Valid     bool
}

// ToolCallChecker is implemented by validators that judge tool calls. The
// pipeline calls CheckToolCall once per completed call.
type ToolCallChecker interface {
	CheckToolCall(call ToolCall) []Finding
}

// Background is implemented by validators whose judgements arrive after
// the Write or Close that asked for them (a guard model over a local API).
// Their Settled and Findings change between calls, from other goroutines,
// so they must be safe for that.
//
// The pipeline joins every judgement a Background validator started before
// it decides the attempt: after Close it waits until Done, woken by the
// function given to Notify. A Background validator is also a Ticker whose
// NextDeadline is when the judgement in flight is given up; at that Tick
// it must settle the judgement (a guard_unavailable finding, or the text
// released unjudged when it fails open), so the wait is bounded by its
// deadline.
type Background interface {
	// Notify sets the function called, from any goroutine and with no
	// lock held, after a background judgement changed the validator's
	// state. It is set once, before the first Write.
	Notify(f func())
	// Done reports whether, after Close, every judgement is in.
	Done() bool
	// Stop abandons the judgements in flight (the attempt is over) and
	// returns once their goroutines have ended.
	Stop()
}

// Starter is implemented by Background validators that have work to do
// before the first output arrives (a guard model prefilling the fixed part
// of its prompt while the main model prefills its own). The pipeline calls
// Start once, when the attempt's checks are built, that is as the request
// goes upstream.
type Starter interface {
	Start()
}
