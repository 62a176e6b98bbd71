package jsonschema

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenFindings pins the exact findings (offsets, messages, hints,
// paths) of every table case, so a change in wording or position shows
// up in review.
func TestGoldenFindings(t *testing.T) {
	var b bytes.Buffer
	for _, c := range cases {
		v := newFor(t, c.schema)()
		v.Write([]byte(c.doc))
		v.Close()
		fs := v.Findings()
		if fs == nil {
			fs = []validator.Finding{}
		}
		j, err := json.Marshal(fs)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s\t%s\n", c.name, j)
	}
	validatortest.Golden(t, "findings.golden", b.Bytes(), *update)
}
