package validator

import (
	"fmt"
	"strings"
	"testing"
)

func TestIsHarnessContext(t *testing.T) {
	tests := []struct {
		name, part string
		want       bool
	}{
		{"system reminder", "<system-reminder>\nEnd commit messages with X.\n</system-reminder>\n", true},
		{"environment context", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>", true},
		{"opening tag with more words", "<permissions instructions>\nread-only\n</permissions instructions>", true},
		{"attributes", `<pasted_content id="7">text</pasted_content>`, true},
		{"white space around", "  \n<a>x</a>\n\n", true},
		{"plain text", "Once upon a time", false},
		{"text before", "Hi <system-reminder>x</system-reminder>", false},
		{"text after", "<system-reminder>x</system-reminder> and more", false},
		{"two elements", "<a>x</a>\n<b>y</b>", false},
		{"other closing tag", "<a>x</b>", false},
		{"no closing tag", "<system-reminder> x", false},
		{"not a tag name", "<1a>x</1a>", false},
		{"html comment", "<!-- x -->", false},
		{"tag across lines", "<a\nb>x</a>", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsHarnessContext(tc.part); got != tc.want {
				t.Errorf("IsHarnessContext(%q) = %v, want %v", tc.part, got, tc.want)
			}
		})
	}
}

// turnStep is one message of a test turn; a user message's parts are
// "|"-separated.
type turnStep struct {
	role  string
	parts string
}

func render(ms []Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s:%q ", m.Role, m.Content)
	}
	return strings.TrimSpace(b.String())
}

func TestTurnBuilder(t *testing.T) {
	const ctx = "<system-reminder>r</system-reminder>"
	tests := []struct {
		name  string
		steps []turnStep
		want  string
	}{
		{"context beside words", []turnStep{{"user", ctx + "|hello"}},
			`system:"<system-reminder>r</system-reminder>" user:"hello"`},
		{"context alone is words", []turnStep{{"user", ctx}},
			`user:"<system-reminder>r</system-reminder>"`},
		{"context message beside a words message", []turnStep{{"system", "s"}, {"user", ctx}, {"user", "hello"}},
			`system:"s" system:"<system-reminder>r</system-reminder>" user:"hello"`},
		{"an assistant message ends the turn", []turnStep{{"user", ctx}, {"assistant", "ok"}, {"user", "hello"}},
			`user:"<system-reminder>r</system-reminder>" assistant:"ok" user:"hello"`},
		{"tool results are the turn's own", []turnStep{{"tool", "out"}, {"user", ctx}},
			`tool:"out" system:"<system-reminder>r</system-reminder>"`},
		{"tags inside words", []turnStep{{"user", "hi " + ctx}},
			`user:"hi <system-reminder>r</system-reminder>"`},
		{"every context part in one system message", []turnStep{{"user", ctx + "|a|" + ctx}},
			"system:\"<system-reminder>r</system-reminder>\\n<system-reminder>r</system-reminder>\" user:\"a\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b TurnBuilder
			for _, s := range tc.steps {
				if s.role == "user" {
					b.User(Message{Role: "user"}, strings.Split(s.parts, "|"))
				} else {
					b.Add(Message{Role: s.role, Content: s.parts})
				}
			}
			if got := render(b.Messages()); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// FuzzIsHarnessContext: any part is classified without a panic, and a
// part that is context stays context with white space around it.
func FuzzIsHarnessContext(f *testing.F) {
	for _, s := range []string{"<system-reminder>x</system-reminder>", "<permissions instructions>y</permissions instructions>", "<a>x</b>", "<", "<>", "</>", "Once upon a time", "<a b>c</a b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if IsHarnessContext(s) && !IsHarnessContext("\n "+s+" \n") {
			t.Fatalf("%q is context but not with white space around", s)
		}
		var b TurnBuilder
		b.User(Message{Role: "user"}, []string{s, "words"})
		if ms := b.Messages(); len(ms) == 0 || ms[len(ms)-1].Role != "user" {
			t.Fatalf("the user's words were lost: %+v", ms)
		}
	})
}
