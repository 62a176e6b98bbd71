package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			msgs[i] = plainTypeError(e)
		}
		return &lineError{msg: strings.Join(msgs, "; "), err: err}
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

var (
	yamlUnknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)
	yamlWrongType    = regexp.MustCompile(`cannot unmarshal !!(\w+) (.*) into (\S+)$`)
)

// plainTypeError rewrites one of yaml.v3's decoding errors ("line 2:
// field upstream not found in type cli.serveConfig") in the file's words:
// the key or value and what was wanted, without Go type names.
func plainTypeError(e string) string {
	e = yamlUnknownField.ReplaceAllString(e, `unknown field "$1"`)
	if m := yamlWrongType.FindStringSubmatchIndex(e); m != nil {
		got, val, goType := e[m[2]:m[3]], e[m[4]:m[5]], e[m[6]:m[7]]
		e = e[:m[0]] + fmt.Sprintf("%s is a %s, want %s", val, yamlTagName(got), wantedKind(goType))
	}
	return e
}

func yamlTagName(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	case "int", "float":
		return "number"
	}
	return tag
}

// wantedKind names what a Go type takes, in YAML terms.
func wantedKind(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration such as 500ms"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "."):
		return "a mapping"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return "another kind of value"
}
