package constraints

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

type ifevalRow struct {
	Key          int              `json:"key"`
	Prompt       string           `json:"prompt"`
	Instructions []string         `json:"instruction_id_list"`
	Kwargs       []map[string]any `json:"kwargs"`
}

func kwInt(kw map[string]any, k string) int {
	f, _ := kw[k].(float64)
	return int(f)
}

func cfgInt(c map[string]any, k string) int {
	switch v := c[k].(type) {
	case int:
		return v
	case float64:
		return int(v)
	}
	return 0
}

func find(cs []Check, name string, ok func(Check) bool) bool {
	for _, c := range cs {
		if c.Name == name && (ok == nil || ok(c)) {
			return true
		}
	}
	return false
}

func listHas(v any, want string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if s, _ := x.(string); strings.EqualFold(strings.TrimSpace(s), strings.TrimSpace(want)) {
			return true
		}
	}
	return false
}

// ifevalChecks says, per IFEval instruction type, whether the compiled
// checks enforce the instruction with the right parameters. Types absent
// from the map are not rule-checkable by this compiler.
var ifevalChecks = map[string]func(kw map[string]any, cs []Check) bool{
	"punctuation:no_comma": func(_ map[string]any, cs []Check) bool { return find(cs, "no_commas", nil) },
	"length_constraints:number_words": func(kw map[string]any, cs []Check) bool {
		n := kwInt(kw, "num_words")
		if kw["relation"] == "less than" {
			return find(cs, "length", func(c Check) bool { return cfgInt(c.Config, "max_words") == n-1 })
		}
		return find(cs, "length", func(c Check) bool { return cfgInt(c.Config, "min_words") == n })
	},
	"length_constraints:number_sentences": func(kw map[string]any, cs []Check) bool {
		n := kwInt(kw, "num_sentences")
		if kw["relation"] == "less than" {
			return find(cs, "length", func(c Check) bool { return cfgInt(c.Config, "max_sentences") == n-1 })
		}
		return find(cs, "sentences", func(c Check) bool { return cfgInt(c.Config, "min") == n })
	},
	"length_constraints:number_paragraphs": func(kw map[string]any, cs []Check) bool {
		return find(cs, "paragraphs", func(c Check) bool { return cfgInt(c.Config, "exactly") == kwInt(kw, "num_paragraphs") })
	},
	"length_constraints:nth_paragraph_first_word": func(kw map[string]any, cs []Check) bool {
		return find(cs, "paragraphs", func(c Check) bool {
			fw, _ := c.Config["first_word"].(string)
			return cfgInt(c.Config, "nth") == kwInt(kw, "nth_paragraph") && strings.EqualFold(fw, kw["first_word"].(string))
		})
	},
	"keywords:forbidden_words": func(kw map[string]any, cs []Check) bool {
		for _, w := range kw["forbidden_words"].([]any) {
			if !find(cs, "banned", func(c Check) bool { return listHas(c.Config["terms"], w.(string)) }) {
				return false
			}
		}
		return true
	},
	"keywords:existence": func(kw map[string]any, cs []Check) bool {
		for _, w := range kw["keywords"].([]any) {
			if !find(cs, "keywords", func(c Check) bool { return listHas(c.Config["include"], w.(string)) }) {
				return false
			}
		}
		return true
	},
	"keywords:frequency": func(kw map[string]any, cs []Check) bool {
		return find(cs, "keywords", func(c Check) bool {
			ws, _ := c.Config["words"].([]any)
			for _, w := range ws {
				m := w.(map[string]any)
				if strings.EqualFold(m["word"].(string), kw["keyword"].(string)) {
					n := kwInt(kw, "frequency")
					if kw["relation"] == "less than" {
						return cfgInt(m, "max") == n-1
					}
					return cfgInt(m, "min") == n
				}
			}
			return false
		})
	},
	"keywords:letter_frequency": func(kw map[string]any, cs []Check) bool {
		return find(cs, "keywords", func(c Check) bool {
			ls, _ := c.Config["letters"].([]any)
			for _, l := range ls {
				m := l.(map[string]any)
				if m["letter"] == kw["letter"] {
					n := kwInt(kw, "let_frequency")
					if kw["let_relation"] == "less than" {
						return cfgInt(m, "max") == n-1
					}
					return cfgInt(m, "min") == n
				}
			}
			return false
		})
	},
	"change_case:english_lowercase": func(_ map[string]any, cs []Check) bool {
		return find(cs, "letter_case", func(c Check) bool { return c.Config["case"] == "lower" })
	},
	"change_case:english_capital": func(_ map[string]any, cs []Check) bool {
		return find(cs, "letter_case", func(c Check) bool { return c.Config["case"] == "upper" })
	},
	"change_case:capital_word_frequency": func(kw map[string]any, cs []Check) bool {
		n := kwInt(kw, "capital_frequency")
		return find(cs, "capital_words", func(c Check) bool {
			if kw["capital_relation"] == "less than" {
				return cfgInt(c.Config, "max") == n-1
			}
			return cfgInt(c.Config, "min") == n
		})
	},
	"detectable_format:json_format": func(_ map[string]any, cs []Check) bool { return find(cs, "json_syntax", nil) },
	"detectable_format:title":       func(_ map[string]any, cs []Check) bool { return find(cs, "title", nil) },
	"detectable_format:number_bullet_lists": func(kw map[string]any, cs []Check) bool {
		return find(cs, "bullets", func(c Check) bool { return cfgInt(c.Config, "exactly") == kwInt(kw, "num_bullets") })
	},
	"detectable_format:number_highlighted_sections": func(kw map[string]any, cs []Check) bool {
		return find(cs, "highlights", func(c Check) bool { return cfgInt(c.Config, "min") == kwInt(kw, "num_highlights") })
	},
	"detectable_format:multiple_sections": func(kw map[string]any, cs []Check) bool {
		return find(cs, "sections", func(c Check) bool {
			return cfgInt(c.Config, "min") == kwInt(kw, "num_sections") && strings.EqualFold(c.Config["splitter"].(string), strings.TrimSpace(kw["section_spliter"].(string)))
		})
	},
	"detectable_format:constrained_response": func(_ map[string]any, cs []Check) bool { return find(cs, "options", nil) },
	"detectable_content:number_placeholders": func(kw map[string]any, cs []Check) bool {
		return find(cs, "placeholders", func(c Check) bool { return cfgInt(c.Config, "min") == kwInt(kw, "num_placeholders") })
	},
	"detectable_content:postscript": func(kw map[string]any, cs []Check) bool {
		return find(cs, "postscript", func(c Check) bool {
			return strings.EqualFold(strings.TrimSpace(c.Config["marker"].(string)), strings.TrimSpace(kw["postscript_marker"].(string)))
		})
	},
	"startend:end_checker": func(kw map[string]any, cs []Check) bool {
		return find(cs, "end_phrase", func(c Check) bool {
			return strings.EqualFold(strings.TrimSpace(c.Config["phrase"].(string)), strings.TrimSpace(kw["end_phrase"].(string)))
		})
	},
	"startend:quotation":        func(_ map[string]any, cs []Check) bool { return find(cs, "quoted", nil) },
	"combination:two_responses": func(_ map[string]any, cs []Check) bool { return find(cs, "two_responses", nil) },
	"combination:repeat_prompt": func(kw map[string]any, cs []Check) bool {
		return find(cs, "repeat_prompt", func(c Check) bool {
			return strings.TrimSpace(c.Config["text"].(string)) == strings.TrimSpace(kw["prompt_to_repeat"].(string))
		})
	},
	"language:response_language": func(kw map[string]any, cs []Check) bool {
		return find(cs, "language", func(c Check) bool {
			l, _ := c.Config["language"].(string)
			return sameLanguage(l, kw["language"].(string))
		})
	},
}

