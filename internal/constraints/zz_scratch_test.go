package constraints

import (
	"encoding/json"
	"os"
	"testing"
)

func TestZZScratch(t *testing.T) {
	b, _ := os.ReadFile("/tmp/t33cap/all-texts.json")
	var m map[string]string
	json.Unmarshal(b, &m)
	for k, v := range m {
		for _, c := range CompileText(v) {
			t.Logf("%s: %s %v from %q", k, c.Name, c.Config, c.Source)
		}
	}
}
