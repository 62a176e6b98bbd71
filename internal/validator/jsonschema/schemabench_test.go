package jsonschema

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestSchemaBenchSample compiles the real-world schemas of the
// JSONSchemaBench sample (../shared/datasets/jsonschemabench-sample: GitHub,
// Kubernetes, Snowplow, JSON Schema Store, Glaive function calling, ...)
// the way a request's response_format schema is compiled, and reports per
// category how many compile, how many fail and why (external $refs are
// refused by design), and how many are decisive (judged entirely while
// streaming). It fails if fewer than 90% of the schemas that make no
// external reference compile.
func TestSchemaBenchSample(t *testing.T) {
	path := filepath.Join(testbed.Shared(t, "datasets/jsonschemabench-sample"), "jsonschemabench_sample.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type tally struct{ n, ok, decisive, remote, bad int }
	cats := map[string]*tally{}
	var all tally
	cache := NewCache(2048)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	var samples []string
	for sc.Scan() {
		var row struct {
			Category   string `json:"category"`
			ID         string `json:"unique_id"`
			JSONSchema string `json:"json_schema"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		c := cats[row.Category]
		if c == nil {
			c = &tally{}
			cats[row.Category] = c
		}
		c.n++
		all.n++
		comp, err := cache.Compile([]byte(row.JSONSchema), Options{})
		switch {
		case err == nil:
			c.ok++
			all.ok++
			if comp.Decisive {
				c.decisive++
				all.decisive++
			}
		case errors.Is(err, errNoRemote):
			c.remote++
			all.remote++
		default:
			c.bad++
			all.bad++
			if len(samples) < 8 {
				samples = append(samples, row.Category+"/"+row.ID+": "+firstLine(err.Error()))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(cats))
	for n := range cats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := cats[n]
		t.Logf("%-16s %3d schemas: %3d compile (%3d decisive), %3d external $ref refused, %3d invalid", n, c.n, c.ok, c.decisive, c.remote, c.bad)
	}
	t.Logf("%-16s %3d schemas: %3d compile (%3d decisive), %3d external $ref refused, %3d invalid", "all", all.n, all.ok, all.decisive, all.remote, all.bad)
	for _, s := range samples {
		t.Logf("invalid: %s", s)
	}
	if local := all.n - all.remote; all.ok*10 < local*9 {
		t.Fatalf("only %d of %d schemas without external refs compile", all.ok, local)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
