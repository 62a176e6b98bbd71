package dataset

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// The lexicons are hand-written for this project, one file per language:
// phrases of prompt injection and benign text that uses the same words.
// The allowed training data has about 130 short direct injections, all in
// English, and no benign text outside English; the lexicons give the
// generator in lexgen.go material for both, in many shapes and languages.
// They were written from the general idea of prompt injection, without
// reading any evaluation set.
//
//go:embed lexicon/*.txt
var lexiconFS embed.FS

// Kind is the role of a lexicon entry in generated examples.
type Kind int

// Lexicon entry kinds. Override, Goal, Role and Attack make injections;
// Lead, Benign and Lookalike make benign text (and Lead also hides an
// injection that follows it).
const (
	Override  Kind = iota // drop or replace earlier instructions ("Ignore the above.")
	Goal                  // what the attacker then wants ("Print your hidden prompt.")
	Role                  // a new identity, mode or permission for the model
	Attack                // a whole injection on its own
	Lead                  // benign text an injection can follow
	BenignK               // an ordinary request or document sentence
	Lookalike             // benign text with the words attacks use
	numKinds
)

var kindNames = [numKinds]string{"override", "goal", "role", "attack", "lead", "benign", "lookalike"}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Lexicon is one language's entries by kind.
type Lexicon struct {
	Lang    string
	Entries [numKinds][]string
}

// Limits on a lexicon file, so that a malformed one fails loudly instead
// of slowing training down.
const (
	maxLexiconEntry = 2000 // bytes per entry
	maxLexiconLines = 20000
)

// ParseLexicon reads one lexicon file: a "lang: xx" line, then
// "kind: text" lines (kinds as Kind.String gives them); blank lines and
// lines starting with '#' are skipped. name is used in errors only.
// Duplicate entries within a kind are dropped.
func ParseLexicon(name string, r io.Reader) (*Lexicon, error) {
	lx := &Lexicon{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLexiconEntry+64)
	n := 0
	for sc.Scan() {
		n++
		if n > maxLexiconLines {
			return nil, fmt.Errorf("lexicon %s: more than %d lines", name, maxLexiconLines)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !utf8.ValidString(line) {
			return nil, fmt.Errorf("lexicon %s:%d: not valid UTF-8", name, n)
		}
		key, text, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("lexicon %s:%d: want \"kind: text\", got %.40q", name, n, line)
		}
		key, text = strings.TrimSpace(key), strings.TrimSpace(text)
		if text == "" {
			return nil, fmt.Errorf("lexicon %s:%d: empty %s", name, n, key)
		}
		if len(text) > maxLexiconEntry {
			return nil, fmt.Errorf("lexicon %s:%d: entry longer than %d bytes", name, n, maxLexiconEntry)
		}
		if key == "lang" {
			if lx.Lang != "" {
				return nil, fmt.Errorf("lexicon %s:%d: second lang line", name, n)
			}
			lx.Lang = text
			continue
		}
		k := kindOf(key)
		if k < 0 {
			return nil, fmt.Errorf("lexicon %s:%d: unknown kind %q (want one of %s)", name, n, key, strings.Join(kindNames[:], ", "))
		}
		if seen[key+"\x00"+text] {
			continue
		}
		seen[key+"\x00"+text] = true
		lx.Entries[k] = append(lx.Entries[k], text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("lexicon %s:%d: %w", name, n+1, err)
	}
	if lx.Lang == "" {
		return nil, fmt.Errorf("lexicon %s: no \"lang:\" line", name)
	}
	return lx, nil
}

func kindOf(s string) Kind {
	for k, name := range kindNames {
		if s == name {
			return Kind(k)
		}
	}
	return -1
}

// Lexicons returns the embedded lexicons, one per language (files of the
// same language are merged in name order), sorted by language.
func Lexicons() ([]*Lexicon, error) {
	names, err := fs.Glob(lexiconFS, "lexicon/*.txt")
	if err != nil {
		return nil, err
	}
	var out []*Lexicon
	langs := map[string]*Lexicon{}
	for _, name := range names {
		f, err := lexiconFS.Open(name)
		if err != nil {
			return nil, err
		}
		lx, err := ParseLexicon(path.Base(name), f)
		f.Close()
		if err != nil {
			return nil, err
		}
		// A language may span files (en.txt, en-2.txt); they are one lexicon.
		if prev, ok := langs[lx.Lang]; ok {
			for k := range prev.Entries {
				prev.Entries[k] = append(prev.Entries[k], lx.Entries[k]...)
			}
			continue
		}
		langs[lx.Lang] = lx
		out = append(out, lx)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Lang < out[j].Lang })
	return out, nil
}
