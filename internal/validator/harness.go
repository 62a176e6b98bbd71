package validator

import "strings"

// Harness context.
//
// Coding agents send more than the user's words in a user turn: Claude
// Code adds <system-reminder> blocks (attribution rules, project
// instructions, reminders about its tools), Codex an <environment_context>
// message (working directory, shell, date). The agent program writes these
// the way an application writes its system prompt, and they read like
// instructions to the model (which is what they are), so the input screen
// would judge them prompt injection if it took them for the user's words.
//
// A text part is harness context when it is wholly one tag-wrapped
// element: it opens with a tag, closes with the matching closing tag, and
// holds nothing outside them. Only the program that builds the request
// decides where one part ends and the next begins; a person typing into
// it does not. So a part counts as context only in a user turn that also
// carries something else: text of the user's own (a part that is not one
// element) or tool results. A turn made of tag-wrapped parts alone (a
// chat front-end passing on what its user typed, a prompt that is one
// wrapped jailbreak) is the user's words and judged as such, and tags
// written inside a part of the user's own text are the user's words too.

// IsHarnessContext reports whether one text part of a user turn is wholly
// one tag-wrapped element ("<system-reminder>...</system-reminder>",
// "<permissions instructions>...</permissions instructions>"): a tag name
// of letters, digits, '_', '-', ':' or '.', possibly followed by more on
// the opening tag's line, and at the end the closing tag of that name (or
// of the whole opening tag), with only white space around.
func IsHarnessContext(part string) bool {
	s := strings.TrimSpace(part)
	if len(s) < 2 || s[0] != '<' {
		return false
	}
	end := strings.IndexByte(s, '>')
	if end < 0 {
		return false
	}
	open := s[1:end]
	if strings.ContainsAny(open, "\n<") {
		return false
	}
	name := open
	if i := strings.IndexAny(open, " \t"); i >= 0 {
		name = open[:i]
	}
	if !tagName(name) {
		return false
	}
	body := s[end+1:]
	return strings.HasSuffix(body, "</"+name+">") || (name != open && strings.HasSuffix(body, "</"+open+">"))
}

func tagName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':' || c == '.') {
			return false
		}
	}
	return true
}

// TurnBuilder assembles the checks' messages from a request's messages in
// order, and gives harness context in a user turn the system prompt's
// trust: it becomes a system message placed before the user message it
// came from, and the user message keeps the user's own words. A user turn
// is the run of user and tool messages between two other messages.
// Message indices in the result are the checks' own, not the wire's.
// The zero value is ready to use.
type TurnBuilder struct {
	out  []Message
	turn []turnMsg
}

type turnMsg struct {
	m     Message
	parts []string
}

// User adds a user message with its text parts in order (m.Content is
// ignored and set from parts).
func (b *TurnBuilder) User(m Message, parts []string) {
	b.turn = append(b.turn, turnMsg{m: m, parts: parts})
}

// Add adds any other message: a tool message stays in the open user turn,
// any other role closes it.
func (b *TurnBuilder) Add(m Message) {
	if m.Role == "tool" || m.Role == "function" {
		b.turn = append(b.turn, turnMsg{m: m})
		return
	}
	b.close()
	b.out = append(b.out, m)
}

// Messages closes the open turn and returns the messages.
func (b *TurnBuilder) Messages() []Message {
	b.close()
	return b.out
}

func (b *TurnBuilder) close() {
	if len(b.turn) == 0 {
		return
	}
	own := false // the turn carries the user's words or tool results
	for _, t := range b.turn {
		if t.m.Role != "user" {
			own = true
			break
		}
		for _, p := range t.parts {
			if strings.TrimSpace(p) != "" && !IsHarnessContext(p) {
				own = true
				break
			}
		}
	}
	for _, t := range b.turn {
		if t.m.Role != "user" {
			b.out = append(b.out, t.m)
			continue
		}
		var words, ctx strings.Builder
		for _, p := range t.parts {
			if own && IsHarnessContext(p) {
				if ctx.Len() > 0 {
					ctx.WriteByte('\n')
				}
				ctx.WriteString(p)
				continue
			}
			words.WriteString(p)
		}
		if ctx.Len() > 0 {
			b.out = append(b.out, Message{Role: "system", Content: ctx.String()})
		}
		t.m.Content = words.String()
		if t.m.Content != "" || len(t.m.ToolCalls) > 0 || ctx.Len() == 0 {
			b.out = append(b.out, t.m)
		}
	}
	b.turn = b.turn[:0]
}
