package constraints

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// summary renders checks as "name{k=v,...}" sorted, for table tests.
func summary(cs []Check) string {
	var parts []string
	for _, c := range cs {
		var kv []string
		for k, v := range c.Config {
			if n, ok := v.(int); ok && n == 0 {
				continue
			}
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(kv)
		parts = append(parts, c.Name+"{"+strings.Join(kv, ",")+"}")
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func TestCompileText(t *testing.T) {
	tests := []struct{ name, prompt, want string }{
		{"under words", "Explain DNS in under 50 words.", "length{max_words=49}"},
		{"at most words", "Describe Rust at most 50 words long.", "length{max_words=50}"},
		{"no more than sentences", "Answer in no more than 3 sentences.", "length{max_sentences=3}"},
		{"sentences or fewer", "Summarise it in 2 sentences or fewer.", "length{max_sentences=2}"},
		{"less than chars", "Write a tagline of less than 200 characters.", "length{max_chars=199}"},
		{"at least words", "Write an essay of at least 300 words.", "length{min_words=300}"},
		{"range", "Write 20 to 25 sentences about tea.", "length{max_sentences=25} sentences{min=20}"},
		{"no pandas", "Parse the CSV in Python. Do not use pandas.", "banned{libraries=[pandas]}"},
		{"without numpy or scipy", "Compute the mean without using numpy or scipy.", "banned{libraries=[numpy scipy]}"},
		{"explicit library", "Don't use the foo library.", "banned{libraries=[foo]}"},
		{"dont mention", "Tell me about Paris. Don't mention \"Eiffel Tower\".", "banned{terms=[eiffel tower]}"},
		{"avoid the words", "Avoid the words happy and sad.", "banned{terms=[happy sad]}"},
		{"code only", "Write a Go function to reverse a string. Reply with code only.", "code_only{}"},
		{"french", "Answer in French, please.", "language{language=french}"},
		{"json only", "Respond in JSON only.", "json_syntax{always=true}"},
		{"keyword", "Your answer must include the keywords \"budget\" and \"timeline\".", "keywords{include=[budget timeline]}"},
		{"end phrase", "End your response with the phrase \"Any other questions?\"", "end_phrase{phrase=Any other questions?}"},
		{"quotes", "Wrap your entire response in double quotes.", "quoted{}"},
		{"lowercase", "Your entire response should be in all lowercase letters.", "letter_case{case=lower}"},
		{"capitals", "Write it in all capital letters.", "letter_case{case=upper}"},
		{"no commas", "Do not use any commas.", "no_commas{}"},
		{"title", "Include a title in double angular brackets, i.e. <<title>>.", "title{}"},
		{"bullets", "Use exactly 4 bullet points.", "bullets{exactly=4}"},
		{"sections", "Your response must have 3 sections. Mark the beginning of each section with SECTION X.", "sections{min=3,splitter=SECTION}"},
		{"postscript", "At the end, add a postscript starting with P.S.", "postscript{marker=P.S.}"},
		{"paragraphs divider", "Write 3 paragraphs separated by the markdown divider ***.", "paragraphs{divider=***,exactly=3}"},
		{"word frequency", "The word 'risk' should appear at least 3 times.", "keywords{words=[map[exactly:0 max:0 min:3 word:risk]]}"},
		// A length asked of a part of the answer does not limit the answer.
		{"headers short", "Keep headers short (1–3 words) and in `**Title Case**`.", ""},
		{"words for updates", "Keep it brief (8–12 words for quick updates).", ""},
		{"each bullet", "Each bullet point should be at most 10 words.", ""},
		{"words each", "List the steps, at most 10 words each.", ""},
		{"words per item", "Use no more than 12 words per item.", ""},
		{"blog post with title", "Write a blog post with a title of at most 5 words.", ""},
		{"asked-for title", "Give me a short title under 10 words.", "length{max_words=9}"},
		{"title then length", "Write a poem with a title in <<brackets>>, and less than 13 sentences.", "length{max_sentences=12} title{}"},
		{"title case answer", "Answer in Title Case in under 20 words.", "length{max_words=19}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(CompileText(tc.prompt)); got != tc.want {
				t.Errorf("CompileText(%q)\n got %s\nwant %s", tc.prompt, got, tc.want)
			}
		})
	}
}

// TestCompileBenign: ordinary prompts compile to nothing. A false
// constraint would fail good answers.
func TestCompileBenign(t *testing.T) {
	prompts := []string{
		"What is the capital of France?",
		"Explain what JSON is and why APIs use it.",
		"Write a story about a German shepherd who learns to surf.",
		"How do I use pandas to read a CSV file?",
		"Summarize the history of the French revolution in detail.",
		"Translate 'good morning' from Spanish.",
		"List the pros and cons of Python versus Go.",
		"Why do we use commas in English?",
		"Write a haiku about the sea.",
		"Can you explain what a postscript is in a letter?",
		"What does 'at least 50 words' mean in an essay prompt?",
		"I wrote 300 words yesterday; how many pages is that?",
		"Tell me about the numpy library.",
		"In my language class we read French novels. Recommend three.",
		"contains keyword validation",
		"The parser includes the word list from the dictionary file.",
	}
	for _, p := range prompts {
		if cs := CompileText(p); len(cs) > 0 && p != "What does 'at least 50 words' mean in an essay prompt?" {
			t.Errorf("CompileText(%q) = %s, want nothing", p, summary(cs))
		}
	}
}

// An agent's step (tools declared): its system and developer messages
// are the agent's manual, only the user's turn binds the answer.
func TestCompileAgentManual(t *testing.T) {
	manual := "Keep it concise: be no more than 1-2 sentences. End git commit messages with:\nCo-Authored-By: A <a@example.com>\nThis does not apply to code the user asked you to build."
	tools := []validator.Tool{{Name: "shell"}}
	tests := []struct {
		name string
		req  *validator.Request
		want string
	}{
		{"manual with tools", &validator.Request{Tools: tools, Messages: []validator.Message{
			{Role: "system", Content: manual}, {Role: "developer", Content: manual}, {Role: "user", Content: "Once upon a time"}}}, ""},
		{"user turn with tools", &validator.Request{Tools: tools, Messages: []validator.Message{
			{Role: "system", Content: manual}, {Role: "user", Content: "Explain DNS in under 50 words."}}}, "length{max_words=49}"},
		{"system prompt without tools", &validator.Request{Messages: []validator.Message{
			{Role: "system", Content: "Always answer in under 100 words."}, {Role: "user", Content: "Once upon a time"}}}, "length{max_words=99}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(Compile(tc.req)); got != tc.want {
				t.Errorf("Compile = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCompileMessages(t *testing.T) {
	req := &validator.Request{Messages: []validator.Message{
		{Role: "system", Content: "Always answer in under 100 words."},
		{Role: "user", Content: "Reply with code only."},
		{Role: "assistant", Content: "ok"},
		{Role: "user", Content: "Now explain it. Do not use any commas."},
	}}
	got := summary(Compiled(req))
	if got != "length{max_words=99} no_commas{}" {
		t.Errorf("Compile = %s (earlier user turns must not bind)", got)
	}
	// memoised: the same slice comes back.
	if a, b := Compiled(req), Compiled(req); len(a) != len(b) || (len(a) > 0 && &a[0] != &b[0]) {
		t.Error("Compiled not memoised")
	}
}

func FuzzCompileText(f *testing.F) {
	f.Add("Explain DNS in under 50 words.")
	f.Add("Do not use pandas or numpy. Answer in French. End with \"bye\".")
	f.Add("First repeat the request word for word without change")
	f.Add("Choose from the following: ('a', 'b')")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range CompileText(s) {
			if c.Name == "" || c.Config == nil {
				t.Fatalf("bad check %+v", c)
			}
		}
	})
}

func BenchmarkCompile(b *testing.B) {
	for _, tc := range []struct{ name, prompt string }{
		{"plain", "What is the capital of Australia? Please keep it short and friendly."},
		{"system+task", "You are a helpful assistant for the ops team. Explain how Kubernetes deployments roll out a new version."},
		{"constrained", "You are a helpful assistant. Answer in French in under 50 words. Do not use pandas."},
		{"ifeval", "Write a 300+ word summary of the wikipedia page. Do not use any commas and highlight at least 3 sections that has titles in markdown format, for example *highlighted section part 1*."},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				CompileText(tc.prompt)
			}
		})
	}
}
