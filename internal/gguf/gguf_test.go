package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/gguf"
	"github.com/aegis-sentinel/aegis/internal/gguf/synth"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestOpenSharedModels checks the header facts against SOURCE.md (which a
// separate standalone parser produced) and the KV cache against llama.cpp's
// formula: 2 (K and V) x layers x kv_heads x head_dim x cells x 2 bytes.
func TestOpenSharedModels(t *testing.T) {
	dir := testbed.Shared(t, "models")
	cases := []struct {
		file                                string
		arch, ftype                         string
		layers, heads, headsKV, embd, vocab uint64
		ctx, weights                        uint64
		kvAt2048                            uint64
	}{
		{"stories260K.gguf", "llama", "F32", 5, 8, 4, 64, 512, 2048, 1171200, 2 * 5 * 4 * 8 * 2048 * 2},
		{"llama-2-tiny-random.gguf", "llama", "F16", 1, 2, 2, 8, 32000, 4096, 1026144, 2 * 1 * 2 * 4 * 2048 * 2},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			m, err := gguf.Open(filepath.Join(dir, c.file), gguf.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			got := []uint64{m.Layers, m.Heads, m.HeadsKV, m.Embedding, m.Vocab, m.ContextLength, m.WeightsBytes}
			want := []uint64{c.layers, c.heads, c.headsKV, c.embd, c.vocab, c.ctx, c.weights}
			names := []string{"layers", "heads", "heads_kv", "embedding", "vocab", "context", "weights"}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s = %d, want %d", names[i], got[i], want[i])
				}
			}
			if m.Architecture != c.arch || m.FileType != c.ftype {
				t.Errorf("arch/ftype = %s/%s, want %s/%s", m.Architecture, m.FileType, c.arch, c.ftype)
			}
			if kv := m.KVBytes(2048, gguf.KVF16); kv != c.kvAt2048 {
				t.Errorf("KVBytes(2048,f16) = %d, want %d", kv, c.kvAt2048)
			}
			if q8, f16 := m.KVBytes(2048, gguf.KVQ8_0), m.KVBytes(2048, gguf.KVF16); q8 >= f16 {
				t.Errorf("q8_0 KV %d not below f16 %d", q8, f16)
			}
		})
	}
}

func TestOpenSynthetic(t *testing.T) {
	cases := []struct {
		name    string
		m       synth.Model
		experts uint32
		nextn   uint32
	}{
		{"llama70b", synth.Llama70B(), 0, 0},
		{"qwen3moe", synth.Qwen3MoE30B(), 128, 0},
		{"glm4moe-mtp", synth.GLM4MoEMTP(), 128, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.name+".gguf")
			size, err := c.m.Write(p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := gguf.Open(p, gguf.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Layers != uint64(c.m.Layers) || m.Heads != uint64(c.m.Heads) || m.HeadsKV != uint64(c.m.HeadsKV) ||
				m.Vocab != uint64(c.m.Vocab) || m.ContextLength != uint64(c.m.Ctx) || m.Architecture != c.m.Arch {
				t.Errorf("facts = %+v", m)
			}
			if m.Experts != c.experts || m.NextNLayers != c.nextn {
				t.Errorf("experts/nextn = %d/%d, want %d/%d", m.Experts, m.NextNLayers, c.experts, c.nextn)
			}
			if m.FileBytes != uint64(size) || m.WeightsBytes == 0 || m.WeightsBytes > m.FileBytes {
				t.Errorf("file %d weights %d (written %d)", m.FileBytes, m.WeightsBytes, size)
			}
			var sum uint64
			for _, b := range m.LayerBytes {
				sum += b
			}
			if sum+m.OutputBytes+m.InputBytes > m.WeightsBytes || sum == 0 {
				t.Errorf("layer bytes %d + out %d + in %d vs weights %d", sum, m.OutputBytes, m.InputBytes, m.WeightsBytes)
			}
			if (c.experts > 0) != (m.LayerExpertBytes[0] > 0) {
				t.Errorf("expert bytes of layer 0 = %d", m.LayerExpertBytes[0])
			}
		})
	}
}

