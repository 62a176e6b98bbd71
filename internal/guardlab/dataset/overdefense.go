package dataset

import (
	"fmt"
	"strings"
)

// notInjectFiles are NotInject's three subsets, by the number of
// injection trigger words each benign prompt contains.
var notInjectFiles = []string{"one", "two", "three"}

// notInject reads NotInject (evaluation only): benign prompts built
// around injection trigger words ("ignore", "bypass", "override"), all
// label 0. Category is the set's topic (Common Queries, Technique
// Queries, Virtual Creation, Multilingual) and File the subset, so that
// over-defense accuracy can be reported both ways.
func notInject(root string) ([]Item, error) {
	var out []Item
	for _, f := range notInjectFiles {
		var rows []struct {
			Prompt   string `json:"prompt"`
			Category string `json:"category"`
		}
		if err := readJSON(root, "notinject/NotInject_"+f+".json", &rows); err != nil {
			return nil, err
		}
		for _, r := range rows {
			out = append(out, Item{Text: r.Prompt, Label: 0, Category: r.Category, File: f})
		}
	}
	return out, nil
}

// PeerTable is the data of the side-by-side comparison with other
// guards: attack sets each measured against one shared benign pool, and
// NotInject for over-defense.
type PeerTable struct {
	// Rows are the attack sets (positives only), in table order.
	Rows []PeerRow
	// Pool holds the benign texts every row is measured against: XSTest's
	// safe prompts, the OpenAI moderation rows without a positive label
	// and llm-guard's benign prompt-injection cases. Category names the
	// source ("xstest-safe", "moderation-benign", "llm-guard-benign").
	Pool []Item
	// NotInject is the over-defense set (all benign).
	NotInject []Item
}

// PeerRow is one attack set of the comparison.
type PeerRow struct {
	Name  string
	Items []Item
}

// Pool categories of PeerTable.Pool.
const (
	PoolXSTest     = "xstest-safe"
	PoolModeration = "moderation-benign"
	PoolLLMGuard   = "llm-guard-benign"
)

// LoadPeerTable reads the comparison's sets from root (evaluation-only
// data: CyberSecEval, BIPIA test attacks, llm-guard cases, XSTest, the
// OpenAI moderation set and NotInject).
func LoadPeerTable(root string) (*PeerTable, error) {
	t := &PeerTable{}
	positives := func(items []Item, err error) ([]Item, error) {
		if err != nil {
			return nil, err
		}
		var out []Item
		for _, it := range items {
			if it.Label == 1 {
				out = append(out, it)
			}
		}
		return out, nil
	}
	for _, r := range []struct {
		name string
		load func() ([]Item, error)
	}{
		{"CyberSecEval PI, English user inputs", func() ([]Item, error) {
			return cyberseceval(root, "cyberseceval-prompt-injection/prompt_injection.json")
		}},
		{"CyberSecEval PI, multilingual", func() ([]Item, error) {
			return cyberseceval(root, "cyberseceval-prompt-injection/prompt_injection_multilingual_machine_translated.json")
		}},
		{"BIPIA test attack strings", func() ([]Item, error) { return bipiaTest(false)(root) }},
		{"llm-guard injection cases", func() ([]Item, error) { return llmGuard(root, "prompt_injection") }},
	} {
		items, err := positives(r.load())
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: %w", r.name, err)
		}
		t.Rows = append(t.Rows, PeerRow{Name: fmt.Sprintf("%s (%d)", r.name, len(items)), Items: items})
	}
	for _, p := range []struct {
		cat  string
		load func(string) ([]Item, error)
	}{
		{PoolXSTest, xstest},
		{PoolModeration, moderation},
		{PoolLLMGuard, func(root string) ([]Item, error) { return llmGuard(root, "prompt_injection") }},
	} {
		items, err := p.load(root)
		if err != nil {
			return nil, fmt.Errorf("dataset: benign pool %s: %w", p.cat, err)
		}
		for _, it := range items {
			if it.Label == 0 {
				t.Pool = append(t.Pool, Item{Text: it.Text, Label: 0, Category: p.cat})
			}
		}
	}
	ni, err := notInject(root)
	if err != nil {
		return nil, fmt.Errorf("dataset: notinject: %w", err)
	}
	t.NotInject = ni
	return t, nil
}

// PoolNote describes PeerTable.Pool for printed tables.
func PoolNote(t *PeerTable) string {
	n := map[string]int{}
	for _, it := range t.Pool {
		n[it.Category]++
	}
	return strings.Join([]string{
		fmt.Sprintf("%d XSTest safe prompts", n[PoolXSTest]),
		fmt.Sprintf("%d OpenAI moderation rows with no positive label", n[PoolModeration]),
		fmt.Sprintf("%d llm-guard benign injection cases", n[PoolLLMGuard]),
	}, ", ")
}
