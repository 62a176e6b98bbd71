package faulttest

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// answer is the full text the fakes generate; a retry continues it from
// the prefill the gateway sends, so a seamless repair must deliver it
// exactly once.
const answer = "Once upon a time there was a small robot who liked to count the stars over the quiet town."

// pieces splits s into chunks of n bytes.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// streamAnswer streams answer from the prefill on, in 7-byte chunks.
func streamAnswer(f *fake, w http.ResponseWriter, r *http.Request) {
	pre := prefill(r)
	if !strings.HasPrefix(answer, pre) {
		http.Error(w, "prefill is not a prefix of the answer: "+pre, http.StatusBadRequest)
		return
	}
	sseHeader(w)
	for _, p := range pieces(answer[len(pre):], 7) {
		f.chunk(w, p)
	}
	f.finish(w)
}

type upstreamFault struct {
	name   string
	serve  func(f *fake, w http.ResponseWriter, r *http.Request, n int)
	policy string
	// want: the client's status (streaming requests answer 200 and carry
	// errors in-band), the error code ("" for none), the content (want
	// "sent" for exactly what the fake streamed), the upstream POSTs.
	status  int
	code    string
	content string
	posts   int32
	// stalls marks a fault whose upstream goes silent: it runs under
	// fastStall, every other fault under patientStall.
	stalls bool
	// check, when set, looks further at the outcome.
	check func(t *testing.T, o outcome)
}

const sent = "\x00sent"

var upstreamFaults = []upstreamFault{
	{
		name: "clean stream",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			streamAnswer(f, w, r)
		},
		status: 200, content: answer, posts: 1,
	},
	{
		name: "no response headers",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			<-r.Context().Done() // accepts the request, never answers
		},
		status: 200, code: "aegis_stall", content: "", posts: 2, stalls: true,
	},
	{
		name: "stall mid-stream, then a retry continues",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				sseHeader(w)
				for _, p := range pieces(answer[:35], 7) {
					f.chunk(w, p)
				}
				<-r.Context().Done()
				return
			}
			streamAnswer(f, w, r)
		},
		status: 200, content: answer, posts: 2, stalls: true,
	},
	{
		name: "garbage mid-stream",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			sseHeader(w)
			f.chunk(w, "Once upon ")
			f.chunk(w, "a time")
			f.raw(w, "data: {\"choices\": [{\"delta\": nonsense\n\n")
		},
		status: 200, code: "aegis_upstream_error", content: sent, posts: 1,
	},
	{
		name: "closes mid-chunk",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			sseHeader(w)
			for _, p := range pieces(answer[:42], 6) {
				f.chunk(w, p)
			}
			f.raw(w, `data: {"choices":[{"delta":{"content":"half`)
		},
		status: 200, code: "aegis_upstream_error", content: sent, posts: 1,
	},
	{
		name: "error event mid-stream",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			sseHeader(w)
			f.chunk(w, "Once upon a time")
			f.raw(w, "event: error\ndata: {\"error\":{\"message\":\"slot crashed\"}}\n\n")
		},
		status: 200, code: "aegis_upstream_error", content: sent, posts: 1,
	},
	{
		name: "429 before streaming",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"too many requests"}}`))
		},
		status: 429, code: "upstream_rejected", content: "", posts: 1,
	},
	{
		name: "500 before streaming",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			http.Error(w, "internal failure", http.StatusInternalServerError)
		},
		status: 502, code: "aegis_upstream_error", content: "", posts: 1,
	},
	{
		name: "502 before streaming",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		},
		status: 502, code: "aegis_upstream_error", content: "", posts: 1,
	},
	{
		name: "closes before response headers",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
		},
		status: 502, code: "aegis_upstream_error", content: "", posts: 2,
	},
	{
		name: "trickles one byte at a time",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			sseHeader(w)
			var b strings.Builder
			for _, p := range pieces(answer, 9) {
				b.WriteString("data: " + chatChunk(p) + "\n\n")
			}
			b.WriteString("data: " + finishChunk + "\n\ndata: [DONE]\n\n")
			for _, c := range []byte(b.String()) {
				f.raw(w, string(c))
			}
			f.mu.Lock()
			f.sent.WriteString(answer)
			f.mu.Unlock()
		},
		status: 200, content: answer, posts: 1,
	},
	{
		name: "invalid UTF-8 and lone surrogates",
		serve: func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			sseHeader(w)
			f.chunk(w, "valid ")
			f.raw(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xff\xfe bytes \"}}]}\n\n")
			f.raw(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lone \\ud800 high, pair \\ud83d\\ude00 ok\"}}]}\n\n")
			// Bad bytes after the text of a chunk shaped like the last.
			f.raw(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" end\"}}],\"model\":\"m\xff\"}\n\n")
			f.raw(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"}}],\"model\":\"m\xff\"}\n\n")
			f.finish(w)
		},
		status: 200, content: "valid bad \ufffd bytes lone \ufffd high, pair \U0001F600 ok end!", posts: 1,
		check: func(t *testing.T, o outcome) {
			if !strings.Contains(string(o.aegis["findings"]), "UTF-8") {
				t.Fatalf("no finding says the text was repaired: %s", o.aegis["findings"])
			}
		},
	},
}

func TestUpstreamFaults(t *testing.T) {
	for _, tc := range upstreamFaults {
		for _, stream := range []bool{true, false} {
			name := tc.name + map[bool]string{true: " (stream)", false: " (whole body)"}[stream]
			t.Run(name, func(t *testing.T) {
				noLeaks(t, func(t *testing.T) {
					f := newFake(t, tc.serve)
					pol := tc.policy
					switch {
					case pol != "":
					case tc.stalls:
						pol = fastStall
					default:
						pol = patientStall
					}
					r := newRig(t, f, pol, nil)
					o := read(t, r.post(ask, stream), stream)
					status := tc.status
					if !stream && status == 200 && tc.code != "" {
						status = map[string]int{"aegis_stall": 504, "aegis_upstream_error": 502}[tc.code]
					}
					if o.status != status || o.code != tc.code {
						t.Fatalf("got %d %q (%s); want %d %q", o.status, o.code, o.message, status, tc.code)
					}
					want := tc.content
					if want == sent {
						want = f.sentText()
					}
					if o.status == 200 && o.content != want {
						t.Fatalf("bytes lost or repeated:\n got %q\nwant %q", o.content, want)
					}
					if o.code != "" && o.message == "" {
						t.Fatalf("unclear error message %q", o.message)
					}
					if p := f.posts.Load(); p != tc.posts {
						t.Fatalf("the upstream got %d POSTs; want %d", p, tc.posts)
					}
					if tc.check != nil {
						tc.check(t, o)
					}
				})
			})
		}
	}
}
