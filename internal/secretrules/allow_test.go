package secretrules

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// allowExprs are every allow-list regex of the embedded file.
func allowExprs(t testing.TB) []string {
	var cfg tomlConfig
	if err := toml.Unmarshal(gitleaksTOML, &cfg); err != nil {
		t.Fatal(err)
	}
	var out []string
	lists := append([]tomlAllow{}, cfg.Allowlists...)
	if cfg.Allowlist != nil {
		lists = append(lists, *cfg.Allowlist)
	}
	for _, r := range cfg.Rules {
		lists = append(lists, r.Allowlists...)
	}
	for _, a := range lists {
		out = append(out, a.Regexes...)
	}
	return out
}

// allowTargets are texts an allow-list meets: the rule kinds, the dense
// text's lines and their parts, and strings each alternative's required
// literals are planted in (so that the filtered pieces also run and
// match).
func allowTargets(exprs []string) []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.text, strings.ToUpper(k.text))
	}
	for _, l := range strings.Split(denseText(2048), "\n") {
		out = append(out, l)
		if _, v, ok := strings.Cut(l, "="); ok {
			out = append(out, v, strings.Trim(v, `"'`))
		}
	}
	// Pairs of the words allow-lists are made of, joined the ways
	// identifiers join them: written without looking at the lists, so
	// that a literal the filter wrongly requires shows.
	vocab := strings.Fields("key api token secret access auth credentials bucket public primary name id alias pair url " +
		"endpoint csrf size length file vault store true null example")
	for _, a := range vocab {
		for _, b := range vocab {
			for _, sep := range []string{"", "_", "-", "."} {
				out = append(out, a+sep+b, "x"+strings.ToUpper(a)+sep+b+"=1")
			}
		}
	}
	r := rand.New(rand.NewPCG(35, 4))
	for _, x := range exprs {
		var ar allowRegexes
		if ar.add(x) != nil {
			continue
		}
		var words []string
		for _, p := range ar.pieces {
			if re, err := syntax.Parse(p.String(), syntax.Perl); err == nil {
				set, _ := newLiterals().required(re)
				words = append(words, set...)
			}
		}
		for _, w := range words {
			out = append(out, w, "my_"+w+"=abc", strings.ToUpper(w)+"_x", "${"+w+"}", "x-"+w+"\u212a")
			if r.IntN(4) == 0 {
				out = append(out, "{{ "+w+" }}")
			}
		}
	}
	return out
}

// TestAllowFilterAgrees checks that an allow-list's split and filtered
// regexes match exactly the targets the whole expressions match.
func TestAllowFilterAgrees(t *testing.T) {
	exprs := allowExprs(t)
	targets := allowTargets(exprs)
	matched := 0
	for _, x := range exprs {
		whole, err := regexp.Compile(x)
		if err != nil {
			t.Fatal(err)
		}
		var ar allowRegexes
		if err := ar.add(x); err != nil {
			t.Fatal(err)
		}
		ar.build(newLiterals())
		for _, tg := range targets {
			w, got := whole.MatchString(tg), ar.match(tg)
			if w != got {
				t.Fatalf("%q on %q: whole %v, split and filtered %v", x, tg, w, got)
			}
			if w {
				matched++
			}
		}
	}
	if matched < 100 {
		t.Fatalf("only %d matches: the targets do not exercise the lists", matched)
	}
}

func FuzzAllowFilter(f *testing.F) {
	exprs := allowExprs(f)
	for _, tg := range allowTargets(exprs)[:200] {
		f.Add(tg)
	}
	wholes := make([]*regexp.Regexp, len(exprs))
	split := make([]allowRegexes, len(exprs))
	for i, x := range exprs {
		wholes[i] = regexp.MustCompile(x)
		if err := split[i].add(x); err != nil {
			f.Fatal(err)
		}
		split[i].build(newLiterals())
	}
	f.Fuzz(func(t *testing.T, tg string) {
		for i := range exprs {
			if w, got := wholes[i].MatchString(tg), split[i].match(tg); w != got {
				t.Fatalf("%q on %q: whole %v, split and filtered %v", exprs[i], tg, w, got)
			}
		}
	})
}
