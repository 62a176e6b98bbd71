package synth_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/gguf"
	"github.com/aegis-sentinel/aegis/internal/gguf/synth"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestRewriteKeepsWeights gives the stories260K weights a new name and
// chat template: the metadata reads back changed, every other key and
// the tensor data are the source's.
func TestRewriteKeepsWeights(t *testing.T) {
	src := testbed.Shared(t, "models/stories260K.gguf")
	dst := filepath.Join(t.TempDir(), "guard.gguf")
	tpl := "{% for m in messages %}{{ m.content }}{% endfor %}"
	if err := synth.Rewrite(src, dst,
		synth.KV{Key: "general.name", Value: "Llama Guard 3 1B"},
		synth.KV{Key: "general.basename", Value: "Llama-Guard-3"},
		synth.KV{Key: "tokenizer.chat_template", Value: tpl}); err != nil {
		t.Fatal(err)
	}
	a, err := gguf.Open(src, gguf.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := gguf.Open(dst, gguf.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "Llama Guard 3 1B" || b.Basename != "Llama-Guard-3" || b.ChatTemplate != tpl {
		t.Fatalf("metadata not rewritten: %q %q %q", b.Name, b.Basename, b.ChatTemplate)
	}
	if a.Architecture != b.Architecture || a.Parameters != b.Parameters || a.Vocab != b.Vocab || a.WeightsBytes != b.WeightsBytes {
		t.Fatalf("model changed: %+v vs %+v", a, b)
	}
	sd, _ := os.ReadFile(src)
	dd, _ := os.ReadFile(dst)
	tail := int(a.WeightsBytes)
	if !bytes.Equal(sd[len(sd)-tail:], dd[len(dd)-tail:]) {
		t.Fatal("tensor data differs")
	}
	// Rewriting again replaces the keys instead of adding them twice.
	again := filepath.Join(t.TempDir(), "again.gguf")
	if err := synth.Rewrite(dst, again, synth.KV{Key: "general.name", Value: "x"}); err != nil {
		t.Fatal(err)
	}
	c, err := gguf.Open(again, gguf.Limits{})
	if err != nil || c.Name != "x" || c.ChatTemplate != tpl {
		t.Fatalf("second rewrite: %v %+v", err, c)
	}
}

func TestRewriteRejectsNonGGUF(t *testing.T) {
	src := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(src, []byte("GGML not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := synth.Rewrite(src, filepath.Join(t.TempDir(), "y.gguf")); err == nil {
		t.Fatal("accepted a non-GGUF file")
	}
}

// FuzzRewrite: any file either rewrites or fails with an error, never a
// panic or an allocation past the file's size.
func FuzzRewrite(f *testing.F) {
	if src, err := testbed.FindShared("models/stories260K.gguf"); err == nil {
		if b, err := os.ReadFile(src); err == nil {
			f.Add(b[:4096])
			f.Add(b[:64])
		}
	}
	f.Add([]byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		src := filepath.Join(dir, "in.gguf")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = synth.Rewrite(src, filepath.Join(dir, "out.gguf"), synth.KV{Key: "general.name", Value: "x"})
	})
}
