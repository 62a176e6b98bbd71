package catalog

import "testing"

func TestLookup(t *testing.T) {
	for _, s := range []string{"phi-3-mini", "Qwen2-1.5B-Instruct", "gemma-2-2b", "llama-guard-3-1b", "prompt-guard-2-22m", "qwen1.5-1.8b", "qwen2.5-1.5b"} {
		if _, err := Lookup(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := Lookup("gpt-5"); err == nil {
		t.Error("found gpt-5")
	}
}

// TestKVBytes pins the KV cache against the per-token figure each shape
// implies: 2 x layers x kv_heads x head_dim x 2 bytes.
func TestKVBytes(t *testing.T) {
	cases := []struct {
		id       string
		perToken uint64
	}{
		{"qwen2-1.5b", 2 * 28 * 2 * 128 * 2},      // 28 KiB
		{"phi-3-mini", 2 * 32 * 32 * 96 * 2},      // 384 KiB
		{"gemma-2-2b", 2 * 26 * 4 * 256 * 2},      // 104 KiB
		{"llama-guard-3-1b", 2 * 16 * 8 * 64 * 2}, // 32 KiB
		{"prompt-guard-2-86m", 0},                 // classifier
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			e, err := Lookup(c.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.KVBytes(4096, 2); got != c.perToken*4096 {
				t.Errorf("KV(4096) = %d, want %d", got, c.perToken*4096)
			}
		})
	}
}

func TestFits(t *testing.T) {
	cases := []struct {
		name   string
		budget uint64
		ctx    int
		fit    map[string]bool
	}{
		{"8GiB at 4k: all fit", 8 << 30, 4096, map[string]bool{"phi-3-mini": true, "gemma-2-2b": true, "prompt-guard-2-22m": true}},
		{"2GiB at 4k", 2 << 30, 4096, map[string]bool{"phi-3-mini": false, "qwen2-1.5b": true, "gemma-2-2b": false, "prompt-guard-2-22m": true}},
		{"2GiB at 32k: the KV cache grows, the classifier's window does not", 2 << 30, 32768,
			map[string]bool{"qwen2.5-1.5b": false, "prompt-guard-2-86m": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]Fit{}
			for _, f := range Fits(c.budget, c.ctx) {
				got[f.ID] = f
			}
			if len(got) != len(Entries) {
				t.Fatalf("%d fits for %d entries", len(got), len(Entries))
			}
			for id, want := range c.fit {
				if got[id].Fits != want {
					t.Errorf("%s fits = %v (memory %d, ctx %d), want %v", id, got[id].Fits, got[id].MemoryBytes, got[id].Ctx, want)
				}
			}
		})
	}
}

func TestEntriesSane(t *testing.T) {
	for _, e := range Entries {
		if e.Source == "" || e.Layers == 0 || e.Heads == 0 || e.HeadsKV == 0 || e.FileBytes == 0 || e.Ctx == 0 {
			t.Errorf("%s: incomplete entry %+v", e.ID, e)
		}
		if e.Runtime == Classifier && e.Note == "" {
			t.Errorf("%s: a classifier must say how it runs", e.ID)
		}
	}
}
