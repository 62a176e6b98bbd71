package chunkscan

import (
	"encoding/json"
	"testing"
)

// llamaServerChunk is a text chunk as llama-server sends it, with its
// full-length id, model path and fingerprint.
const llamaServerChunk = `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" the"}}],"created":1795327087,"id":"chatcmpl-aAr2tR6EEXEjlKbXoXfgzcMlpz4QL31T","model":"/work/shared/models/stories260K.gguf","system_fingerprint":"b11669-Debian","object":"chat.completion.chunk"}`

// BenchmarkScan reads the text of one chunk into a reused buffer, by
// format; the encoding/json rows decode the same chunk into the reference
// structs, for comparison.
func BenchmarkScan(b *testing.B) {
	for _, bc := range []struct {
		name string
		f    Format
		in   string
	}{
		{"chat-plain", Chat, cases[1].in},
		{"chat-llama-server", Chat, llamaServerChunk},
		{"chat-escapes", Chat, cases[2].in},
		{"completions", Completions, cases[16].in},
		{"ollama-chat", Ollama, cases[19].in},
	} {
		p := []byte(bc.in)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			buf := make([]byte, 0, 256)
			var f Fields
			for b.Loop() {
				if err := Scan(bc.f, p, &f); err != nil {
					b.Fatal(err)
				}
				buf = AppendString(buf[:0], p, f.Text)
			}
		})
		b.Run(bc.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				var err error
				if bc.f == Ollama {
					var o refOllama
					err = json.Unmarshal(p, &o)
				} else {
					var o refOpenAI
					err = json.Unmarshal(p, &o)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
