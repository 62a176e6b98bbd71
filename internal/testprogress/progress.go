// Package testprogress turns the event stream of `go test -json` into a
// log a person (or a CI page) can follow: a line per package as it ends,
// the output of every failing test, a progress line at a fixed interval
// while packages run (so a long, silent race run is visibly alive), and a
// closing summary that names what failed.
package testprogress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// Printer keeps the state of a run. Feed it lines with Line and call Tick
// at the progress interval; Summary writes the closing lines.
type Printer struct {
	w       io.Writer
	clk     clock.Clock
	start   time.Time
	running map[string]time.Time            // package -> first event
	tests   map[string]map[string]time.Time // package -> running test -> start
	output  map[string][]string             // "pkg\x00test" -> output lines
	done    int
	failed  []string // packages
	failedT []string // "pkg TestX"
	skipped int      // packages without tests
}

// New returns a printer writing to w, reading time from clk (nil: the
// wall clock).
func New(w io.Writer, clk clock.Clock) *Printer {
	clk = clock.Or(clk)
	return &Printer{w: w, clk: clk, start: clk.Now(), running: map[string]time.Time{},
		tests: map[string]map[string]time.Time{}, output: map[string][]string{}}
}

// Line handles one line of the stream; lines that are not events (build
// errors on stderr, a panic) are passed through as they are.
func (p *Printer) Line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	now := p.clk.Now()
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "start":
		p.running[e.Package] = now
	case "run":
		if e.Test != "" {
			if p.tests[e.Package] == nil {
				p.tests[e.Package] = map[string]time.Time{}
			}
			p.tests[e.Package][e.Test] = now
		}
		if _, ok := p.running[e.Package]; !ok {
			p.running[e.Package] = now
		}
	case "output", "build-output":
		if len(p.output[key]) < 2000 {
			p.output[key] = append(p.output[key], e.Output)
		}
	case "pass", "skip", "fail":
		if e.Test != "" {
			delete(p.tests[e.Package], e.Test)
			if e.Action == "fail" {
				p.failedT = append(p.failedT, e.Package+" "+e.Test)
				p.writeOutput(key)
			}
			if !strings.Contains(e.Test, "/") {
				delete(p.output, key)
			}
			return
		}
		p.packageDone(e, key)
	}
}

// packageDone prints a package's result line as go test would.
func (p *Printer) packageDone(e event, key string) {
	delete(p.running, e.Package)
	delete(p.tests, e.Package)
	out := p.output[key]
	delete(p.output, key)
	noTests := false
	for _, l := range out {
		noTests = noTests || strings.Contains(l, "[no test files]")
	}
	switch {
	case e.Action == "fail":
		p.done++
		p.failed = append(p.failed, e.Package)
		for _, l := range out {
			// go test's own result lines; this printer writes its own.
			if l != "PASS\n" && l != "FAIL\n" && !strings.HasPrefix(l, "FAIL\t") && !strings.HasPrefix(l, "ok  \t") {
				io.WriteString(p.w, l)
			}
		}
		fmt.Fprintf(p.w, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
	case noTests || e.Action == "skip":
		p.skipped++
	default:
		p.done++
		fmt.Fprintf(p.w, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
	}
	// Output of subtests of a package that ended (a timeout panic).
	for k := range p.output {
		if strings.HasPrefix(k, e.Package+"\x00") {
			delete(p.output, k)
		}
	}
}

func (p *Printer) writeOutput(key string) {
	for _, l := range p.output[key] {
		io.WriteString(p.w, l)
	}
}

// Tick writes one progress line: the time so far, the packages done and
// failed, and what is running, longest first, with its slowest test.
func (p *Printer) Tick() {
	now := p.clk.Now()
	var run []string
	type pk struct {
		name  string
		since time.Time
	}
	var pks []pk
	for name, since := range p.running {
		pks = append(pks, pk{name, since})
	}
	sort.Slice(pks, func(i, j int) bool {
		if !pks[i].since.Equal(pks[j].since) {
			return pks[i].since.Before(pks[j].since)
		}
		return pks[i].name < pks[j].name
	})
	for _, k := range pks {
		s := fmt.Sprintf("%s (%s", k.name, round(now.Sub(k.since)))
		var slow string
		var slowSince time.Time
		for t, at := range p.tests[k.name] {
			if strings.Contains(t, "/") {
				continue
			}
			if slow == "" || at.Before(slowSince) || at.Equal(slowSince) && t < slow {
				slow, slowSince = t, at
			}
		}
		if slow != "" {
			s += fmt.Sprintf(", %s %s", slow, round(now.Sub(slowSince)))
		}
		run = append(run, s+")")
	}
	line := fmt.Sprintf("... %s: %d packages done, %d failed", round(now.Sub(p.start)), p.done, len(p.failed))
	if len(run) > 0 {
		line += "; running: " + strings.Join(run, ", ")
	}
	fmt.Fprintln(p.w, line)
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// Summary writes the closing lines and reports whether every package
// passed.
func (p *Printer) Summary() bool {
	elapsed := round(p.clk.Now().Sub(p.start))
	if len(p.failed) == 0 {
		fmt.Fprintf(p.w, "== go test: %d packages passed in %s\n", p.done, elapsed)
		fmt.Fprintf(p.w, "packages: %d passed, 0 failed\n", p.done)
		return true
	}
	fmt.Fprintf(p.w, "== go test: %d of %d packages FAILED in %s: %s\n", len(p.failed), p.done, elapsed, strings.Join(p.failed, ", "))
	fmt.Fprintf(p.w, "packages: %d passed, %d failed\n", p.done-len(p.failed), len(p.failed))
	for _, t := range p.failedT {
		fmt.Fprintf(p.w, "   failed: %s\n", t)
	}
	return false
}

// Run reads the stream from r until it ends, writing to w and a progress
// line every interval; it returns whether every package passed.
func Run(r io.Reader, w io.Writer, clk clock.Clock, every time.Duration) bool {
	clk = clock.Or(clk)
	p := New(w, clk)
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	t := clk.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return p.Summary()
			}
			p.Line(l)
		case <-t.C():
			p.Tick()
			t.Reset(every)
		}
	}
}
