package dataset

import (
	"sort"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

// promptshieldFile is the contamination-checked copy of the promptshield
// training set (its SOURCE.md: eight rows overlapping CyberSecEval are
// removed from it).
const promptshieldFile = "promptshield-neuralalchemy/full_dataset_expanded_augmented.clean.jsonl"

// promptshieldRow is one line of the promptshield file.
type promptshieldRow struct {
	Prompt     string `json:"prompt"`
	Label      int    `json:"label"`
	AttackType string `json:"attack_type"`
	Augmented  bool   `json:"augmented"`
	Original   string `json:"original_prompt"`
}

// Promptshield reads the promptshield set as one example per distinct
// text, with its obfuscated variants folded into their original first:
// of an attack and its case, leetspeak, homoglyph and spacing rewrites
// only the original is kept (the normaliser undoes those rewrites at
// scoring time, and variants of one attack on both sides of the held-out
// split would make held-out recall a measure of memory). Rows of the
// "control" attack type are the set's own harmless controls ("List five
// fruits.", "Explain how to make a cup of tea."), labelled malicious in
// the file; they are read as benign.
//
// Labels: attacks are injection positives with the unsafe head ignored
// (most are exploit payloads and jailbreaks, not harmful content in the
// sense that head judges); benign rows are negatives for both heads. The
// benign rows were generated from templates ("Help me with {topic}"), so
// they are marked Generated: trained on, never held out, so that the
// thresholds rest on real benign text rather than on many easy
// templated questions.
func Promptshield(root string) ([]classifier.Example, error) {
	rows, err := readJSONL[promptshieldRow](root, promptshieldFile)
	if err != nil {
		return nil, err
	}
	type key struct {
		text  string
		label int
	}
	seen := map[key]string{} // key -> attack type of the kept row
	for _, r := range rows {
		k := key{r.Prompt, r.Label}
		if r.Augmented && r.Original != "" {
			k.text = r.Original
		}
		if _, ok := seen[k]; !ok || !r.Augmented {
			seen[k] = r.AttackType
		}
	}
	keys := make([]key, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].text != keys[j].text {
			return keys[i].text < keys[j].text
		}
		return keys[i].label < keys[j].label
	})
	out := make([]classifier.Example, 0, len(keys))
	for _, k := range keys {
		ex := classifier.Example{Text: k.text, Source: "promptshield", Labels: benign, Generated: k.label == 0}
		if k.label == 1 && seen[k] != "control" {
			ex.Labels = injPos
		}
		out = append(out, ex)
	}
	return out, nil
}