// floors are the minimum detection rates the test holds the compiler to:
// a regression guard a few points under the rates measured when the rules
// were written (the measured rates are logged with -v).
const defaultFloor = 0.8 // every other type

var floors = map[string]float64{
	"change_case:capital_word_frequency":     0.6,
	"change_case:english_capital":            0.75,
	"detectable_format:constrained_response": 0.6,
	"keywords:forbidden_words":               0.75,
	"keywords:frequency":                     0.7,
	"keywords:letter_frequency":              0.7,
	"language:response_language":             0.85, // Swahili: whatlanggo has no Swahili profile
}

// maxExtra bounds checks compiled that a row's instruction list does not
// name (most are right: "in English" is a language instruction IFEval
// files under change_case).
const maxExtra = 60

func TestIFEvalCoverage(t *testing.T) {
	f, err := os.Open(filepath.Join(testbed.Shared(t, "datasets"), "ifeval", "input_data.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type tally struct{ hit, total int }
	per := map[string]*tally{}
	var misses []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	rows, extra := 0, 0
	for sc.Scan() {
		var r ifevalRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows++
		cs := CompileText(r.Prompt)
		expected := map[string]bool{}
		for i, id := range r.Instructions {
			tl := per[id]
			if tl == nil {
				tl = &tally{}
				per[id] = tl
			}
			tl.total++
			chk, ok := ifevalChecks[id]
			if !ok {
				continue
			}
			if chk(r.Kwargs[i], cs) {
				tl.hit++
			} else {
				misses = append(misses, fmt.Sprintf("%d %s %v", r.Key, id, r.Kwargs[i]))
			}
			for _, n := range ifevalNames[id] {
				expected[n] = true
			}
		}
		for _, c := range cs {
			if !expected[c.Name] {
				extra++
				t.Logf("extra check on %d: %s %v from %q", r.Key, c.Name, c.Config, c.Source)
			}
		}
	}
	if rows != 541 {
		t.Fatalf("%d rows, want 541", rows)
	}
	ids := make([]string, 0, len(per))
	for id := range per {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	hit, total := 0, 0
	for _, id := range ids {
		tl := per[id]
		hit += tl.hit
		total += tl.total
		rate := float64(tl.hit) / float64(tl.total)
		t.Logf("%-46s %3d / %3d  %.0f%%", id, tl.hit, tl.total, 100*rate)
		floor, ok := floors[id]
		if !ok {
			floor = defaultFloor
		}
		if rate < floor {
			t.Errorf("%s: detected %d/%d, below the floor %.0f%%", id, tl.hit, tl.total, 100*floor)
		}
	}
	t.Logf("all types: %d / %d detected with the right parameters; %d checks not asked for by the row's instruction list", hit, total, extra)
	if extra > maxExtra {
		t.Errorf("%d checks compiled that the instruction lists do not name (max %d)", extra, maxExtra)
	}
	for _, m := range misses {
		t.Logf("miss: %s", m)
	}
}

// ifevalNames are the check names each IFEval type compiles to, for
// counting checks a row did not ask for.
var ifevalNames = map[string][]string{
	"punctuation:no_comma": {"no_commas"}, "length_constraints:number_words": {"length"},
	"length_constraints:number_sentences": {"length", "sentences"}, "length_constraints:number_paragraphs": {"paragraphs", "length"},
	"length_constraints:nth_paragraph_first_word": {"paragraphs", "length"}, "keywords:forbidden_words": {"banned"},
	"keywords:existence": {"keywords"}, "keywords:frequency": {"keywords"}, "keywords:letter_frequency": {"keywords"},
	"change_case:english_lowercase": {"letter_case"}, "change_case:english_capital": {"letter_case"},
	"change_case:capital_word_frequency": {"capital_words"}, "detectable_format:json_format": {"json_syntax"},
	"detectable_format:title": {"title"}, "detectable_format:number_bullet_lists": {"bullets"},
	"detectable_format:number_highlighted_sections": {"highlights"}, "detectable_format:multiple_sections": {"sections"},
	"detectable_format:constrained_response": {"options"}, "detectable_content:number_placeholders": {"placeholders"},
	"detectable_content:postscript": {"postscript"}, "startend:end_checker": {"end_phrase"}, "startend:quotation": {"quoted"},
	"combination:two_responses": {"two_responses"}, "combination:repeat_prompt": {"repeat_prompt"},
	"language:response_language": {"language"},
}
