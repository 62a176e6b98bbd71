// Package validatortest holds test helpers shared by the check packages
// under internal/validator: feeding a text through a Validator in different
// splits and checking the contract of the Validator interface (split
// independence, a monotonic release point, no finding before a point
// already settled); and Guard, the guard model's check with a scripted
// judge, for the lifecycle tests of the pipeline and the gateway.
package validatortest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Run feeds text to v in the given pieces (sizes that sum to len(text);
// the remainder, if any, is fed last), closes it and returns its findings
// and final Settled. It checks the contract on the way: Write returns
// len(p), Settled never decreases and never passes the bytes written,
// and no finding starts before a point that was already settled.
func Run(t testing.TB, v validator.Validator, text string, sizes []int) ([]validator.Finding, int) {
	t.Helper()
	off, prevSettled := 0, 0
	check := func(stage string) {
		t.Helper()
		s := v.Settled()
		if s < prevSettled {
			t.Fatalf("%s: Settled went back from %d to %d at offset %d", stage, prevSettled, s, off)
		}
		if s > off {
			t.Fatalf("%s: Settled %d is past the %d bytes written", stage, s, off)
		}
		for _, f := range v.Findings() {
			if f.Start < 0 || f.End < f.Start || f.End > off {
				t.Fatalf("%s: finding %+v out of range of %d bytes", stage, f, off)
			}
		}
		prevSettled = s
	}
	feed := func(p string) {
		t.Helper()
		before := v.Findings()
		n, err := v.Write([]byte(p))
		if n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", p, n, err, len(p))
		}
		off += len(p)
		for _, f := range v.Findings()[len(before):] {
			if f.Start < prevSettled {
				t.Fatalf("finding %+v starts before settled point %d", f, prevSettled)
			}
		}
		check("write")
	}
	for _, n := range sizes {
		if off+n > len(text) {
			n = len(text) - off
		}
		feed(text[off : off+n])
	}
	if off < len(text) {
		feed(text[off:])
	}
	before := len(v.Findings())
	v.Close()
	fs := v.Findings()
	for _, f := range fs[before:] {
		if f.Start < prevSettled {
			t.Fatalf("finding %+v at Close starts before settled point %d", f, prevSettled)
		}
	}
	check("close")
	s := v.Settled()
	if len(fs) == 0 && s != len(text) {
		t.Fatalf("after Close with no findings Settled = %d, want %d", s, len(text))
	}
	return fs, s
}

// Splits returns the piece sizes SplitIndependent tries on a text of n
// bytes, keyed by a name for messages: whole, byte by byte, fixed
// 16-byte chunks (about 4 tokens) and several seeded random splits.
func Splits(n int) map[string][]int {
	out := map[string][]int{"whole": {n}}
	bytes := make([]int, n)
	for i := range bytes {
		bytes[i] = 1
	}
	out["bytewise"] = bytes
	var sixteen []int
	for i := 0; i < n; i += 16 {
		sixteen = append(sixteen, 16)
	}
	out["chunks16"] = sixteen
	for seed := uint64(1); seed <= 5; seed++ {
		r := rand.New(rand.NewPCG(seed, seed*7919))
		var s []int
		for left := n; left > 0; {
			k := 1 + r.IntN(24)
			if k > left {
				k = left
			}
			s = append(s, k)
			left -= k
		}
		out[fmt.Sprintf("random%d", seed)] = s
	}
	return out
}

// SplitIndependent feeds text through fresh validators from newFn whole,
// byte by byte, in 16-byte chunks and in random splits, and fails the test
// unless every split gives the same findings (and, for a passing text,
// the same final Settled) as the whole text. It returns the findings of the whole text so callers
// can assert on them too.
func SplitIndependent(t testing.TB, newFn func() validator.Validator, text string) []validator.Finding {
	t.Helper()
	want, wantSettled := Run(t, newFn(), text, []int{len(text)})
	for name, sizes := range Splits(len(text)) {
		got, gotSettled := Run(t, newFn(), text, sizes)
		// The final Settled of a failing output depends on when the
		// failure was seen and is not part of the contract; compare it
		// only for passing outputs.
		if !reflect.DeepEqual(normalize(got), normalize(want)) || len(want) == 0 && gotSettled != wantSettled {
			t.Fatalf("split %s of %q:\n got %+v (settled %d)\nwant %+v (settled %d)", name, text, got, gotSettled, want, wantSettled)
		}
	}
	return want
}

func normalize(fs []validator.Finding) []validator.Finding {
	if len(fs) == 0 {
		return nil
	}
	return fs
}

// Golden compares got with the file testdata/<name> and rewrites the file
// instead when update is true (wire it to a -update test flag).
func Golden(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file %s: %v (run the test with -update to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from %s (run with -update after checking the change):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
