// Package sweep runs a list of llama-bench / llama-server flag sets against
// one model on the same prompts and compares them side by side: prompt
// processing and generation speed, time to first token, memory, and the
// ratio against the first set. It is what `aegis bench sweep` runs, so a
// user can check a placement claim ("the iGPU as a coprocessor helps") on
// their own box.
package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	shellquote "github.com/kballard/go-shellquote"
	"go.yaml.in/yaml/v3"
)

// Set is one configuration to measure. Flags go to both engines; the
// engine-specific lists are appended for that engine only (llama-bench and
// llama-server spell a few flags differently, e.g. -fa 1 vs. -fa on), and
// any flag is passed through verbatim, including a fork's own.
type Set struct {
	Name        string   `yaml:"name" json:"name"`
	Env         []string `yaml:"env,omitempty" json:"env,omitempty"` // KEY=VALUE
	Flags       []string `yaml:"flags,omitempty" json:"flags,omitempty"`
	BenchFlags  []string `yaml:"bench_flags,omitempty" json:"bench_flags,omitempty"`
	ServerFlags []string `yaml:"server_flags,omitempty" json:"server_flags,omitempty"`
	// SkipBench runs the set on llama-server only (for flags llama-bench
	// lacks, such as a draft model for speculative decoding).
	SkipBench bool `yaml:"skip_bench,omitempty" json:"skip_bench,omitempty"`
}

var envRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// ParseSet parses 'name: flags', where flags is shell-quoted and may start
// with KEY=VALUE environment assignments:
//
//	vulkan: GGML_VK_VISIBLE_DEVICES=0 -dev Vulkan0 -ngl 99
func ParseSet(s string) (Set, error) {
	name, rest, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return Set{}, fmt.Errorf("sweep: set %q: want 'name: flags'", s)
	}
	words, err := shellquote.Split(rest)
	if err != nil {
		return Set{}, fmt.Errorf("sweep: set %q: %w", name, err)
	}
	set := Set{Name: name}
	for len(words) > 0 && envRe.MatchString(words[0]) {
		set.Env = append(set.Env, words[0])
		words = words[1:]
	}
	if len(words) > 0 {
		set.Flags = words
	}
	return set, nil
}

// setsFile is the YAML layout of --sets: a list under "sets".
type setsFile struct {
	Sets []Set `yaml:"sets"`
}

// maxSetsFile bounds a --sets file.
const maxSetsFile = 1 << 20

// LoadSets reads a YAML file of sets:
//
//	sets:
//	  - name: cpu
//	    flags: [-dev, none]
//	  - name: vulkan
//	    env: [GGML_VK_VISIBLE_DEVICES=0]
//	    flags: [-dev, Vulkan0, -ngl, "99"]
func LoadSets(path string) ([]Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	if len(b) > maxSetsFile {
		return nil, fmt.Errorf("sweep: %s: larger than %d bytes", path, maxSetsFile)
	}
	return parseSets(b, path)
}

func parseSets(b []byte, path string) ([]Set, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f setsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("sweep: %s: %w", path, err)
	}
	if len(f.Sets) == 0 {
		return nil, fmt.Errorf("sweep: %s: no sets", path)
	}
	for i, s := range f.Sets {
		if s.Name == "" {
			return nil, fmt.Errorf("sweep: %s: set %d has no name", path, i+1)
		}
		for _, e := range s.Env {
			if !envRe.MatchString(e) {
				return nil, fmt.Errorf("sweep: %s: set %s: env %q is not KEY=VALUE", path, s.Name, e)
			}
		}
	}
	return f.Sets, nil
}

// ErrNoSets is returned when a sweep has nothing to run.
var ErrNoSets = errors.New("sweep: no flag sets given")
