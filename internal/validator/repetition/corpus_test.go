package repetition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// corpusCase is one labelled output from testdata/corpus: files named
// pass_* must pass, fail_* must fail.
type corpusCase struct {
	name string
	text string
	bad  bool
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("corpus: %v (%d files)", err, len(paths))
	}
	var out []corpusCase
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(p)
		out = append(out, corpusCase{name: base, text: string(b), bad: strings.HasPrefix(base, "fail_")})
	}
	return out
}

// TestCorpusPrecisionRecall runs the labelled corpus (through every split,
// via SplitIndependent) and reports precision and recall. It fails on any
// misclassification: the corpus is the spec of the general rule.
func TestCorpusPrecisionRecall(t *testing.T) {
	var tp, fp, fn, tn int
	golden := map[string][]validator.Finding{}
	for _, c := range loadCorpus(t) {
		fs := validatortest.SplitIndependent(t, newDefault, c.text)
		golden[c.name] = fs
		got := len(fs) > 0
		switch {
		case got && c.bad:
			tp++
		case got && !c.bad:
			fp++
			t.Errorf("%s: false alarm: %+v", c.name, fs)
		case !got && c.bad:
			fn++
			t.Errorf("%s: missed", c.name)
		default:
			tn++
		}
	}
	precision := float64(tp) / float64(max(1, tp+fp))
	recall := float64(tp) / float64(max(1, tp+fn))
	checkGolden(t, golden)
	t.Logf("repetition corpus: %d cases, tp=%d fp=%d fn=%d tn=%d, precision=%.3f recall=%.3f", tp+fp+fn+tn, tp, fp, fn, tn, precision, recall)
}

func newDefault() validator.Validator {
	d, err := New(*DefaultConfig())
	if err != nil {
		panic(err)
	}
	return d
}

func readCorpusFile(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
	return string(b), err
}
