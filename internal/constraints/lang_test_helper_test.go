package constraints

import "github.com/aegis-sentinel/aegis/internal/validator/instruct"

// sameLanguage reports whether a compiled language name and an IFEval
// ISO 639-1 code name the same language.
func sameLanguage(name, code string) bool {
	a, ok1 := instruct.ParseLanguage(name)
	b, ok2 := instruct.ParseLanguage(code)
	return ok1 && ok2 && a == b
}
