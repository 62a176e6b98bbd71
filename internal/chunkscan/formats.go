package chunkscan

// The member names each object of the formats is read for; the index of
// a name in its list is the case it is handled by.
var (
	openaiTopNames = []string{"id", "created", "model", "system_fingerprint", "choices", "error", "usage", "timings", "prompt_progress"}
	choiceNames    = []string{"delta", "text", "finish_reason"}
	deltaNames     = []string{"content", "tool_calls", "function_call", "reasoning_content", "reasoning"}
	toolCallNames  = []string{"index", "id", "type", "function"}
	functionNames  = []string{"name", "arguments"}
	ollamaTopNames = []string{"model", "created_at", "message", "response", "done", "done_reason", "error", "thinking", "eval_count", "prompt_eval_count"}
	messageNames   = []string{"content", "tool_calls", "thinking"}
)

// openaiTop reads a chat or completions chunk's top-level object.
func (s *scanner) openaiTop() error {
	if err := s.enter(1); err != nil {
		return err
	}
	out := s.out
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		switch lookup(name, esc, openaiTopNames) {
		case 0:
			err = s.setString(&out.ID, false)
		case 1:
			err = s.int64OrNull(&out.Created)
		case 2:
			err = s.setString(&out.Model, false)
		case 3:
			err = s.setString(&out.Fingerprint, false)
		case 4:
			err = s.choices()
		case 5:
			start := s.peekStart()
			if err = s.skip(2); err == nil {
				out.Error = Span{start, s.i}
				if string(out.Error.Of(s.p)) == "null" {
					out.Error = Span{}
				}
			}
		case 6, 7:
			err = s.present(&out.Usage)
		case 8:
			err = s.present(&out.Progress)
		default:
			err = s.skip(2)
		}
		if err != nil {
			return err
		}
	}
}

// peekStart returns where the next value begins.
func (s *scanner) peekStart() int {
	s.ws()
	return s.i
}

// resetChoice forgets choice 0: a null or empty choices array replaces
// the slice encoding/json decodes into.
func (s *scanner) resetChoice() {
	s.content, s.text, s.reasoning, s.reasoningAlt = Span{}, Span{}, Span{}, Span{}
	s.out.ToolCalls, s.out.ToolCallCount, s.out.FinishReason = Span{}, 0, Span{}
	s.out.FunctionCall = Span{}
}

// choices reads the choices array: the members of its first element are
// kept (merged into what an earlier choices member left, as encoding/json
// decodes into the same slice element), the others only type-checked.
func (s *scanner) choices() error {
	switch s.peek() {
	case 'n':
		s.resetChoice()
		return s.literal("null")
	case '[':
	default:
		return s.fail("want an array of choices")
	}
	if err := s.enter(2); err != nil {
		return err
	}
	n := 0
	for first := true; ; first = false {
		more, err := s.element(first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if err := s.choice(n == 0); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		s.resetChoice()
	}
	return nil
}

// choice reads one element of choices; keep says it is choice 0.
func (s *scanner) choice(keep bool) error {
	if null, err := s.isNull(); null || err != nil {
		return err
	}
	if s.peek() != '{' {
		return s.fail("want a choice object")
	}
	if err := s.enter(3); err != nil {
		return err
	}
	var text, finish Span
	if keep {
		text, finish = s.text, s.out.FinishReason
	}
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch lookup(name, esc, choiceNames) {
		case 0:
			err = s.delta(keep)
		case 1:
			err = s.setString(&text, true)
		case 2:
			err = s.setString(&finish, true)
		default:
			err = s.skip(4)
		}
		if err != nil {
			return err
		}
	}
	if keep {
		s.text, s.out.FinishReason = text, finish
	}
	return nil
}

// delta reads a choice's delta; a null delta changes nothing. Only
// choice 0's members are kept.
func (s *scanner) delta(keep bool) error {
	if null, err := s.isNull(); null || err != nil {
		return err
	}
	if s.peek() != '{' {
		return s.fail("want a delta object")
	}
	if err := s.enter(4); err != nil {
		return err
	}
	var content, calls, fcall, reasoning, alt Span
	var count int
	if keep {
		content, calls, count, fcall, reasoning, alt = s.content, s.out.ToolCalls, s.out.ToolCallCount, s.out.FunctionCall, s.reasoning, s.reasoningAlt
	}
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch lookup(name, esc, deltaNames) {
		case 0:
			err = s.setString(&content, true)
		case 1:
			calls, count, err = s.toolCalls(5, true)
		case 2:
			start := s.peekStart()
			if err = s.skip(5); err == nil {
				fcall = Span{start, s.i}
			}
		case 3:
			err = s.setString(&reasoning, true)
		case 4:
			err = s.setString(&alt, true)
		default:
			err = s.skip(5)
		}
		if err != nil {
			return err
		}
	}
	if keep {
		s.content, s.out.ToolCalls, s.out.ToolCallCount, s.out.FunctionCall, s.reasoning, s.reasoningAlt = content, calls, count, fcall, reasoning, alt
	}
	return nil
}

