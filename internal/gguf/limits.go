package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Limits bound what Open accepts before the file reaches the parser.
//
// gguf-parser-go bounds counts and lengths by the bytes left in the file,
// which protects small files; a large (or sparse) file would still let a
// corrupt header ask for millions of keys or gigabyte strings. checkHeader
// is hand-written because the library has no hooks for such limits: it walks
// the metadata section once, reading lengths and skipping payloads, and
// refuses anything past these limits.
type Limits struct {
	MaxFileBytes   int64  // whole file; 0 = 1 TiB
	MaxKVs         uint64 // metadata pairs; 0 = 65,536
	MaxTensors     uint64 // tensor infos; 0 = 1,048,576
	MaxStringBytes uint64 // one string (key or value); 0 = 16 MiB (chat templates are tens of KiB)
	MaxArrayLen    uint64 // one array; 0 = 16,777,216 (tokenizer arrays hold ~10^5..10^6 items)
	MaxHeaderBytes int64  // metadata section; 0 = 512 MiB
}

// DefaultLimits are the limits Open uses when given the zero Limits.
var DefaultLimits = Limits{
	MaxFileBytes:   1 << 40,
	MaxKVs:         1 << 16,
	MaxTensors:     1 << 20,
	MaxStringBytes: 16 << 20,
	MaxArrayLen:    1 << 24,
	MaxHeaderBytes: 512 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxFileBytes > 0 {
		d.MaxFileBytes = l.MaxFileBytes
	}
	if l.MaxKVs > 0 {
		d.MaxKVs = l.MaxKVs
	}
	if l.MaxTensors > 0 {
		d.MaxTensors = l.MaxTensors
	}
	if l.MaxStringBytes > 0 {
		d.MaxStringBytes = l.MaxStringBytes
	}
	if l.MaxArrayLen > 0 {
		d.MaxArrayLen = l.MaxArrayLen
	}
	if l.MaxHeaderBytes > 0 {
		d.MaxHeaderBytes = l.MaxHeaderBytes
	}
	return d
}

// ErrLimit marks a file refused by Limits.
var ErrLimit = errors.New("gguf: header exceeds limit")

// minFileBytes is magic + version + tensor count + kv count (GGUF v2/v3).
const minFileBytes = 24

// checkHeader validates the fixed header and walks the metadata pairs of
// the file at path against l.
func checkHeader(path string, l Limits) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("gguf: %s is not a regular file", path)
	}
	if st.Size() < minFileBytes {
		return fmt.Errorf("gguf: %s: %d bytes is too short for a GGUF header", path, st.Size())
	}
	if st.Size() > l.MaxFileBytes {
		return fmt.Errorf("%w: %s is %d bytes (max %d)", ErrLimit, path, st.Size(), l.MaxFileBytes)
	}
	w := &walker{r: bufio.NewReaderSize(io.LimitReader(f, l.MaxHeaderBytes), 64<<10), l: l}
	var magic [4]byte
	if _, err := io.ReadFull(w.r, magic[:]); err != nil {
		return fmt.Errorf("gguf: %s: reading magic: %w", path, err)
	}
	if string(magic[:]) != "GGUF" {
		return fmt.Errorf("gguf: %s: not a GGUF file (magic %q)", path, magic[:])
	}
	version := w.u32()
	if w.err == nil && (version < 2 || version > 3) {
		return fmt.Errorf("gguf: %s: unsupported GGUF version %d", path, version)
	}
	tensors, kvs := w.u64(), w.u64()
	if w.err != nil {
		return fmt.Errorf("gguf: %s: %w", path, w.err)
	}
	if tensors > l.MaxTensors {
		return fmt.Errorf("%w: %s declares %d tensors (max %d)", ErrLimit, path, tensors, l.MaxTensors)
	}
	if kvs > l.MaxKVs {
		return fmt.Errorf("%w: %s declares %d metadata pairs (max %d)", ErrLimit, path, kvs, l.MaxKVs)
	}
	for i := uint64(0); i < kvs && w.err == nil; i++ {
		w.skipString()
		w.skipValue(w.u32(), 0)
	}
	if w.err != nil {
		return fmt.Errorf("gguf: %s: metadata: %w", path, w.err)
	}
	return nil
}

// walker reads little-endian GGUF values, remembering the first error.
type walker struct {
	r   *bufio.Reader
	l   Limits
	err error
}

func (w *walker) u32() uint32 {
	var b [4]byte
	w.read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

func (w *walker) u64() uint64 {
	var b [8]byte
	w.read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (w *walker) read(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := io.ReadFull(w.r, b); err != nil {
		w.err = fmt.Errorf("truncated header: %w", err)
	}
}

func (w *walker) skip(n uint64) {
	if w.err != nil {
		return
	}
	if _, err := w.r.Discard(int(n)); err != nil {
		w.err = fmt.Errorf("truncated header: %w", err)
	}
}

func (w *walker) skipString() {
	n := w.u64()
	if w.err != nil {
		return
	}
	if n > w.l.MaxStringBytes {
		w.err = fmt.Errorf("%w: string of %d bytes (max %d)", ErrLimit, n, w.l.MaxStringBytes)
		return
	}
	w.skip(n)
}

// fixedSize is the byte size of the scalar GGUF value types (gguf.h).
var fixedSize = map[uint32]uint64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

const (
	typeString = 8
	typeArray  = 9
	maxNesting = 2 // arrays of arrays are legal; deeper nesting is not used by any known writer
)

func (w *walker) skipValue(t uint32, depth int) {
	if w.err != nil {
		return
	}
	if n, ok := fixedSize[t]; ok {
		w.skip(n)
		return
	}
	switch t {
	case typeString:
		w.skipString()
	case typeArray:
		if depth >= maxNesting {
			w.err = fmt.Errorf("%w: arrays nested deeper than %d", ErrLimit, maxNesting)
			return
		}
		et, n := w.u32(), w.u64()
		if w.err != nil {
			return
		}
		if n > w.l.MaxArrayLen {
			w.err = fmt.Errorf("%w: array of %d items (max %d)", ErrLimit, n, w.l.MaxArrayLen)
			return
		}
		if sz, ok := fixedSize[et]; ok {
			w.skip(n * sz)
			return
		}
		for i := uint64(0); i < n && w.err == nil; i++ {
			w.skipValue(et, depth+1)
		}
	default:
		w.err = fmt.Errorf("unknown value type %d", t)
	}
}
