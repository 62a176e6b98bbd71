package store

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkAdd measures one committed incident (WAL, synchronous=NORMAL),
// the recorder's cost per retry or halt.
func BenchmarkAdd(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	inc := sample(0)
	b.ReportAllocs()
	for b.Loop() {
		inc.ID = 0
		if _, err := s.Add(context.Background(), inc); err != nil {
			b.Fatal(err)
		}
	}
}
