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
	// Whole entries are examples on their own; every entry goes into the
	// pools the templates draw from, except held-out benign ones.
	var pool [numKinds][]string
	for k, es := range lx.Entries {
		for _, e := range es {
			switch Kind(k) {
			case Attack:
				out = append(out, classifier.Example{Text: e, Source: src, Labels: injPos, Whole: true})
			case Lead, BenignK, Lookalike:
				out = append(out, classifier.Example{Text: e, Source: src, Labels: notInjOnl, Whole: true})
				if classifier.HeldOut(e, holdoutPercent) {
					continue
				}
			}
			pool[k] = append(pool[k], e)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(lx.Lang))
	c := &composer{r: rand.New(rand.NewPCG(seed, h.Sum64())), pool: &pool}
	compose := func(n int, ts []lexTemplate, l [2]classifier.Label) {
		for i := 0; i < n; i++ {
			t := pick(c.r, ts)
			if !c.has(t.needs) {
				continue
			}
			text := strings.Replace(pick(c.r, lexFrames), "%s", t.build(c), 1)
			out = append(out, classifier.Example{Text: text, Source: src, Labels: l, Whole: true, Generated: true})
		}
	}
	compose(scale*(len(pool[Override])+len(pool[Goal])+len(pool[Role])+len(pool[Attack])), injectionTemplates, injPos)
	compose(scale*(len(pool[Lead])+len(pool[BenignK])+len(pool[Lookalike])), benignTemplates, notInjOnl)
	return out
}

// composer draws lexicon entries for templates.
type composer struct {
	r    *rand.Rand
	pool *[numKinds][]string
}

func (c *composer) has(ks []Kind) bool {
	for _, k := range ks {
		if len(c.pool[k]) == 0 {
			return false
		}
	}
	return true
}

func (c *composer) p(k Kind) string { return pick(c.r, c.pool[k]) }
func (c *composer) sep() string     { return pick(c.r, lexSeps) }

// lexTemplate builds one text from the kinds it needs.
type lexTemplate struct {
	needs []Kind
	build func(*composer) string
}

// injectionTemplates and benignTemplates are drawn from uniformly; a
// template listed twice is drawn twice as often.
var (
	overrideGoal = lexTemplate{[]Kind{Override, Goal}, func(c *composer) string { return c.p(Override) + " " + c.p(Goal) }}
	lookalikes   = lexTemplate{[]Kind{Lead, Lookalike}, func(c *composer) string { return c.p(Lead) + c.sep() + c.p(Lookalike) }}

	injectionTemplates = []lexTemplate{
		overrideGoal, overrideGoal,
		{[]Kind{Lead, Override, Goal}, func(c *composer) string { return c.p(Lead) + c.sep() + c.p(Override) + " " + c.p(Goal) }},
		{[]Kind{Role, Goal}, func(c *composer) string { return c.p(Role) + " " + c.p(Goal) }},
		{[]Kind{Override, Role, Goal}, func(c *composer) string { return c.p(Override) + " " + c.p(Role) + " " + c.p(Goal) }},
		{[]Kind{Lead, Attack}, func(c *composer) string { return c.p(Lead) + c.sep() + c.p(Attack) }},
		{[]Kind{BenignK, Attack}, func(c *composer) string { return c.p(BenignK) + c.sep() + c.p(Attack) }},
		{[]Kind{Override, Goal, Attack}, func(c *composer) string {
			body := c.p(Override) + " " + c.p(Goal)
			if c.r.IntN(2) == 0 {
				body = c.p(Attack)
			}
			return pick(c.r, lexMarkers) + body
		}},
		{[]Kind{Override, Goal}, func(c *composer) string { return split(c.p(Override)+" "+c.p(Goal), c.r) }},
	}
	benignTemplates = []lexTemplate{
		{[]Kind{Lead, BenignK}, func(c *composer) string { return c.p(Lead) + c.sep() + c.p(BenignK) }},
		lookalikes, lookalikes,
		{[]Kind{BenignK, Lookalike}, func(c *composer) string { return c.p(Lookalike) + c.sep() + c.p(BenignK) }},
		{[]Kind{Lookalike}, func(c *composer) string {
			s := c.p(Lookalike)
			if c.r.IntN(2) == 0 {
				s += c.sep() + c.p(Lookalike)
			}
			return s
		}},
		{[]Kind{BenignK}, func(c *composer) string { return split(c.p(BenignK), c.r) }},
	}
)

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
