// Package dataset reads the third-party labelled datasets in
// ../shared/datasets into guard training examples and evaluation sets.
//
// The split between the two is fixed here and nowhere else: Training
// reads only the sets the guard may learn from; EvalSet reads only the
// evaluation-only sets (cyberseceval-prompt-injection, the BIPIA test
// files, llm-guard-test-cases, xstest, openai-moderation-eval, notinject),
// as does LoadPeerTable (the side-by-side comparison with other guards).
// Nothing is copied into the repository; the files are read where they
// lie.
//
// Training also adds text written for this project: a handmade benign
// set, generated benign documents with matched injected copies
// (synth.go), and per-language lexicons of injections and benign
// look-alikes composed into examples (lexicon.go, lexgen.go).
package dataset

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrNoData is returned (wrapped) when the shared datasets are not found.
var ErrNoData = errors.New("shared datasets not found")

// Root finds the datasets directory: $AEGIS_DATASETS when set, else the
// first shared/datasets found walking up from the working directory.
func Root() (string, error) {
	if d := os.Getenv("AEGIS_DATASETS"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
		return "", fmt.Errorf("AEGIS_DATASETS=%s: %w", d, ErrNoData)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("dataset: %w", err)
	}
	for {
		cand := filepath.Join(dir, "shared", "datasets")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no shared/datasets above the working directory: %w", ErrNoData)
		}
		dir = parent
	}
}

// maxFile bounds what one dataset file may hold.
const maxFile = 64 << 20

func readFile(root, rel string) ([]byte, error) {
	p := filepath.Join(root, rel)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("dataset: read %s: %w", rel, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("dataset: %s is larger than %d bytes", rel, maxFile)
	}
	return b, nil
}

func readJSON(root, rel string, v any) error {
	b, err := readFile(root, rel)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("dataset: parse %s: %w", rel, err)
	}
	return nil
}

// readJSONL decodes each non-empty line of rel into a fresh T.
func readJSONL[T any](root, rel string) ([]T, error) {
	b, err := readFile(root, rel)
	if err != nil {
		return nil, err
	}
	var out []T
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("dataset: %s:%d: %w", rel, i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// readCSV returns the rows of rel as maps from the (lower-cased) header.
func readCSV(root, rel string) ([]map[string]string, error) {
	b, err := readFile(root, rel)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(string(b)))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("dataset: parse %s: %w", rel, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("dataset: %s is empty", rel)
	}
	hdr := recs[0]
	var out []map[string]string
	for _, rec := range recs[1:] {
		m := make(map[string]string, len(hdr))
		for i, h := range hdr {
			if i < len(rec) {
				m[strings.ToLower(h)] = rec[i]
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// glob returns the files matching pattern under root, relative and sorted.
func glob(root, pattern string) ([]string, error) {
	ms, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		out = append(out, rel)
	}
	sort.Strings(out)
	return out, nil
}

// categories reads a BIPIA attack file: category -> attack strings, in
// sorted category order.
func categories(root, rel string) ([]string, map[string][]string, error) {
	var m map[string][]string
	if err := readJSON(root, rel, &m); err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, m, nil
}

// bipiaContexts reads the "context" field of BIPIA context files.
func bipiaContexts(root string, rels ...string) ([]string, error) {
	var out []string
	for _, rel := range rels {
		rows, err := readJSONL[struct {
			Context json.RawMessage `json:"context"`
		}](root, rel)
		if err != nil {
			return nil, err
		}
		for i, r := range rows {
			// Email and table contexts are strings; code contexts are
			// lists of lines.
			var s string
			if err := json.Unmarshal(r.Context, &s); err != nil {
				var lines []string
				if err := json.Unmarshal(r.Context, &lines); err != nil {
					return nil, fmt.Errorf("dataset: %s:%d: context is neither a string nor lines", rel, i+1)
				}
				s = strings.Join(lines, "\n")
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// Inject places attack into context the way BIPIA builds injected
// documents: at the end, the start or the middle (at a sentence or line
// break), chosen by pos.
func Inject(context, attack string, pos int) string {
	switch pos % 3 {
	case 0:
		return context + "\n" + attack
	case 1:
		return attack + "\n" + context
	}
	mid := len(context) / 2
	if i := strings.IndexAny(context[mid:], ".\n"); i >= 0 {
		mid += i + 1
	} else {
		mid = len(context)
	}
	return context[:mid] + " " + attack + " " + context[mid:]
}

func sortStrings(s []string) { sort.Strings(s) }
