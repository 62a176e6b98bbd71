package cli

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// privateSource matches citations a user cannot follow: the project's own
// notes, its issue tracker, its design document, keys into its research.
var privateSource = regexp.MustCompile(`(?i)\bseeds?\b|\bissue\b|DESIGN\.md|/work/|research/|\[[A-Z]{1,2}\d+\]`)

// TestPlanCitesPublicSources: every source aegis plan cites, in text and
// JSON, is a public one (llama.cpp documentation and code, papers,
// published measurements, an aegis command that measures it).
func TestPlanCitesPublicSources(t *testing.T) {
	dir := writeSynthetic(t)
	for _, c := range planCases {
		for _, format := range [][]string{{"--json"}, nil} {
			args := append(append([]string{"plan", filepath.Join(dir, c.model)}, format...), c.devices...)
			for _, e := range c.extra {
				args = append(args, strings.ReplaceAll(e, "$MODELS", dir))
			}
			out, errOut, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", c.name, code, errOut)
			}
			if m := privateSource.FindString(out); m != "" {
				i := strings.Index(out, m)
				t.Errorf("%s %v: cites %q: ...%s...", c.name, format, m, out[max(0, i-80):min(len(out), i+80)])
			}
		}
	}
}
