package instruct

import (
	"bytes"
	"regexp"
)

// codeLineRE is a line that reads as code: it opens with a keyword of a
// common language, or carries the punctuation statements end or nest with.
var codeLineRE = regexp.MustCompile(`^(?:def |func |function |fn |class |import |from \S+ import |package |#include|#!|public |private |static |const |let |var |return\b|select |SELECT |CREATE |if \(|for \(|while \(|\$ |>>> )|[;{}]\s*$|^\s*[}\])]|=>|:=|\w\([^)]*\)\s*[:{;]?\s*$|^\s*[\w.]+\s*=\s*\S`)

// judgeHasCode fails an output with no code in it.
func judgeHasCode(t []byte) string {
	for _, line := range bytes.Split(t, []byte("\n")) {
		trim := bytes.TrimSpace(line)
		if bytes.HasPrefix(trim, []byte("```")) || bytes.HasPrefix(trim, []byte("~~~")) || bytes.HasPrefix(line, []byte("    ")) && len(trim) > 0 && !looksLikeProse(trim) {
			return ""
		}
		if len(trim) > 0 && !looksLikeProse(trim) && codeLineRE.Match(trim) {
			return ""
		}
	}
	return "no code in the answer to a request for code"
}
