// Package synth writes small synthetic GGUF files for tests: a header with
// metadata and tensor infos, followed by a sparse (hole-filled) data section
// of the size the tensor infos declare, so a 70B model costs a few kilobytes
// of disk.
//
// It exists because the GGUF parser Aegis uses (gpustack/gguf-parser-go)
// reads but does not write GGUF, and the tests need headers of models far
// too large to ship. It writes GGUF v3, little endian, alignment 32.
package synth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

// GGML tensor type ids and their block layout (elements per block, bytes
// per block), from ggml.h / ggml.c.
const (
	F32  uint32 = 0
	F16  uint32 = 1
	Q4_0 uint32 = 2
	Q8_0 uint32 = 8
	Q4_K uint32 = 12
	Q6_K uint32 = 14
)

var blockLayout = map[uint32][2]uint64{
	F32:  {1, 4},
	F16:  {1, 2},
	Q4_0: {32, 18},
	Q8_0: {32, 34},
	Q4_K: {256, 144},
	Q6_K: {256, 210},
}

// Tensor is one tensor info: name, dimensions (ne0 first) and type.
type Tensor struct {
	Name string
	Dims []uint64
	Type uint32
}

// Bytes is the data size of t.
func (t Tensor) Bytes() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	l := blockLayout[t.Type]
	return n / l[0] * l[1]
}

// KV is one metadata pair; Value is uint32, uint64, int32, float32, bool,
// string, []string, []int32 or []float32.
type KV struct {
	Key   string
	Value any
}

// File is a GGUF file to write.
type File struct {
	KVs     []KV
	Tensors []Tensor
}

const alignment = 32

// Write writes f to path and returns the size of the file.
func (f File) Write(path string) (int64, error) {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString("GGUF")
	_ = binary.Write(&b, le, uint32(3))
	_ = binary.Write(&b, le, uint64(len(f.Tensors)))
	_ = binary.Write(&b, le, uint64(len(f.KVs)))
	for _, kv := range f.KVs {
		writeString(&b, kv.Key)
		if err := writeValue(&b, kv.Value); err != nil {
			return 0, fmt.Errorf("synth: key %s: %w", kv.Key, err)
		}
	}
	var off uint64
	for _, t := range f.Tensors {
		if _, ok := blockLayout[t.Type]; !ok {
			return 0, fmt.Errorf("synth: tensor %s: unknown type %d", t.Name, t.Type)
		}
		writeString(&b, t.Name)
		_ = binary.Write(&b, le, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			_ = binary.Write(&b, le, d)
		}
		_ = binary.Write(&b, le, t.Type)
		_ = binary.Write(&b, le, off)
		off += pad(t.Bytes())
	}
	for b.Len()%alignment != 0 {
		b.WriteByte(0)
	}
	out, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	defer out.Close()
	if _, err := out.Write(b.Bytes()); err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	size := int64(b.Len()) + int64(off)
	if err := out.Truncate(size); err != nil { // sparse data section
		return 0, fmt.Errorf("synth: %w", err)
	}
	return size, out.Close()
}

func pad(n uint64) uint64 { return (n + alignment - 1) / alignment * alignment }

func writeString(b *bytes.Buffer, s string) {
	_ = binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

// GGUF metadata value type ids (gguf.h).
const (
	tUint32  = 4
	tInt32   = 5
	tFloat32 = 6
	tBool    = 7
	tString  = 8
	tArray   = 9
	tUint64  = 10
)

func writeValue(b *bytes.Buffer, v any) error {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint32:
		_ = binary.Write(b, le, uint32(tUint32))
		_ = binary.Write(b, le, x)
	case int:
		if x < 0 || x > math.MaxUint32 {
			return fmt.Errorf("int %d out of uint32 range", x)
		}
		_ = binary.Write(b, le, uint32(tUint32))
		_ = binary.Write(b, le, uint32(x))
	case int32:
		_ = binary.Write(b, le, uint32(tInt32))
		_ = binary.Write(b, le, x)
	case uint64:
		_ = binary.Write(b, le, uint32(tUint64))
		_ = binary.Write(b, le, x)
	case float32:
		_ = binary.Write(b, le, uint32(tFloat32))
		_ = binary.Write(b, le, x)
	case bool:
		_ = binary.Write(b, le, uint32(tBool))
		_ = binary.Write(b, le, x)
	case string:
		_ = binary.Write(b, le, uint32(tString))
		writeString(b, x)
	case []string:
		_ = binary.Write(b, le, uint32(tArray))
		_ = binary.Write(b, le, uint32(tString))
		_ = binary.Write(b, le, uint64(len(x)))
		for _, s := range x {
			writeString(b, s)
		}
	case []int32:
		_ = binary.Write(b, le, uint32(tArray))
		_ = binary.Write(b, le, uint32(tInt32))
		_ = binary.Write(b, le, uint64(len(x)))
		_ = binary.Write(b, le, x)
	case []float32:
		_ = binary.Write(b, le, uint32(tArray))
		_ = binary.Write(b, le, uint32(tFloat32))
		_ = binary.Write(b, le, uint64(len(x)))
		_ = binary.Write(b, le, x)
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}
