package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// yamlParserLine matches the line yaml.v3 puts in a parser error.
var yamlParserLine = regexp.MustCompile(`^yaml: line (\d+): (did not find expected .*)$`)

// FixYAMLLine corrects the line number of a YAML syntax error. For a
// parser error ("did not find expected ',' or ']'") yaml.v3 reports the
// 0-based line of the construct it was parsing, one less than the line
// the editor shows; scanner errors are already 1-based.
func FixYAMLLine(err error) error {
	if err == nil {
		return nil
	}
	m := yamlParserLine.FindStringSubmatch(err.Error())
	if m == nil || strings.Contains(err.Error(), "\n") {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	return &lineError{msg: fmt.Sprintf("yaml: line %d: %s", n+1, m[2]), err: err}
}

type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return e.err }
