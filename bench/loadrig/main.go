// Package main is the loadrig command. It stands in for the two other
// ends of the throughput comparison in scripts/bench-overhead: with
// -replay it serves a recorded
// llama-server stream (cut to -tokens content chunks) at full speed to every
// POST; with -proxy it is a plain httputil.ReverseProxy in front of a URL,
// flushing every chunk, with the same connection pool Aegis uses upstream.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"

	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	replay := flag.String("replay", "", "recorded SSE stream to serve")
	tokens := flag.Int("tokens", 0, "content chunks to keep of the recording (0: all)")
	proxy := flag.String("proxy", "", "URL to reverse-proxy to")
	flag.Parse()
	var h http.Handler
	switch {
	case *replay != "" && *proxy == "":
		evs, err := load(*replay, *tokens)
		if err != nil {
			log.Fatal(err)
		}
		h = replayer(evs)
	case *proxy != "" && *replay == "":
		u, err := url.Parse(*proxy)
		if err != nil {
			log.Fatal(err)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.FlushInterval = -1
		rp.Transport = upstream.NewClient().Transport
		h = rp
	default:
		fmt.Fprintln(os.Stderr, "loadrig: give one of -replay FILE or -proxy URL")
		os.Exit(2)
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}

// load reads the recording's events, keeping the chunks before the text,
// the first n text chunks and everything from the closing chunk on.
func load(path string, n int) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rd := sse.NewReader(bytes.NewReader(b))
	var evs [][]byte
	text := 0
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		isText := bytes.Contains(ev.Data, []byte(`"delta":{"content":"`))
		if isText {
			text++
			if n > 0 && text > n {
				continue
			}
		}
		evs = append(evs, sse.AppendData(nil, ev.Data))
	}
	if n > 0 && text < n {
		return nil, fmt.Errorf("%s has %d text chunks, fewer than %d", path, text, n)
	}
	return evs, nil
}

func replayer(evs [][]byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusOK) // health probes
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, ev := range evs {
			if _, err := w.Write(ev); err != nil {
				return
			}
			f.Flush()
		}
	}
}
