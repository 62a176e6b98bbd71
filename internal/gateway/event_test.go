package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

func TestEventKindString(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    eventKind
		want string
	}{
		{"none", 0, "none"},
		{"text", evText, "text"},
		{"reasoning and finish", evReasoning | evFinish, "reasoning+finish"},
		{"all", evText | evReasoning | evToolCall | evFinish | evUsage | evProgress | evError, "text+reasoning+tool_call+finish+usage+progress+error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.k.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// decoderFiles maps the prefix of a file under testdata/events to the
// dialect whose decoder reads it: a new dialect adds its prefix here and
// its <prefix>-*.in files (one upstream payload a line, as the stream
// framing delivers them), and TestDecodeGolden writes the events it reads
// into <name>.golden (go test -run TestDecodeGolden -update).
var decoderFiles = map[string]dialect{
	"chat":            dialectChat,
	"completions":     dialectCompletions,
	"ollama-chat":     dialectOllamaChat,
	"ollama-generate": dialectOllamaGenerate,
	"messages":        dialectMessages,
	"responses":       dialectResponses,
}

func decoderOf(name string) (dialect, bool) {
	best, d := "", dialect(nil)
	for p, dd := range decoderFiles {
		if strings.HasPrefix(name, p+"-") && len(p) > len(best) {
			best, d = p, dd
		}
	}
	return d, d != nil
}

// describe spells the events of one decoded payload for a golden file.
func describe(c *chunk, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(c.events().String())
	if c.hasText {
		fmt.Fprintf(&b, " text=%q", c.text)
	}
	if c.hasReasoning {
		fmt.Fprintf(&b, " reasoning=%q", c.reasoning)
	}
	for _, d := range c.calls {
		idx := "-"
		if d.Index != nil {
			idx = fmt.Sprint(*d.Index)
		}
		fmt.Fprintf(&b, " call[%s id=%q name=%q args=%s whole=%v]", idx, d.ID, d.Name, d.Arguments, d.Whole)
	}
	if c.finish {
		fmt.Fprintf(&b, " finish=%q", c.finishReason)
	}
	if c.errMsg != "" {
		fmt.Fprintf(&b, " upstream_error=%q", c.errMsg)
	}
	return b.String()
}

// TestDecodeGolden decodes every payload file under testdata/events with
// its dialect and compares the events with the golden file.
func TestDecodeGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/events/*.in")
	if len(files) == 0 {
		t.Fatal("no testdata/events/*.in")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".in")
		t.Run(name, func(t *testing.T) {
			d, ok := decoderOf(name)
			if !ok {
				t.Fatalf("%s: no dialect for this file's prefix (decoderFiles)", f)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			var c chunk
			sc := bufio.NewScanner(bytes.NewReader(raw))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := sc.Bytes()
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				err := d.parse(append([]byte(nil), line...), &c)
				fmt.Fprintln(&out, describe(&c, err))
			}
			validatortest.Golden(t, filepath.Join("events", name+".golden"), out.Bytes(), *update)
		})
	}
}

// FuzzDecode: no payload makes any dialect's decoder panic, and what it
// decodes is consistent (events say what the chunk holds).
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/events/*.in")
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		for _, line := range bytes.Split(raw, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		for _, d := range dialects {
			var c chunk
			if err := d.parse(p, &c); err != nil {
				continue
			}
			k := c.events()
			if k.has(evText) != (len(c.text) > 0) || k.has(evReasoning) != (len(c.reasoning) > 0) || k.has(evToolCall) != (len(c.calls) > 0) {
				t.Fatalf("%s: events %s disagree with the chunk for %q", d, k, p)
			}
		}
	})
}
