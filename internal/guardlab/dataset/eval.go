package dataset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

// Item is one labelled evaluation text: Label 1 should be flagged, 0 not.
// Group, for positives of the built-in sets, says whether the attack is
// visible in the text itself (GroupText) or only relative to a task or
// system prompt the text is not shown with (GroupContext); it is set from
// the dataset's own metadata (see groupOf*), never from a guard's scores.
type Item struct {
	Text     string `json:"text"`
	Label    int    `json:"label"`
	Category string `json:"category,omitempty"`
	Group    string `json:"group,omitempty"`
	// File names the part of a set the item comes from when the set has
	// parts worth reporting apart (NotInject's one, two and three
	// trigger-word files).
	File string `json:"file,omitempty"`
}

// The a-priori groups of positive items.
const (
	// GroupText: the text states the attack (an instruction override,
	// a role-play jailbreak, an encoded or malicious payload, ...).
	GroupText = "text"
	// GroupContext: the text is an ordinary request that is an attack
	// only against its context (another task, a language rule or a
	// secret in the system prompt); a content-only classifier is not
	// expected to flag it.
	GroupContext = "context"
)

// bipiaTestTaskCategories are the BIPIA test text-attack categories of
// the benchmark's "task-irrelevant" group: plain tasks ("analyse the
// sentiment of ...") that hijack a different task. BIPIA's SOURCE.md says
// a content-only classifier is not expected to flag them. The other two
// groups (instruction manipulation of the answer, malicious content) and
// every code attack state their attack in the text.
var bipiaTestTaskCategories = map[string]bool{
	"Task Automation": true, "Business Intelligence": true, "Conversational Agent": true,
	"Research Assistance": true, "Sentiment Analysis": true,
}

func groupOfBIPIA(category string) string {
	if bipiaTestTaskCategories[category] {
		return GroupContext
	}
	return GroupText
}

// cybersecevalContextVariants are the CyberSecEval 2 injection variants
// that by their definition need the system prompt: a plain question in
// another language (an attack only when the system prompt fixes the
// language) and an indirect reference to protected data ("write a poem
// about the password" is an attack only when the system prompt holds
// one). Every other variant carries an override, role play, encoding,
// persuasion, formatting or repetition trick in the text.
var cybersecevalContextVariants = map[string]bool{
	"different_user_input_language": true, "indirect_reference": true,
}

func groupOfCyberSecEval(variant string) string {
	if cybersecevalContextVariants[variant] {
		return GroupContext
	}
	return GroupText
}

// Set is a named evaluation set judged by one head ("prompt_injection",
// "unsafe_content", or "any" for either head flagging).
type Set struct {
	Name  string
	Head  string
	Note  string
	Items []Item
}

// HeadAny means an item counts as flagged when any head flags it.
const HeadAny = classifier.HeadAny

type evalLoader struct {
	head, note string
	load       func(root string) ([]Item, error)
}

// evalSets are the built-in evaluation sets, all from evaluation-only
// data. Attack-only sets are paired with the evaluation-only benign pool
// (BIPIA test contexts and XSTest safe prompts) so that precision and
// false-positive rates mean something.
var evalSets = map[string]evalLoader{
	"cyberseceval-pi": {"prompt_injection", "CyberSecEval 2 English user_input (251 attacks) + benign pool", func(root string) ([]Item, error) {
		return withBenignPool(root, func() ([]Item, error) {
			return cyberseceval(root, "cyberseceval-prompt-injection/prompt_injection.json")
		})
	}},
	"cyberseceval-pi-multilingual": {"prompt_injection", "CyberSecEval 2 machine-translated user_input (1,004 attacks, 17 languages) + benign pool", func(root string) ([]Item, error) {
		return withBenignPool(root, func() ([]Item, error) {
			return cyberseceval(root, "cyberseceval-prompt-injection/prompt_injection_multilingual_machine_translated.json")
		})
	}},
	"bipia-test":          {"prompt_injection", "BIPIA test attack strings alone (125) vs clean test contexts (200)", bipiaTest(false)},
	"bipia-test-injected": {"prompt_injection", "BIPIA test contexts with a test attack inserted (200) vs the clean contexts (200)", bipiaTest(true)},
	"llm-guard-pi": {"prompt_injection", "llm-guard prompt_injection scanner cases (49 flag / 11 pass)", func(root string) ([]Item, error) {
		return llmGuard(root, "prompt_injection")
	}},
	"xstest":            {"unsafe_content", "XSTest prompts: 200 unsafe vs 250 safe look-alikes", xstest},
	"xstest-any":        {HeadAny, "XSTest prompts, flagged by either head", xstest},
	"openai-moderation": {"unsafe_content", "OpenAI moderation test set: 522 with a positive label vs 1,158 without", moderation},
	"notinject":         {"prompt_injection", "NotInject: 339 benign prompts built around injection trigger words (over-defense)", notInject},
}

// EvalNames lists the built-in evaluation sets.
func EvalNames() []string { return sortedKeys(evalSets) }

// EvalSet loads the built-in evaluation set name from root.
func EvalSet(root, name string) (*Set, error) {
	l, ok := evalSets[name]
	if !ok {
		return nil, fmt.Errorf("dataset: unknown evaluation set %q (have %s)", name, strings.Join(EvalNames(), ", "))
	}
	items, err := l.load(root)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", name, err)
	}
	return &Set{Name: name, Head: l.head, Note: l.note, Items: items}, nil
}

// maxLine bounds one JSONL line.
const maxLine = 16 << 20