// toolCalls reads a tool_calls array at depth: null clears it; typed
// checks each element's members as OpenAI tool-call deltas (Ollama's
// elements are kept as raw JSON of any type).
func (s *scanner) toolCalls(depth int, typed bool) (Span, int, error) {
	if null, err := s.isNull(); null || err != nil {
		return Span{}, 0, err
	}
	start := s.peekStart()
	if s.peek() != '[' {
		return Span{}, 0, s.fail("want an array of tool calls")
	}
	if err := s.enter(depth); err != nil {
		return Span{}, 0, err
	}
	n := 0
	for first := true; ; first = false {
		more, err := s.element(first)
		if err != nil {
			return Span{}, 0, err
		}
		if !more {
			return Span{start, s.i}, n, nil
		}
		if typed {
			err = s.toolCall(depth + 1)
		} else {
			err = s.skip(depth + 1)
		}
		if err != nil {
			return Span{}, 0, err
		}
		n++
	}
}

// toolCall type-checks one OpenAI tool-call delta.
func (s *scanner) toolCall(depth int) error {
	if null, err := s.isNull(); null || err != nil {
		return err
	}
	if s.peek() != '{' {
		return s.fail("want a tool call object")
	}
	if err := s.enter(depth); err != nil {
		return err
	}
	var ignore Span
	var idx int64
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		switch lookup(name, esc, toolCallNames) {
		case 0:
			err = s.int64OrNull(&idx)
		case 1, 2:
			err = s.setString(&ignore, false)
		case 3:
			err = s.function(depth + 1)
		default:
			err = s.skip(depth + 1)
		}
		if err != nil {
			return err
		}
	}
}

// function type-checks a tool call's function object.
func (s *scanner) function(depth int) error {
	if null, err := s.isNull(); null || err != nil {
		return err
	}
	if s.peek() != '{' {
		return s.fail("want a function object")
	}
	if err := s.enter(depth); err != nil {
		return err
	}
	var ignore Span
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		if lookup(name, esc, functionNames) >= 0 {
			err = s.setString(&ignore, false)
		} else {
			err = s.skip(depth + 1)
		}
		if err != nil {
			return err
		}
	}
}

// ollamaTop reads an Ollama chunk's top-level object.
func (s *scanner) ollamaTop() error {
	if err := s.enter(1); err != nil {
		return err
	}
	out := s.out
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		switch lookup(name, esc, ollamaTopNames) {
		case 0:
			err = s.setString(&out.Model, false)
		case 1:
			err = s.setString(&out.CreatedAt, false)
		case 2:
			err = s.message()
		case 3:
			err = s.setString(&s.response, true)
		case 4:
			err = s.boolOrNull(&out.Done)
		case 5:
			err = s.setString(&out.FinishReason, false)
		case 6:
			err = s.setString(&out.Error, false)
		case 7:
			err = s.setString(&s.thinking, true)
		case 8, 9:
			err = s.present(&out.Usage)
		default:
			err = s.skip(2)
		}
		if err != nil {
			return err
		}
	}
}

// message reads Ollama's message: null drops it, an object is merged into
// the one an earlier message member left.
func (s *scanner) message() error {
	switch s.peek() {
	case 'n':
		s.msgPresent, s.msgContent, s.msgThinking = false, Span{}, Span{}
		s.out.ToolCalls, s.out.ToolCallCount = Span{}, 0
		return s.literal("null")
	case '{':
	default:
		return s.fail("want a message object")
	}
	if !s.msgPresent {
		s.msgPresent, s.msgContent, s.msgThinking = true, Span{}, Span{}
		s.out.ToolCalls, s.out.ToolCallCount = Span{}, 0
	}
	if err := s.enter(2); err != nil {
		return err
	}
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		switch lookup(name, esc, messageNames) {
		case 0:
			err = s.setString(&s.msgContent, false)
		case 1:
			s.out.ToolCalls, s.out.ToolCallCount, err = s.toolCalls(3, false)
		case 2:
			err = s.setString(&s.msgThinking, true)
		default:
			err = s.skip(3)
		}
		if err != nil {
			return err
		}
	}
}

// present skips a value and sets *dst when it is not null.
func (s *scanner) present(dst *bool) error {
	null, err := s.isNull()
	if null || err != nil {
		return err
	}
	*dst = true
	return s.skip(3)
}

func (s *scanner) boolOrNull(dst *bool) error {
	switch s.peek() {
	case 't':
		*dst = true
		return s.literal("true")
	case 'f':
		*dst = false
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.fail("want true or false")
}
