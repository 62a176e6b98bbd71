package gateway

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// lines posts body to url and sends each line of the answer on the
// returned channel, which closes at the end of the answer.
func lines(t *testing.T, url, body string) <-chan string {
	t.Helper()
	out := make(chan string, 256)
	go func() {
		defer close(out)
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				out <- sc.Text()
			}
		}
	}()
	return out
}

// TestKeepAliveWhileGuardJudges: a guard that takes 40 s over a held
// stream; the client gets a comment line after each 15 s of silence (at
// 15 s and 30 s), then the text and the end, which its SSE parser reads
// as if no comment had come. The fake clock moves only once the loop
// waits with the upstream's answer taken in and its keep-alive armed
// where the test expects it: a keep-alive armed elsewhere is a hang,
// reported.
func TestKeepAliveWhileGuardJudges(t *testing.T) {
	up := &pacedUpstream{chunks: storyChunks(3), cancelled: make(chan bool, 1)}
	gd := newGuarded(t, up, "release: watermark\n", time.Minute, false, 0)
	got := lines(t, gd.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"tell"}],"stream":true}`)
	g := receive(t, gd.guards, "guard")
	receive(t, up.cancelled, "upstream end")
	call := receive(t, g.Calls, "the guard's call") // held: the guard judges
	start := gd.clk.Now()
	var before []string
	for _, silence := range []time.Duration{15 * time.Second, 30 * time.Second} {
		due := start.Add(silence)
		gd.loop.until(t, fmt.Sprintf("the answer taken in and the keep-alive due at %s", silence), func(s loopState) bool {
			return s.ended && s.keepAlive.Equal(due)
		})
		gd.clk.Set(due)
		for line := receive(t, got, "a comment"); !strings.HasPrefix(line, ":"); line = receive(t, got, "a comment") {
			before = append(before, line)
		}
	}
	for _, l := range before {
		if strings.Contains(l, `"content":"aaaaaaa`) {
			t.Fatalf("text released before the verdict: %q", l)
		}
	}
	gd.clk.Set(start.Add(40 * time.Second))
	call.Pass()
	var rest []string
	for l := range got {
		rest = append(rest, l)
	}
	all := strings.Join(append(before, rest...), "\n")
	if !strings.Contains(all, "aaaaaaa") || !strings.Contains(all, "ccccccc") || rest[len(rest)-1] != "data: [DONE]" {
		t.Fatalf("after the verdict the stream did not carry the text and end:\n%s", all)
	}
	for _, l := range rest {
		if strings.HasPrefix(l, ":") {
			t.Errorf("a comment after the verdict at 40 s (next was due at 45 s): %q", l)
		}
	}
}

// TestKeepAliveNotOnBody: an answer that is not streamed (one JSON body)
// never gets a comment, however long the guard takes.
func TestKeepAliveNotOnBody(t *testing.T) {
	up := &pacedUpstream{chunks: storyChunks(3), cancelled: make(chan bool, 1)}
	gd := newGuarded(t, up, "release: watermark\n", time.Minute, false, 0)
	got := lines(t, gd.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"tell"}],"stream":false}`)
	g := receive(t, gd.guards, "guard")
	receive(t, up.cancelled, "upstream end")
	call := receive(t, g.Calls, "the guard's call")
	gd.clk.Advance(50 * time.Second)
	call.Pass()
	var body []string
	for l := range got {
		body = append(body, l)
	}
	if len(body) == 0 || !strings.HasPrefix(body[0], "{") {
		t.Fatalf("the JSON body does not start the answer: %q", body)
	}
}

// TestKeepAliveDialects: the Server-Sent Events dialects (chat,
// completions, Messages, Responses) carry comments;
// Ollama's NDJSON, whose every line its clients parse as JSON, does not.
func TestKeepAliveDialects(t *testing.T) {
	for _, d := range dialects {
		_, sse := d.(commenter)
		if want := d == dialectChat || d == dialectCompletions || d == dialectMessages || d == dialectResponses; sse != want {
			t.Errorf("%s: comments %v, want %v", d, sse, want)
		}
	}
}
