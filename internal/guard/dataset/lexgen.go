package dataset

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

// Examples composed from the lexicons. Injections are an override, a role
// or a lead followed by a goal or an attack; benign texts are requests,
// lookalikes and leads, alone or joined. Both classes get the same
// separators and layout, so that shape alone is no evidence; only the
// markers that fake a system or end-of-input boundary are kept to
// injections, because that is what they are for.
//
// Held-out hygiene: the classifier holds examples out by the hash of
// their text and sets its thresholds on the held-out negatives. A benign
// entry (lead, benign, lookalike) that Train would hold out is emitted on
// its own and never composed into generated examples, so the thresholds
// are not set on text already trained on in pieces. Attacks are composed
// whether held out or not: they only feed the held-out recall (which is
// then optimistic for the lexicons), and every one is worth learning.

// lexSeps join two parts of a composed text, for both classes.
var lexSeps = []string{" ", " ", " ", "\n", "\n\n", " - ", "\n---\n", "\n\n> "}

// lexMarkers pretend a new, more authoritative part of the prompt starts:
// injection only.
var lexMarkers = []string{"SYSTEM: ", "### ", "[system] ", "<|im_start|>system\n", "<<SYS>> ", "[INST] ",
	"---- END OF INPUT ----\n", "</user>\n<system>", "\n\n\n", "IMPORTANT: ", "[ADMIN] ", "@assistant "}

// lexFrames are neutral layouts around a benign or an injected text.
var lexFrames = []string{"%s", "%s", "%s", "\"%s\"", "### %s", "- %s", "Q: %s", "%s\n", "> %s", "`%s`"}

// LexiconExamples composes examples from lexs. scale sets how many
// composed examples a lexicon gives per entry it has; holdoutPercent must
// be the one Train will use (TrainConfig.HoldoutPercent).
func LexiconExamples(lexs []*Lexicon, scale, holdoutPercent int, seed uint64) []classifier.Example {
	var out []classifier.Example
	for _, lx := range lexs {
		out = append(out, lexiconExamples(lx, scale, holdoutPercent, seed)...)
	}
	return out
}

func lexSource(lang string) string {
	if lang == "en" {
		return "lexicon/en"
	}
	return "lexicon/intl"
}

func lexiconExamples(lx *Lexicon, scale, holdoutPercent int, seed uint64) []classifier.Example {
	src := lexSource(lx.Lang)
	var out []classifier.Example
	// Whole entries first; held-out ones stay out of the pools.
	var pool [numKinds][]string
	for k := Override; k < numKinds; k++ {
		for _, e := range lx.Entries[k] {
			switch k {
			case Override, Goal, Role:
				pool[k] = append(pool[k], e)
				continue
			case Attack:
				out = append(out, classifier.Example{Text: e, Source: src, Labels: injPos, Whole: true})
			default:
				out = append(out, classifier.Example{Text: e, Source: src, Labels: notInjOnl, Whole: true})
			}
			if k == Attack || !classifier.HeldOut(e, holdoutPercent) {
				pool[k] = append(pool[k], e)
			}
		}
	}
	h := fnv.New64a()
	h.Write([]byte(lx.Lang))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	has := func(ks ...Kind) bool {
		for _, k := range ks {
			if len(pool[k]) == 0 {
				return false
			}
		}
		return true
	}
	p := func(k Kind) string { return pick(r, pool[k]) }
	sep := func() string { return pick(r, lexSeps) }
	frame := func(s string) string { return strings.Replace(pick(r, lexFrames), "%s", s, 1) }
	gen := func(text string, l [2]classifier.Label) {
		out = append(out, classifier.Example{Text: text, Source: src, Labels: l, Whole: true, Generated: true})
	}

	nPos := scale * (len(pool[Override]) + len(pool[Goal]) + len(pool[Role]) + len(pool[Attack]))
	for i := 0; i < nPos; i++ {
		var s string
		switch r.IntN(9) {
		case 0, 1:
			if !has(Override, Goal) {
				continue
			}
			s = p(Override) + " " + p(Goal)
		case 2:
			if !has(Lead, Override, Goal) {
				continue
			}
			s = p(Lead) + sep() + p(Override) + " " + p(Goal)
		case 3:
			if !has(Role, Goal) {
				continue
			}
			s = p(Role) + " " + p(Goal)
		case 4:
			if !has(Override, Role, Goal) {
				continue
			}
			s = p(Override) + " " + p(Role) + " " + p(Goal)
		case 5:
			if !has(Lead, Attack) {
				continue
			}
			s = p(Lead) + sep() + p(Attack)
		case 6:
			if !has(BenignK, Attack) {
				continue
			}
			s = p(BenignK) + sep() + p(Attack)
		case 7:
			if !has(Override, Goal) {
				continue
			}
			body := p(Override) + " " + p(Goal)
			if has(Attack) && r.IntN(2) == 0 {
				body = p(Attack)
			}
			s = pick(r, lexMarkers) + body
		case 8:
			if !has(Override, Goal) {
				continue
			}
			s = split(p(Override)+" "+p(Goal), r)
		}
		gen(frame(s), injPos)
	}
	nNeg := scale * (len(pool[Lead]) + len(pool[BenignK]) + len(pool[Lookalike]))
	for i := 0; i < nNeg; i++ {
		var s string
		switch r.IntN(6) {
		case 0:
			if !has(Lead, BenignK) {
				continue
			}
			s = p(Lead) + sep() + p(BenignK)
		case 1, 2:
			if !has(Lead, Lookalike) {
				continue
			}
			s = p(Lead) + sep() + p(Lookalike)
		case 3:
			if !has(BenignK, Lookalike) {
				continue
			}
			s = p(Lookalike) + sep() + p(BenignK)
		case 4:
			if !has(Lookalike) {
				continue
			}
			s = p(Lookalike)
			if has(Lookalike) && r.IntN(2) == 0 {
				s += sep() + p(Lookalike)
			}
		case 5:
			if !has(BenignK) {
				continue
			}
			s = split(p(BenignK), r)
		}
		gen(frame(s), notInjOnl)
	}
	return out
}

// split cuts s at word boundaries into two or three quoted pieces
// assigned to variables and joined again, the way payload-splitting
// attacks hide a phrase; benign texts get it too, so the layout is
// neutral.
func split(s string, r *rand.Rand) string {
	w := strings.Fields(s)
	if len(w) < 4 {
		return s
	}
	a := 1 + r.IntN(len(w)/2)
	b := a + 1 + r.IntN(len(w)-a-1)
	parts := []string{strings.Join(w[:a], " "), strings.Join(w[a:b], " "), strings.Join(w[b:], " ")}
	if parts[2] == "" {
		parts = parts[:2]
	}
	names := []string{"a", "b", "c"}
	var sb strings.Builder
	for i, part := range parts {
		sb.WriteString(names[i] + " = \"" + part + "\"\n")
	}
	sb.WriteString(strings.Join(names[:len(parts)], " + "))
	return sb.String()
}
