package llm

import (
	"fmt"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Protocol is the prompt and answer format a guard model was trained on.
type Protocol int

// The protocols. ProtocolAuto is resolved to one of the others from the
// model's metadata before use.
const (
	ProtocolAuto            Protocol = iota
	ProtocolVerdictJSON              // Aegis' generic prompt and JSON verdict, for general instruct models
	ProtocolLlamaGuard               // Llama Guard 3/4: "safe" | "unsafe\nS1,S10"
	ProtocolQwen3Guard               // Qwen3Guard-Gen: "Safety: ...\nCategories: ...[\nRefusal: ...]"
	ProtocolGraniteGuardian          // Granite Guardian 3.x: "Yes" | "No" for a named risk
	ProtocolShieldGemma              // ShieldGemma: "Yes" | "No" against a written policy
)

var protocolNames = []string{"auto", "verdict-json", "llama-guard", "qwen3guard", "granite-guardian", "shieldgemma"}

func (p Protocol) String() string {
	if p >= 0 && int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// ParseProtocol parses a protocol name; "" is auto.
func ParseProtocol(s string) (Protocol, error) {
	if s == "" {
		return ProtocolAuto, nil
	}
	for i, n := range protocolNames {
		if strings.EqualFold(s, n) {
			return Protocol(i), nil
		}
	}
	return 0, fmt.Errorf("unknown guard protocol %q (want %s)", s, strings.Join(protocolNames, ", "))
}

// Mode says what the guard moderates: the user's prompt or the
// assistant's response to it.
type Mode int

// The modes.
const (
	ModeResponse Mode = iota // the text is the assistant's answer to User
	ModePrompt               // the text is the user's own message
)

func (m Mode) String() string {
	if m == ModePrompt {
		return "prompt"
	}
	return "response"
}

// Subject is what one native-protocol call judges.
type Subject struct {
	Mode Mode
	// User is the user's message the response answers (ModeResponse).
	User string
	// Text is the judged text: the prompt, or the response so far.
	Text string
	// Risk names the Granite Guardian risk (harm, jailbreak, social_bias,
	// violence, profanity, sexual_content, unethical_behavior); "" is harm.
	Risk string
	// Policies names the ShieldGemma policies (dangerous, harassment, hate,
	// sexual); none means all four.
	Policies []string
	// Loose counts Qwen3Guard's Controversial as safe (its card's loose
	// mode); by default it fails like Unsafe (strict mode).
	Loose bool
}

// Answer is a native guard answer in the model's own terms.
type Answer struct {
	Unsafe bool
	// Label is the model's own decision word (unsafe, Controversial, Yes).
	Label string
	// Categories are the model's category codes or names, as it wrote them.
	Categories []string
	// Refusal is Qwen3Guard's refusal judgement of a response: "Yes", "No"
	// or "".
	Refusal string
}

// native is one guard model family's protocol.
type native interface {
	// render builds the prompt: Prefix ends with the judged text, Suffix
	// ends where the model's answer starts (its generation prompt).
	render(s Subject) Prompt
	// open is the fixed start of every answer; the next token decides.
	open() string
	// words are the decision words that fail and that pass.
	words() (fail, pass []string)
	// rest is the GBNF grammar of the answer after open+word (word is a
	// fail word), with an upper bound of its length in bytes; "" when the
	// word is the whole answer.
	rest(s Subject, word string) (string, int)
	// grammar is the GBNF grammar of the whole answer (starting with
	// open) and an upper bound of its length in bytes.
	grammar(s Subject) (string, int)
	// parse decodes a whole answer (starting with open).
	parse(s Subject, text string) (Answer, error)
	// names maps category codes to their names for messages.
	names(code string) string
	// injection reports whether a category is a jailbreak-type one.
	injection(s Subject, category string) bool
}

func nativeOf(p Protocol) native {
	switch p {
	case ProtocolLlamaGuard:
		return llamaGuard{}
	case ProtocolQwen3Guard:
		return qwen3Guard{}
	case ProtocolGraniteGuardian:
		return granite{}
	case ProtocolShieldGemma:
		return shieldGemma{}
	}
	return nil
}

// RenderPrompt renders protocol p's prompt for s (p must be a native
// protocol), with the answer's fixed start appended to Suffix.
func RenderPrompt(p Protocol, s Subject) (Prompt, error) {
	n := nativeOf(p)
	if n == nil {
		return Prompt{}, fmt.Errorf("guard llm: %s has no native prompt", p)
	}
	pr := n.render(s)
	pr.Suffix += n.open()
	return pr, nil
}

// bosText is Llama 3's begin-of-text token as its chat templates write it.
const bosText = "<|begin_of_text|>"

// wirePrompt is the prompt of protocol p for s as it is sent to a server
// (with the answer's fixed start): llama-server and Ollama put the model's
// BOS token before every prompt themselves, so the template's own BOS is
// left out rather than doubled.
func wirePrompt(n native, s Subject) Prompt {
	pr := n.render(s)
	pr.Prefix = strings.TrimPrefix(pr.Prefix, bosText)
	return pr
}

// ParseAnswer decodes a whole answer of protocol p (a native protocol).
func ParseAnswer(p Protocol, s Subject, text string) (Answer, error) {
	n := nativeOf(p)
	if n == nil {
		return Answer{}, fmt.Errorf("guard llm: %s has no native answer", p)
	}
	if len(text) > maxVerdict {
		return Answer{}, fmt.Errorf("guard answer is %d bytes, limit %d", len(text), maxVerdict)
	}
	return n.parse(s, text)
}

// AnswerGrammar is the GBNF grammar of a whole answer of protocol p for s
// (starting with the answer's fixed start), and an upper bound of its
// length in bytes.
func AnswerGrammar(p Protocol, s Subject) (string, int) {
	n := nativeOf(p)
	if n == nil {
		return "", 0
	}
	return n.grammar(s)
}

// verdictFrom turns a native answer into a verdict for the pipeline: a
// jailbreak-type category argues prompt_injection, any other failure
// unsafe_content. A prompt judged unsafe is blocked, a response halted.
func verdictFrom(n native, s Subject, a Answer) *validator.Verdict {
	v := &validator.Verdict{Verdict: validator.Pass, Risk: validator.RiskLow, Action: validator.ActionRelease, Findings: []validator.Finding{}}
	if !a.Unsafe || (s.Loose && a.Label == "Controversial") {
		return v
	}
	v.Verdict, v.Risk, v.Reason = validator.Fail, validator.RiskMedium, validator.ReasonUnsafeContent
	for _, c := range a.Categories {
		if n.injection(s, c) {
			v.Reason = validator.ReasonPromptInjection
		}
	}
	v.Action = validator.ActionHalt
	if s.Mode == ModePrompt {
		v.Action = validator.ActionBlock
	}
	return v
}

// describe lists an answer's categories with their names.
func describe(n native, a Answer) string {
	var parts []string
	for _, c := range a.Categories {
		if name := n.names(c); name != "" && name != c {
			parts = append(parts, c+" "+name)
		} else {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, ", ")
}

// splitList splits a comma-separated category list, trimming spaces and
// dropping repeats.
func splitList(s string) ([]string, error) {
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			return nil, fmt.Errorf("empty category in %q", s)
		}
		if !isIn(c, out) {
			out = append(out, c)
		}
	}
	return out, nil
}

// known checks that every category is one of allowed.
func known(cats []string, allowed []string) error {
	for _, c := range cats {
		ok := false
		for _, a := range allowed {
			ok = ok || a == c
		}
		if !ok {
			return fmt.Errorf("unknown category %q", c)
		}
	}
	return nil
}

// catRules is GBNF for one to four of cats joined by sep: rule "cats"
// (and "cat"), with an upper bound of its length in bytes.
func catRules(cats []string, sep string) (string, int) {
	var alts []string
	longest := 0
	for _, c := range cats {
		alts = append(alts, gbnfLit(c))
		longest = max(longest, len(c))
	}
	const most = 4
	more := "(" + gbnfLit(sep) + " cat)?"
	g := "cats ::= cat " + more + " " + more + " " + more + "\n" +
		"cat ::= " + strings.Join(alts, " | ") + "\n"
	return g, most*longest + (most-1)*len(sep)
}
