package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// writeAllocProfile writes the allocations made since the start (the
// allocs profile: alloc_space, alloc_objects) to path; a failure is
// reported on stdio's error stream, the server having stopped already.
func writeAllocProfile(path string, stdio *IO) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stdio.Err, "memory profile %s: %v\n", path, err)
	}
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
