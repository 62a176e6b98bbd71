package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guardlab/doccorpus"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestCheckHeldOutDocuments: the held-out part of the benign document
// corpus, each file a read_file result followed by a plain answer, through
// aegis check with the default policy. It is built from whatever of the
// corpus's places this machine has (see package doccorpus), so it runs on
// any build machine; the bound is the held-out rate measured when the
// document thresholds were set (1.1%), with room for the machine's own
// files, and far below the two in three files flagged before documents
// were read as documents.
func TestCheckHeldOutDocuments(t *testing.T) {
	if testing.Short() {
		t.Skip("reads and screens about 600 files")
	}
	docs, err := doccorpus.Build(doccorpus.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, held := doccorpus.Split(docs)
	var in strings.Builder
	for i, d := range held {
		req := docConversation(d)
		line, err := json.Marshal(map[string]any{"id": fmt.Sprint(i), "request": req, "output": "It is an ordinary file; here is a short summary of what it does."})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	out, errOut, _ := runCheckCLI(t, in.String(), "check")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(held) {
		t.Fatalf("%d verdicts for %d documents (stderr %s)", len(lines), len(held), errOut)
	}
	flagged := 0
	for _, l := range lines {
		var v validator.Verdict
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("verdict %q: %v", l, err)
		}
		if v.Verdict == validator.Fail {
			flagged++
			var id int
			fmt.Sscan(v.ID, &id)
			t.Logf("flagged: %s %s (%d bytes): %s", held[id].Kind, held[id].Path, len(held[id].Text), v.Reason)
		}
	}
	t.Logf("%d of %d held-out documents flagged", flagged, len(held))
	if float64(flagged) > 0.02*float64(len(held)) {
		t.Errorf("%d of %d held-out documents flagged through aegis check, want at most 2%%", flagged, len(held))
	}
}
