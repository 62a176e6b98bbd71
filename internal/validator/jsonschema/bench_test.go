package jsonschema

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"

	js "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// benchPair is one (compiled schema, instance) pair of the suite.
type benchPair struct {
	id   string
	comp *Compiled
	text []byte
	inst any
}

// suitePairs compiles the draft 2020-12 required suite cases. When
// $AEGIS_BENCH_IDS names a JSON list of case ids (written by
// bench/ajv/bench.mjs), only those are used, so both sides of the ajv
// comparison validate exactly the same pairs.
func suitePairs(b *testing.B) []benchPair {
	root := testbed.Shared(b, "datasets/json-schema-test-suite")
	req, _, _, _ := buildCases(b, root, "draft2020-12")
	var only map[string]bool
	if f := os.Getenv("AEGIS_BENCH_IDS"); f != "" {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var ids []string
		if err := json.Unmarshal(raw, &ids); err != nil {
			b.Fatal(err)
		}
		only = map[string]bool{}
		for _, id := range ids {
			only[id] = true
		}
	}
	var pairs []benchPair
	for _, c := range req {
		if only != nil && !only[c.ID] {
			continue
		}
		r, err := caseRequest(c.Request)
		if err != nil {
			b.Fatal(err)
		}
		comp, err := DefaultCache.Compile(r.ResponseFormat.Schema, Options{})
		if err != nil {
			b.Fatalf("%s: %v", c.ID, err)
		}
		inst, err := js.UnmarshalJSON(strings.NewReader(c.Output))
		if err != nil {
			b.Fatal(err)
		}
		pairs = append(pairs, benchPair{id: c.ID, comp: comp, text: []byte(c.Output), inst: inst})
	}
	if len(pairs) == 0 {
		b.Fatal("no suite pairs")
	}
	return pairs
}

// BenchmarkSuite2020 is the Go side of the ajv comparison
// (scripts/bench-ajv): one op is one validation of a suite instance
// against its precompiled schema, cycling over all pairs.
//
//   - preparsed: Schema.Validate on an already decoded instance (what
//     ajv's validate(data) measures),
//   - parse_and_validate: decode the instance text, then validate (ajv:
//     JSON.parse + validate),
//   - validator: the whole json_schema check as the gateway runs it
//     (incremental scan and early-fail tracking, buffering, decode,
//     validate).
func BenchmarkSuite2020(b *testing.B) {
	benchPairs(b, suitePairs(b))
}

func benchPairs(b *testing.B, pairs []benchPair) {
	b.Run("preparsed", func(b *testing.B) {
		i := 0
		cpu0 := cpuSeconds()
		for b.Loop() {
			p := &pairs[i]
			_ = p.comp.Schema.Validate(p.inst)
			if i++; i == len(pairs) {
				i = 0
			}
		}
		reportRates(b, cpu0)
	})
	b.Run("parse_and_validate", func(b *testing.B) {
		i := 0
		cpu0 := cpuSeconds()
		for b.Loop() {
			p := &pairs[i]
			inst, _ := js.UnmarshalJSON(bytes.NewReader(p.text))
			_ = p.comp.Schema.Validate(inst)
			if i++; i == len(pairs) {
				i = 0
			}
		}
		reportRates(b, cpu0)
	})
	b.Run("validator", func(b *testing.B) {
		i := 0
		cpu0 := cpuSeconds()
		for b.Loop() {
			p := &pairs[i]
			v := New(p.comp, nil)
			v.Write(p.text)
			v.Close()
			if i++; i == len(pairs) {
				i = 0
			}
		}
		reportRates(b, cpu0)
	})
}

var benchSchema = []byte(personSchema)

var benchDoc = []byte(`{"name":"Ada Lovelace","age":36,"role":"admin","tags":["math","engines","poetry"],"address":{"city":"London"}}`)

// BenchmarkChunk16 is the per-chunk streaming cost of json_schema (scanner,
// early-fail tracker, buffering) for ~16-byte chunks: what it adds to
// every streamed chunk. The full validation at Close is a one-off per
// document, measured by BenchmarkWhole.
func BenchmarkChunk16(b *testing.B) {
	comp, err := DefaultCache.Compile(benchSchema, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var v validator.Validator = New(comp, nil)
	off := 0
	for b.Loop() {
		if off >= len(benchDoc) {
			v = New(comp, nil)
			off = 0
		}
		end := min(off+16, len(benchDoc))
		v.Write(benchDoc[off:end])
		off = end
	}
}

// BenchmarkWhole is one complete document through json_schema, including
// the cached compile lookup a new request does.
func BenchmarkWhole(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	b.ReportAllocs()
	for b.Loop() {
		comp, err := DefaultCache.Compile(benchSchema, Options{})
		if err != nil {
			b.Fatal(err)
		}
		v := New(comp, nil)
		v.Write(benchDoc)
		v.Close()
		if len(v.Findings()) != 0 {
			b.Fatal(v.Findings())
		}
	}
}

// cpuSeconds is the process's user+system CPU time. The machine the
// comparison runs on is shared, so besides wall-clock rates the
// benchmark reports validations per CPU second, which waiting for a
// core does not distort (bench/ajv/bench.mjs reports the same).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func reportRates(b *testing.B, cpu0 float64) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "validations/s")
	if cpu := cpuSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu, "validations/cpu-s")
	}
}

// structuredPairs loads bench/ajv/structured.json: strict structured-output
// schemas with instances, shared with the ajv side.
func structuredPairs(b *testing.B) []benchPair {
	raw, err := os.ReadFile("../../../bench/ajv/structured.json")
	if err != nil {
		b.Fatal(err)
	}
	var sets []struct {
		Name      string          `json:"name"`
		Schema    json.RawMessage `json:"schema"`
		Instances []string        `json:"instances"`
	}
	if err := json.Unmarshal(raw, &sets); err != nil {
		b.Fatal(err)
	}
	var pairs []benchPair
	for _, s := range sets {
		comp, err := DefaultCache.Compile(s.Schema, Options{})
		if err != nil {
			b.Fatalf("%s: %v", s.Name, err)
		}
		for _, text := range s.Instances {
			inst, err := js.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				b.Fatal(err)
			}
			pairs = append(pairs, benchPair{id: s.Name, comp: comp, text: []byte(text), inst: inst})
		}
	}
	return pairs
}

// BenchmarkStructured is the gateway's common case, compared with ajv by
// scripts/bench-ajv: strict structured-output schemas (all decisive), where
// the json_schema check judges the document while it streams.
func BenchmarkStructured(b *testing.B) {
	benchPairs(b, structuredPairs(b))
}
