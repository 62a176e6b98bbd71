package pipeline_test

import (
	"fmt"
	"time"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// One attempt at a JSON answer: the output is fed as it streams, each
// step says how much of it may go to the client (nothing: a JSON answer
// is released whole), and the verdict says what the policy makes of the
// trailing comma (a local repair, fix_syntax).
func Example() {
	reg := &validator.Registry{}
	checks.Register(reg)
	req := &validator.Request{
		Messages:       []validator.Message{{Role: "user", Content: "Give the answer as JSON."}},
		ResponseFormat: &validator.ResponseFormat{Type: "json_object"},
	}
	a, err := pipeline.New(policy.DefaultFor(reg), req, pipeline.Options{})
	if err != nil {
		panic(err)
	}
	defer a.Stop()
	now := time.Unix(0, 0)
	for _, chunk := range []string{`{"answer": `, `42,`, `}`} {
		st := a.Feed([]byte(chunk), now)
		fmt.Printf("fed %q: release up to %d, %s\n", chunk, st.Release, st.State)
	}
	st := a.CloseAt(now)
	v := a.Verdict(1)
	fmt.Printf("closed: %s, failed %v; verdict %s %s, action %s\n", st.State, st.Failed, v.Verdict, v.Reason, v.Action)
	// Output:
	// fed "{\"answer\": ": release up to 0, feeding
	// fed "42,": release up to 0, feeding
	// fed "}": release up to 0, done
	// closed: done, failed true; verdict fail invalid_json, action fix_syntax
}
