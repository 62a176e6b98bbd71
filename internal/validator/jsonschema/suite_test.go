package jsonschema

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// The official JSON-Schema-Test-Suite, run the way `aegis check` runs a
// case: each test instance becomes a case in the DESIGN.md format (the
// group's schema as response_format json_schema, the instance's JSON text
// as the assistant output), and the case passes when json_syntax and
// json_schema, built from the registry for that request, report nothing.
//
// The generated cases are written as JSONL (cases.jsonl, plus labels.jsonl
// with the expected verdicts) to a temp dir, or to $AEGIS_SUITE_OUT when
// set, so `aegis check` can be run on exactly the same cases:
//
//	AEGIS_SUITE_OUT=/tmp/suite go test -run TestJSONSchemaSuite ./internal/validator/jsonschema/
//	aegis check /tmp/suite/draft2020-12/cases.jsonl

// suiteCase is one case line in the DESIGN.md format.
type suiteCase struct {
	ID      string          `json:"id"`
	Request json.RawMessage `json:"request"`
	Output  string          `json:"output"`
}

type suiteLabel struct {
	ID    string `json:"id"`
	Valid bool   `json:"valid"`
}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

var draftURI = map[string]string{
	"draft2020-12": "https://json-schema.org/draft/2020-12/schema",
	"draft7":       "http://json-schema.org/draft-07/schema#",
}

// withDraft declares the draft in a root object schema that does not
// declare one, so the case carries its draft (the suite's files rely on
// the directory they are in).
func withDraft(schema json.RawMessage, draft string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(schema, &obj) != nil {
		return schema // boolean schema
	}
	if _, ok := obj["$schema"]; ok {
		return schema
	}
	uri, _ := json.Marshal(draftURI[draft])
	return append(append([]byte(`{"$schema":`), uri...), append([]byte(","), bytes.TrimPrefix(bytes.TrimSpace(schema), []byte("{"))...)...)
}

type suiteCount struct {
	pass, fail, skippedRemote int
	decisive                  int // cases whose schema the streaming tracker decides alone
	failures                  []string
}

// buildCases reads one draft's test files into cases.
func buildCases(t testing.TB, root, draft string) (req, opt []suiteCase, labels map[string]bool, remote int) {
	labels = map[string]bool{}
	dir := filepath.Join(root, "tests", draft)
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(b, &groups); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for gi, g := range groups {
			if bytes.Contains(g.Schema, []byte("localhost:1234")) {
				remote += len(g.Tests)
				continue
			}
			schema := withDraft(g.Schema, draft)
			request, err := json.Marshal(map[string]any{
				"model":    "suite",
				"messages": []map[string]string{{"role": "user", "content": g.Description}},
				"response_format": map[string]any{
					"type":        "json_schema",
					"json_schema": map[string]any{"name": "suite", "strict": true, "schema": schema},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			for ti, tc := range g.Tests {
				c := suiteCase{
					ID:      fmt.Sprintf("%s/%s#%d/%d", draft, rel, gi, ti),
					Request: request,
					Output:  string(tc.Data),
				}
				labels[c.ID] = tc.Valid
				if strings.HasPrefix(rel, "optional"+string(filepath.Separator)) {
					opt = append(opt, c)
				} else {
					req = append(req, c)
				}
			}
		}
	}
	return req, opt, labels, remote
}

func writeJSONL(t testing.TB, path string, rows any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	switch rs := rows.(type) {
	case []suiteCase:
		for _, r := range rs {
			enc.Encode(r)
		}
	case []suiteLabel:
		for _, r := range rs {
			enc.Encode(r)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// caseRequest turns a case's OpenAI request into the validator.Request the
// checks see (only what json checks use).
func caseRequest(raw json.RawMessage) (*validator.Request, error) {
	var r struct {
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return &validator.Request{ResponseFormat: &validator.ResponseFormat{
		Type: r.ResponseFormat.Type, Schema: r.ResponseFormat.JSONSchema.Schema,
	}}, nil
}

// runCase builds json_syntax and json_schema from the registry for the
// case's request and reports whether the output passes.
func runCase(c suiteCase, schemaCfg *Config) (bool, []validator.Finding, error) {
	req, err := caseRequest(c.Request)
	if err != nil {
		return false, nil, err
	}
	var vs []validator.Validator
	for _, name := range []string{jsonsyntax.Name, Name} {
		spec, _ := testRegistry.Lookup(name)
		var cfg any = spec.Config()
		if name == Name && schemaCfg != nil {
			cfg = schemaCfg
		}
		v, err := spec.New(cfg, req)
		if err != nil {
			return false, nil, err
		}
		if v != nil {
			vs = append(vs, v)
		}
	}
	out := []byte(c.Output)
	var fs []validator.Finding
	for _, v := range vs {
		for i := 0; i < len(out); i += 16 {
			v.Write(out[i:min(i+16, len(out))])
		}
		v.Close()
		fs = append(fs, v.Findings()...)
	}
	return len(fs) == 0, fs, nil
}

func runSuite(t *testing.T, cases []suiteCase, labels map[string]bool, cfg *Config) suiteCount {
	var n suiteCount
	for _, c := range cases {
		if r, err := caseRequest(c.Request); err == nil {
			if comp, err := DefaultCache.Compile(r.ResponseFormat.Schema, Options{AssertFormat: cfg != nil && cfg.AssertFormat}); err == nil && comp.Decisive {
				n.decisive++
			}
		}
		pass, fs, err := runCase(c, cfg)
		if err != nil {
			n.fail++
			n.failures = append(n.failures, fmt.Sprintf("%s: build: %v", c.ID, err))
			continue
		}
		if pass == labels[c.ID] {
			n.pass++
		} else {
			n.fail++
			n.failures = append(n.failures, fmt.Sprintf("%s: got pass=%v want %v (%v) output %.80s", c.ID, pass, labels[c.ID], fs, c.Output))
		}
	}
	return n
}

func TestJSONSchemaSuite(t *testing.T) {
	root := testbed.Shared(t, "datasets/json-schema-test-suite")
	outDir := os.Getenv("AEGIS_SUITE_OUT")
	if outDir == "" {
		outDir = t.TempDir()
	}
	for _, draft := range []string{"draft2020-12", "draft7"} {
		t.Run(draft, func(t *testing.T) {
			req, opt, labels, remote := buildCases(t, root, draft)
			all := append(append([]suiteCase{}, req...), opt...)
			writeJSONL(t, filepath.Join(outDir, draft, "cases.jsonl"), req)
			writeJSONL(t, filepath.Join(outDir, draft, "cases-optional.jsonl"), opt)
			var ls []suiteLabel
			for _, c := range all {
				ls = append(ls, suiteLabel{ID: c.ID, Valid: labels[c.ID]})
			}
			writeJSONL(t, filepath.Join(outDir, draft, "labels.jsonl"), ls)

			r := runSuite(t, req, labels, nil)
			// Optional tests include format assertion, which is opt-in.
			o := runSuite(t, opt, labels, &Config{AssertFormat: true, Early: true})
			t.Logf("%s required: %d/%d pass (remote-ref skipped: %d; %d with a schema the streaming tracker decides alone); optional (assert_format): %d/%d pass",
				draft, r.pass, r.pass+r.fail, remote, r.decisive, o.pass, o.pass+o.fail)
			for _, f := range o.failures {
				t.Logf("optional: %s", f)
			}
			for _, f := range r.failures {
				t.Errorf("required: %s", f)
			}
			if r.pass < 500 {
				t.Fatalf("only %d required cases ran", r.pass)
			}
		})
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	jsonsyntax.Register(r)
	return r
}()
