package approval

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestArgsHash(t *testing.T) {
	call := func(args string) []validator.ToolCall {
		return []validator.ToolCall{{Index: 0, Name: "send_email", Arguments: args}}
	}
	base := ArgsHash(call(`{"to":"a@example.com","n":1.50,"cc":["b"]}`))
	for _, tc := range []struct {
		name  string
		calls []validator.ToolCall
		same  bool
	}{
		{"spacing and key order", call(` { "cc" : ["b"], "n":1.50 , "to":"a@example.com"}`), true},
		{"other value", call(`{"to":"x@evil.example","n":1.50,"cc":["b"]}`), false},
		{"number as written", call(`{"to":"a@example.com","n":1.5,"cc":["b"]}`), false},
		{"other tool", []validator.ToolCall{{Name: "post", Arguments: `{"to":"a@example.com","n":1.50,"cc":["b"]}`}}, false},
		{"extra call", append(call(`{"to":"a@example.com","n":1.50,"cc":["b"]}`), validator.ToolCall{Index: 1, Name: "x"}), false},
		{"not JSON", call(`{"to":`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ArgsHash(tc.calls) == base; got != tc.same {
				t.Errorf("same hash = %v, want %v", got, tc.same)
			}
		})
	}
	two := []validator.ToolCall{{Index: 1, Name: "b"}, {Index: 0, Name: "a"}}
	if ArgsHash(two) != ArgsHash([]validator.ToolCall{two[1], two[0]}) {
		t.Error("the hash depends on the order calls were listed in, not their index")
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct{ name, args, want string }{
		{"flat", `{"to":"x","body":"y"}`, "body,to"},
		{"nested", `{"msg":{"to":["a","b"],"meta":{}},"n":1}`, "msg/meta,msg/to/0,msg/to/1,n"},
		{"escaped keys", `{"a/b":1,"c~d":2}`, "a~1b,c~0d"},
		{"not JSON", `{"to":`, ""},
		{"scalar", `"just text"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(Paths(tc.args), ","); got != tc.want {
				t.Errorf("paths = %q, want %q", got, tc.want)
			}
		})
	}
	var many strings.Builder
	many.WriteString("{")
	for i := range 200 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	many.WriteString("}")
	if n := len(Paths(many.String())); n != MaxPaths {
		t.Errorf("%d paths, want the cap %d", n, MaxPaths)
	}
}

// TestQueueDecideOnce: of a decision and an expiry racing, exactly one
// takes the call, and the ticket gets exactly one outcome.
func TestQueueDecideOnce(t *testing.T) {
	for range 50 {
		q := &Queue{}
		tk := q.Hold(events.ApprovalRecord{ArgsHash: "h", PolicyVersion: "v"})
		var wg sync.WaitGroup
		var decided, expired bool
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := q.Decide(tk.Record.ID, Decision{Approve: true, ArgsHash: "h", PolicyVersion: "v"})
			decided = err == nil
		}()
		go func() { defer wg.Done(); expired = q.Expire(tk) }()
		wg.Wait()
		if decided == expired {
			t.Fatalf("decided %v, expired %v: want exactly one", decided, expired)
		}
		o := <-tk.Done()
		if want := map[bool]Stage{true: Approved, false: Expired}[decided]; o.Stage != want {
			t.Fatalf("outcome %s, want %s", o.Stage, want)
		}
		if len(q.Pending()) != 0 {
			t.Fatal("the call stayed pending")
		}
	}
}

func TestQueuePendingOrderAndChange(t *testing.T) {
	var changes int
	q := &Queue{OnChange: func() { changes++ }}
	a := q.Hold(events.ApprovalRecord{ID: "b"})
	q.Hold(events.ApprovalRecord{ID: "a"})
	if ids := []string{q.Pending()[0].ID, q.Pending()[1].ID}; !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("pending ids %v", ids)
	}
	if _, err := q.Decide("nope", Decision{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	q.Cancel(a)
	if o := <-a.Done(); o.Stage != Cancelled || changes != 3 {
		t.Errorf("cancel: %s, %d changes", o.Stage, changes)
	}
}

// TestHandlerBadDecisions: a decision body that is not the documented
// object is a 400 naming what is wrong; the call stays held.
func TestHandlerBadDecisions(t *testing.T) {
	q := &Queue{}
	tk := q.Hold(events.ApprovalRecord{ArgsHash: "h", PolicyVersion: "v"})
	h := Handler(q.Desk())
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", `{"args_hash":`, "decision body"},
		{"unknown field", `{"args_hash":"h","policy_version":"v","approve":true}`, `unknown field \"approve\"`},
		{"unbound", `{}`, "must name the held call's args_hash"},
		{"too large", `{"by":"` + strings.Repeat("x", 5000) + `"}`, "decision body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", Path+"/"+tk.Record.ID+"/approve", strings.NewReader(tc.body)))
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("%d %s, want 400 with %q", w.Code, w.Body, tc.want)
			}
		})
	}
	if _, ok := q.Get(tk.Record.ID); !ok {
		t.Fatal("a bad decision took the call")
	}
}