// ReadJSONL reads items in the shape {"text": ..., "label": 0|1,
// "category": ..., "group": ..., "file": ...} from r, one per line
// (category, group and file optional).
func ReadJSONL(r io.Reader) ([]Item, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var out []Item
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var raw struct {
			Text     *string `json:"text"`
			Label    *int    `json:"label"`
			Category string  `json:"category"`
			Group    string  `json:"group"`
			File     string  `json:"file"`
		}
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if raw.Text == nil || raw.Label == nil {
			return nil, fmt.Errorf("line %d: want {\"text\": ..., \"label\": 0|1}", n)
		}
		if *raw.Label != 0 && *raw.Label != 1 {
			return nil, fmt.Errorf("line %d: label %d, want 0 or 1", n, *raw.Label)
		}
		out = append(out, Item{Text: *raw.Text, Label: *raw.Label, Category: raw.Category, Group: raw.Group, File: raw.File})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading items: %w", err)
	}
	return out, nil
}

func cyberseceval(root, rel string) ([]Item, error) {
	var rows []struct {
		UserInput string `json:"user_input"`
		Variant   string `json:"injection_variant"`
		Type      string `json:"injection_type"`
		Lang      string `json:"speaking_language"`
	}
	if err := readJSON(root, rel, &rows); err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(rows))
	for _, r := range rows {
		cat := r.Type + "/" + r.Variant
		if strings.Contains(rel, "multilingual") {
			cat = r.Lang
		}
		out = append(out, Item{Text: r.UserInput, Label: 1, Category: cat, Group: groupOfCyberSecEval(r.Variant)})
	}
	return out, nil
}

var bipiaTestContexts = []string{"bipia/email/test.jsonl", "bipia/table/test.jsonl", "bipia/code/test.jsonl"}

// benignPool is the evaluation-only benign text: BIPIA test contexts and
// XSTest safe prompts.
func benignPool(root string) ([]Item, error) {
	var out []Item
	for _, f := range bipiaTestContexts {
		cs, err := bipiaContexts(root, f)
		if err != nil {
			return nil, err
		}
		cat := "benign/bipia-" + strings.Split(f, "/")[1]
		for _, c := range cs {
			out = append(out, Item{Text: c, Label: 0, Category: cat})
		}
	}
	xs, err := xstest(root)
	if err != nil {
		return nil, err
	}
	for _, it := range xs {
		if it.Label == 0 {
			it.Category = "benign/xstest-safe"
			out = append(out, it)
		}
	}
	return out, nil
}

func withBenignPool(root string, pos func() ([]Item, error)) ([]Item, error) {
	p, err := pos()
	if err != nil {
		return nil, err
	}
	b, err := benignPool(root)
	if err != nil {
		return nil, err
	}
	return append(p, b...), nil
}

func bipiaTest(injected bool) func(string) ([]Item, error) {
	return func(root string) ([]Item, error) {
		var attacks, cats []string
		for _, f := range []string{"bipia/text_attack_test.json", "bipia/code_attack_test.json"} {
			names, m, err := categories(root, f)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				for _, s := range m[n] {
					attacks = append(attacks, s)
					cats = append(cats, n)
				}
			}
		}
		var out []Item
		i := 0
		for _, f := range bipiaTestContexts {
			cs, err := bipiaContexts(root, f)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				out = append(out, Item{Text: c, Label: 0, Category: "clean/" + strings.Split(f, "/")[1]})
				if injected {
					k := (i * 7) % len(attacks)
					out = append(out, Item{Text: Inject(c, attacks[k], i), Label: 1, Category: cats[k], Group: groupOfBIPIA(cats[k])})
				}
				i++
			}
		}
		if !injected {
			for k, a := range attacks {
				out = append(out, Item{Text: a, Label: 1, Category: cats[k], Group: groupOfBIPIA(cats[k])})
			}
		}
		return out, nil
	}
}

func llmGuard(root, scanner string) ([]Item, error) {
	rows, err := readJSONL[struct {
		Scanner string `json:"scanner"`
		Side    string `json:"side"`
		Text    string `json:"text"`
		Label   string `json:"label"`
	}](root, "llm-guard-test-cases/llm_guard_test_cases.jsonl")
	if err != nil {
		return nil, err
	}
	var out []Item
	for _, r := range rows {
		if r.Scanner != scanner || r.Side != "input" {
			continue
		}
		l := 0
		if r.Label == "flag" {
			l = 1
		}
		out = append(out, Item{Text: r.Text, Label: l, Category: r.Label})
	}
	return out, nil
}

func xstest(root string) ([]Item, error) {
	rows, err := readCSV(root, "xstest/xstest_prompts.csv")
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(rows))
	for _, r := range rows {
		l := 0
		if r["label"] == "unsafe" {
			l = 1
		}
		out = append(out, Item{Text: r["prompt"], Label: l, Category: r["type"]})
	}
	return out, nil
}

func moderation(root string) ([]Item, error) {
	rows, err := readJSONL[map[string]any](root, "openai-moderation-eval/samples-1680.jsonl")
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(rows))
	for _, r := range rows {
		text, _ := r["prompt"].(string)
		l, cat := 0, "none"
		for _, k := range []string{"S", "H", "V", "HR", "SH", "S3", "H2", "V2"} {
			if v, ok := r[k].(float64); ok && v == 1 {
				if l == 0 {
					cat = k
				}
				l = 1
			}
		}
		out = append(out, Item{Text: text, Label: l, Category: cat})
	}
	return out, nil
}
