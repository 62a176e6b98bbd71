package toolcalls

import "testing"

func TestScrub(t *testing.T) {
	cases := []struct{ name, msg, args, want string }{
		{"a quoted value", `value "urgent" is not one of enum ["low","high"]`, `{"priority":"urgent"}`, `value "…" is not one of enum ["low","high"]`},
		{"a long stretch", "credential in output: AKIA2E3ZQF7B2LMC4XRW here", `{"body":"key AKIA2E3ZQF7B2LMC4XRW"}`, "credential in output:… here"},
		{"eight shared bytes go even when they are words", "`body` carries 31 bytes of the system prompt", `{"body":"about the system prompt"}`, "`body` carries 31 bytes of…"},
		{"keys stay", `at "/level": value "…" is not one of enum`, `{"level": "urgent-zorblax"}`, `at "/level": value "…" is not one of enum`},
		{"nothing shared", "call to `send_email` sends to a destination nobody named", `{"to":"x@evil.example"}`, "call to `send_email` sends to a destination nobody named"},
		{"arguments that are not JSON", "not JSON near zorblaxquux", `{"a": zorblaxquux`, "not JSON near…"},
		{"empty", "", `{"a":"b"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Scrub(c.msg, c.args); got != c.want {
				t.Errorf("Scrub = %q, want %q", got, c.want)
			}
		})
	}
}
