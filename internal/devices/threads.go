package devices

// MainReserve is how many physical cores a guard on the CPU leaves to the
// main server by default: its host threads (the CUDA/Vulkan submit loop,
// sampling, HTTP) need a core each. On the recorded 16-core H200 machine a
// guard with all 16 cores took 9.4 s per verdict beside a decoding main
// model (0.8 s alone), with 14 it took 0.76 s and the main model decoded
// faster too.
func MainReserve(cores int) int {
	switch {
	case cores <= 1:
		return 0
	case cores <= 3:
		return 1
	}
	return max(2, cores/16)
}

// GuardThreads is the default thread count (-t) of a guard server on the
// CPU beside a main server on the same machine: the physical cores less
// MainReserve, at least one.
func GuardThreads(cores int) int {
	return max(1, cores-MainReserve(cores))
}
