package validatortest

import (
	"encoding/json"
	"testing"
)

// GoldenJSON compares v, as indented JSON, with testdata/<name>, or
// rewrites the file when update is true. Checks keep the findings of
// their labelled corpora in such files, so a change in offsets or
// messages is seen in review.
func GoldenJSON(t testing.TB, name string, v any, update bool) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	Golden(t, name, append(b, '\n'), update)
}