// TestLlama70BKV pins the KV cache of the 70B shape: 80 layers x 8 KV
// heads x 128 dims x 2 (K,V) x 2 bytes = 320 KiB per token in f16.
func TestLlama70BKV(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l70.gguf")
	if _, err := synth.Llama70B().Write(p); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.Open(p, gguf.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.KVBytes(8192, gguf.KVF16), uint64(80*8*128*2*2*8192); got != want {
		t.Errorf("KV(8192,f16) = %d, want %d", got, want)
	}
}

func TestMTPSibling(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "model.gguf")
	if _, err := synth.Dense8B().Write(target); err != nil {
		t.Fatal(err)
	}
	if got, _ := gguf.MTPSibling(target); len(got) != 0 {
		t.Fatalf("siblings before = %v", got)
	}
	head := filepath.Join(dir, "mtp-model.gguf")
	if _, err := synth.MTPHead().Write(head); err != nil {
		t.Fatal(err)
	}
	got, err := gguf.MTPSibling(target)
	if err != nil || len(got) != 1 || got[0] != head {
		t.Fatalf("siblings = %v, %v", got, err)
	}
}

// header builds a GGUF v3 prefix with the given counts and raw metadata.
func header(tensors, kvs uint64, meta []byte) []byte {
	var b bytes.Buffer
	b.WriteString("GGUF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(3))
	_ = binary.Write(&b, binary.LittleEndian, tensors)
	_ = binary.Write(&b, binary.LittleEndian, kvs)
	b.Write(meta)
	return b.Bytes()
}

func kvString(key string, valLen uint64) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(key)))
	b.WriteString(key)
	_ = binary.Write(&b, binary.LittleEndian, uint32(8))
	_ = binary.Write(&b, binary.LittleEndian, valLen)
	return b.Bytes()
}

func TestLimits(t *testing.T) {
	small := gguf.Limits{MaxKVs: 4, MaxTensors: 4, MaxStringBytes: 64, MaxArrayLen: 8}
	cases := []struct {
		name    string
		data    []byte
		sparse  int64 // extend the file to this size with a hole
		lim     gguf.Limits
		isLimit bool
	}{
		{"too many kvs", header(0, 5, nil), 0, small, true},
		{"too many tensors", header(5, 0, nil), 0, small, true},
		{"huge string in sparse file", header(0, 1, kvString("general.name", 1<<40)), 1 << 30, gguf.Limits{}, true},
		{"string over limit", header(0, 1, kvString("general.name", 65)), 4096, small, true},
		{"file too large", header(0, 0, nil), 1 << 20, gguf.Limits{MaxFileBytes: 1 << 10}, true},
		{"bad magic", []byte("GGML\x03\x00\x00\x00xxxxxxxxxxxxxxxx"), 0, gguf.Limits{}, false},
		{"short", []byte("GGUF"), 0, gguf.Limits{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.gguf")
			if err := os.WriteFile(p, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.sparse > 0 {
				if err := os.Truncate(p, c.sparse); err != nil {
					t.Fatal(err)
				}
			}
			_, err := gguf.Open(p, c.lim)
			if err == nil {
				t.Fatal("Open accepted a bad header")
			}
			if errors.Is(err, gguf.ErrLimit) != c.isLimit {
				t.Errorf("err = %v, want limit error %v", err, c.isLimit)
			}
		})
	}
}

func TestParseKVType(t *testing.T) {
	for _, s := range []string{"f16", "q8_0", "Q4_0"} {
		if _, err := gguf.ParseKVType(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := gguf.ParseKVType("turbo3"); err == nil {
		t.Error("accepted turbo3")
	}
}

// FuzzOpen feeds random bytes (seeded with real and synthetic headers) to
// the limited parser: it must return, not panic or hang.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed.gguf")
	tiny := synth.Model{Arch: "llama", Name: "t", Layers: 1, Embd: 32, Heads: 2, HeadsKV: 1, FF: 32, Vocab: 8,
		Ctx: 64, WeightType: synth.F16}
	if _, err := tiny.Write(p); err == nil {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	models, _ := testbed.FindShared("models") // seeds from the real models when they are there
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		if b, err := os.ReadFile(filepath.Join(models, name)); err == nil {
			f.Add(b[:min(len(b), 4096)])
		}
	}
	f.Add(header(0, 1, kvString("general.name", 1<<40)))
	f.Add(header(1<<40, 1<<40, nil))
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		p := filepath.Join(t.TempDir(), "f.gguf")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := gguf.Open(p, gguf.Limits{})
		if err == nil {
			_ = m.KVBytes(128, gguf.KVF16)
			_ = m.ComputeBytes(128)
		}
	})
}

// BenchmarkOpen measures reading a header (limits pre-walk + parse), the
// cost aegis plan pays per model.
func BenchmarkOpen(b *testing.B) {
	p := filepath.Join(b.TempDir(), "l70.gguf")
	if _, err := synth.Llama70B().Write(p); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := gguf.Open(p, gguf.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
