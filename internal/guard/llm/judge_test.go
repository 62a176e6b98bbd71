package llm

import (
	"context"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

type fakeJudge struct{ got []Judgement }

func (f *fakeJudge) Judge(_ context.Context, j Judgement) (*Result, error) {
	f.got = append(f.got, j)
	return &Result{Verdict: &validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease}}, nil
}

// TestRemoteJudge: a config naming nats sends its calls to the remote
// judge (with the url's client as its fallback); without a remote
// transport the url answers alone, and with neither the config is refused.
func TestRemoteJudge(t *testing.T) {
	remote := &fakeJudge{}
	var fallback Judge
	defer func(r func(Config, Judge) (Judge, error)) { Remote = r }(Remote)
	for _, tc := range []struct {
		name       string
		cfg        Config
		withRemote bool
		wantErr    bool
		wantRemote bool
		wantLocal  bool
	}{
		{"nats", Config{NATS: "nats://127.0.0.1:4222", Model: "m", Protocol: "llama-guard"}, true, false, true, false},
		{"nats and url", Config{NATS: "nats://127.0.0.1:4222", URL: "http://127.0.0.1:1", Model: "m"}, true, false, true, true},
		{"nats without transport, url", Config{NATS: "nats://127.0.0.1:4222", URL: "http://127.0.0.1:1"}, false, false, false, true},
		{"nats without transport", Config{NATS: "nats://127.0.0.1:4222"}, false, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote.got, fallback = nil, nil
			Remote = nil
			if tc.withRemote {
				Remote = func(c Config, local Judge) (Judge, error) { fallback = local; return remote, nil }
			}
			g, err := New(tc.cfg, &validator.Request{Messages: []validator.Message{{Role: "user", Content: "hi"}}}, nil)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, isRemote := g.judge.(*fakeJudge); isRemote != tc.wantRemote {
				t.Fatalf("judge %T, remote wanted: %v", g.judge, tc.wantRemote)
			}
			if tc.wantRemote && (fallback != nil) != tc.wantLocal {
				t.Errorf("fallback %v, want one: %v", fallback, tc.wantLocal)
			}
			if !tc.wantRemote {
				return
			}
			g.Write([]byte("Some text to judge."))
			g.Close()
			g.Wait()
			if len(remote.got) != 1 || remote.got[0].Text != "Some text to judge." || remote.got[0].User != "hi" ||
				remote.got[0].Protocol != protocolName(tc.cfg.Protocol) {
				t.Errorf("remote got %+v", remote.got)
			}
		})
	}
}

func protocolName(s string) string {
	p, _ := ParseProtocol(s)
	return p.String()
}

// TestJudgementNamesTheResponse: a guard call carries the request id and
// attempt of the response it judges, so a remote worker can log them.
func TestJudgementNamesTheResponse(t *testing.T) {
	remote := &fakeJudge{}
	defer func(r func(Config, Judge) (Judge, error)) { Remote = r }(Remote)
	Remote = func(Config, Judge) (Judge, error) { return remote, nil }
	g, err := New(Config{NATS: "nats://127.0.0.1:4222", Model: "m", Protocol: "llama-guard"},
		&validator.Request{ID: "req-7", Attempt: 3, Messages: []validator.Message{{Role: "user", Content: "hi"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("Some text to judge."))
	g.Close()
	g.Wait()
	if len(remote.got) != 1 || remote.got[0].RequestID != "req-7" || remote.got[0].Attempt != 3 {
		t.Errorf("remote got %+v", remote.got)
	}
}
