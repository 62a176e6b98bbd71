package chunkscan

import "bytes"

// A Memo reads one stream's chunks, remembering the last chunk it read in
// full. A server sends almost every chunk of an answer with the same
// bytes around its text: the same keys in the same order, the same id,
// model and timestamp. A chunk whose bytes equal the remembered chunk's
// before and after its text string, and whose text is a valid JSON string
// in between, reads exactly as the remembered one did with the text
// replaced: the grammar of JSON gives one string token the same place
// whatever it holds, and no other field depends on the text. Such a chunk
// costs two byte comparisons and a scan of its string, not a walk of its
// whole structure; any other chunk is read by Scan and remembered.
//
// The zero Memo is ready to use. A Memo is not safe for concurrent use.
type Memo struct {
	f    Format
	prev []byte // the last chunk read in full (a copy)
	out  Fields // what Scan found in it
	ok   bool   // prev and out hold a chunk with a text or reasoning string
	// reasoning: the string that varies is the reasoning (a chunk with
	// reasoning and no text), else the text.
	reasoning bool

	reused bool // the last chunk was read from the remembered one
}

// Scan reads the chunk p in format f into out, as the package's Scan does.
func (m *Memo) Scan(f Format, p []byte, out *Fields) error {
	if m.reused = m.ok && m.f == f && m.reuse(p, out); m.reused {
		return nil
	}
	m.ok = false
	if err := Scan(f, p, out); err != nil {
		return err
	}
	if out.Text.Present() || out.Reasoning.Present() {
		m.f, m.prev, m.out, m.ok = f, append(m.prev[:0], p...), *out, true
		m.reasoning = !out.Text.Present()
	}
	return nil
}

// Reused reports whether the last chunk Scan read was read from the
// remembered one: its bytes outside its text are those of a chunk read
// before, so a caller that vetted that chunk's bytes need vet only this
// one's text.
func (m *Memo) Reused() bool { return m.reused }

// reuse reads p from the remembered chunk when only its text differs.
func (m *Memo) reuse(p []byte, out *Fields) bool {
	t := m.out.Text
	if m.reasoning {
		t = m.out.Reasoning
	}
	// The bytes up to and with the text's opening quote.
	if len(p) <= t.Start || !bytes.Equal(p[:t.Start+1], m.prev[:t.Start+1]) {
		return false
	}
	s := scanner{p: p, i: t.Start}
	sp, _, err := s.str()
	if err != nil || !bytes.Equal(p[sp.End:], m.prev[t.End:]) {
		return false
	}
	*out = m.out
	d := sp.End - t.End
	for _, v := range [...]*Span{&out.Text, &out.Reasoning, &out.ToolCalls, &out.FunctionCall, &out.FinishReason, &out.Error, &out.ID, &out.Model, &out.Fingerprint, &out.CreatedAt} {
		if v.Present() && v.Start >= t.End {
			v.Start += d
			v.End += d
		}
	}
	if m.reasoning {
		out.Reasoning = sp
	} else {
		out.Text = sp
	}
	return true
}
