// Package main is the loadrig command. It stands in for the two other
// ends of the throughput comparison in scripts/bench-overhead: with
// -replay it serves a recorded
// llama-server stream (cut to -tokens content chunks) at full speed to every
// POST; with -proxy it is a plain httputil.ReverseProxy in front of a URL,
// flushing every chunk, with the same connection pool Aegis uses upstream.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	replay := flag.String("replay", "", "recorded SSE stream to serve")
	tokens := flag.Int("tokens", 0, "content chunks to keep of the recording (0: all)")
	proxy := flag.String("proxy", "", "URL to reverse-proxy to")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file until SIGINT or SIGTERM")
	flag.Parse()
	if *cpuProfile != "" {
		stop, err := profile(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
	}
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
		// A client that leaves mid-stream (wrk at the end of a run) is
		// no error worth a line; anything else is logged as before.
		rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Printf("http: proxy error: %v", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		}
		// The body is read whole before it is forwarded, as Aegis reads
		// it: once the proxy has flushed the response headers, net/http
		// may close a request body not read to its end, while the
		// transport may still be reading it to confirm its end; the
		// transport's write then fails and the stream is cut empty.
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			rp.ServeHTTP(w, r)
		})
	default:
		fmt.Fprintln(os.Stderr, "loadrig: give one of -replay FILE or -proxy URL")
		os.Exit(2)
	}
	srv := &http.Server{Addr: *listen, Handler: h}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// profile writes a CPU profile to path until the returned stop is called.
func profile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
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
