package synth

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Rewrite copies the GGUF file src to dst with its metadata changed: each
// KV in set replaces the pair of the same key or, when src has none, is
// appended. Tensor infos and tensor data are copied unchanged, so dst
// runs the same weights under the new name, chat template or tokenizer
// settings. It is how tests give a tiny real model the metadata of a model
// far too large to ship.
func Rewrite(src, dst string, set ...KV) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	r := &headerReader{r: bufio.NewReader(in), left: st.Size()}
	h, err := r.header()
	if err != nil {
		return fmt.Errorf("synth: %s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer out.Close()
	w := bufio.NewWriter(out)
	if err := h.write(w, set); err != nil {
		return fmt.Errorf("synth: %s: %w", dst, err)
	}
	// Skip the source's padding up to its data section, then copy the data.
	if _, err := io.CopyN(io.Discard, r.r, h.srcPad); err != nil {
		return fmt.Errorf("synth: %s: padding: %w", src, err)
	}
	if _, err := io.Copy(w, r.r); err != nil {
		return fmt.Errorf("synth: copy tensor data: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return out.Close()
}

// rawKV is one metadata pair as read: its key and the encoded type and
// value bytes.
type rawKV struct {
	key string
	val []byte
}

type header struct {
	version   uint32
	nTensors  uint64
	kvs       []rawKV
	tensors   []byte // tensor infos, verbatim
	alignment uint64
	srcPad    int64 // padding after the source header
}

// maxHeader bounds what Rewrite reads as metadata and tensor infos.
const maxHeader = 64 << 20

type headerReader struct {
	r    *bufio.Reader
	left int64
	pos  int64
	rec  []byte // when non-nil, bytes read are appended here
}

func (r *headerReader) read(n int64) ([]byte, error) {
	if n < 0 || n > r.left || r.pos+n > maxHeader {
		return nil, errors.New("header field runs past the end of the file or the header limit")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, err
	}
	r.left -= n
	r.pos += n
	if r.rec != nil {
		r.rec = append(r.rec, b...)
	}
	return b, nil
}

func (r *headerReader) u32() (uint32, error) {
	b, err := r.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *headerReader) u64() (uint64, error) {
	b, err := r.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *headerReader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(r.left) {
		return "", errors.New("string longer than the file")
	}
	b, err := r.read(int64(n))
	return string(b), err
}

// scalarSize is the encoded size of GGUF scalar value types (gguf.h):
// uint8, int8, uint16, int16, uint32, int32, float32, bool, -, -, uint64,
// int64, float64.
var scalarSize = map[uint32]int64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

// skipValue reads one value of type t.
func (r *headerReader) skipValue(t uint32, depth int) error {
	if n, ok := scalarSize[t]; ok {
		_, err := r.read(n)
		return err
	}
	switch t {
	case tString:
		_, err := r.str()
		return err
	case tArray:
		if depth > 2 {
			return errors.New("arrays nested too deep")
		}
		et, err := r.u32()
		if err != nil {
			return err
		}
		n, err := r.u64()
		if err != nil {
			return err
		}
		if n > uint64(r.left) {
			return errors.New("array longer than the file")
		}
		if sz, ok := scalarSize[et]; ok {
			_, err := r.read(int64(n) * sz)
			return err
		}
		for i := uint64(0); i < n; i++ {
			if err := r.skipValue(et, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown value type %d", t)
}

func (r *headerReader) header() (*header, error) {
	magic, err := r.read(4)
	if err != nil {
		return nil, err
	}
	if string(magic) != "GGUF" {
		return nil, errors.New("not a GGUF file")
	}
	h := &header{alignment: alignment}
	if h.version, err = r.u32(); err != nil {
		return nil, err
	}
	if h.version != 3 {
		return nil, fmt.Errorf("GGUF version %d, want 3", h.version)
	}
	if h.nTensors, err = r.u64(); err != nil {
		return nil, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, err
	}
	if nKV > uint64(r.left) || h.nTensors > uint64(r.left) {
		return nil, errors.New("counts larger than the file")
	}
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		r.rec = []byte{}
		t, err := r.u32()
		if err == nil {
			err = r.skipValue(t, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", key, err)
		}
		if key == "general.alignment" && t == tUint32 {
			h.alignment = uint64(binary.LittleEndian.Uint32(r.rec[4:]))
		}
		h.kvs = append(h.kvs, rawKV{key: key, val: r.rec})
		r.rec = nil
	}
	if h.alignment == 0 || h.alignment&(h.alignment-1) != 0 {
		return nil, fmt.Errorf("alignment %d is not a power of two", h.alignment)
	}
	r.rec = []byte{}
	for i := uint64(0); i < h.nTensors; i++ {
		if _, err := r.str(); err != nil {
			return nil, err
		}
		nd, err := r.u32()
		if err != nil {
			return nil, err
		}
		if nd > 8 {
			return nil, fmt.Errorf("tensor with %d dimensions", nd)
		}
		if _, err := r.read(int64(nd)*8 + 4 + 8); err != nil { // dims, type, offset
			return nil, err
		}
	}
	h.tensors, r.rec = r.rec, nil
	h.srcPad = int64((h.alignment - uint64(r.pos)%h.alignment) % h.alignment)
	return h, nil
}

// write writes the header with set applied, padded to the alignment.
func (h *header) write(w io.Writer, set []KV) error {
	var b []byte
	le := binary.LittleEndian
	str := func(s string) {
		b = le.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	enc := func(v any) ([]byte, error) {
		var buf bytes.Buffer
		if err := writeValue(&buf, v); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	done := map[string]bool{}
	var kvs []rawKV
	for _, kv := range h.kvs {
		for _, s := range set {
			if s.Key == kv.key {
				v, err := enc(s.Value)
				if err != nil {
					return fmt.Errorf("key %s: %w", s.Key, err)
				}
				kv.val, done[s.Key] = v, true
			}
		}
		kvs = append(kvs, kv)
	}
	for _, s := range set {
		if done[s.Key] {
			continue
		}
		v, err := enc(s.Value)
		if err != nil {
			return fmt.Errorf("key %s: %w", s.Key, err)
		}
		kvs = append(kvs, rawKV{key: s.Key, val: v})
		done[s.Key] = true
	}
	b = append(b, "GGUF"...)
	b = le.AppendUint32(b, h.version)
	b = le.AppendUint64(b, h.nTensors)
	b = le.AppendUint64(b, uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.key)
		b = append(b, kv.val...)
	}
	b = append(b, h.tensors...)
	for uint64(len(b))%h.alignment != 0 {
		b = append(b, 0)
	}
	_, err := w.Write(b)
	return err
}
