package devices

import (
	"regexp"
	"strings"
)

// Backend is a llama.cpp compute backend.
type Backend string

// The backends Aegis knows how to pin a guard server to.
const (
	BackendCPU    Backend = "CPU"
	BackendCUDA   Backend = "CUDA"
	BackendROCm   Backend = "ROCm"
	BackendVulkan Backend = "Vulkan"
	BackendSYCL   Backend = "SYCL"
	BackendMetal  Backend = "Metal"
)

// Class is where a device sits in the hardware table: what to expect from it
// as a sidecar for a small guard model. The label is stable (machines read
// it); the note is for people.
type Class struct {
	Label    string    `json:"label"`
	Note     string    `json:"note"`
	Backends []Backend `json:"backends"`
}

// The class labels. A guard device is chosen by measurement (aegis bench
// sentinel), never by class alone; the class only says what to expect.
const (
	ClassCPU         = "cpu"
	ClassUHD         = "intel-uhd"
	ClassIrisXe      = "intel-iris-xe"
	ClassArcIGPU     = "intel-arc-igpu"
	ClassArcDGPU     = "intel-arc-dgpu"
	ClassRadeon760M  = "amd-760m"
	ClassRadeon780M  = "amd-780m"
	ClassRadeon890M  = "amd-890m"
	ClassStrixHalo   = "amd-strix-halo"
	ClassRTX         = "nvidia-rtx"
	ClassNVIDIADC    = "nvidia-datacenter"
	ClassNVIDIA      = "nvidia-gpu"
	ClassAMDInstinct = "amd-instinct"
	ClassIntelDC     = "intel-datacenter"
	ClassApple       = "apple"
	ClassSoftware    = "software"
	ClassUnknownIGPU = "unknown-igpu"
	ClassUnknownDGPU = "unknown-dgpu"
	ClassUnknown     = "unknown"
)

var classes = map[string]Class{
	ClassCPU:         {ClassCPU, "serious baseline for a 1-3B guard at batch size 1; every other device is measured against it", []Backend{BackendCPU}},
	ClassUHD:         {ClassUHD, "Intel UHD 730/770: likely weak, often slower than the CPU and worse in tok/J", []Backend{BackendVulkan, BackendSYCL}},
	ClassIrisXe:      {ClassIrisXe, "Intel Iris Xe: lower bound worth testing", []Backend{BackendVulkan, BackendSYCL}},
	ClassArcIGPU:     {ClassArcIGPU, "Core Ultra / Lunar Lake Arc iGPU: plausible, backend-sensitive (SYCL vs Vulkan)", []Backend{BackendSYCL, BackendVulkan}},
	ClassArcDGPU:     {ClassArcDGPU, "Intel Arc discrete GPU: a real second GPU, good guard candidate", []Backend{BackendSYCL, BackendVulkan}},
	ClassRadeon760M:  {ClassRadeon760M, "Radeon 760M: maybe", []Backend{BackendVulkan, BackendROCm}},
	ClassRadeon780M:  {ClassRadeon780M, "Radeon 780M: plausible lower bound", []Backend{BackendVulkan, BackendROCm}},
	ClassRadeon890M:  {ClassRadeon890M, "Radeon 880M/890M (Ryzen AI 300): stronger candidate", []Backend{BackendVulkan, BackendROCm}},
	ClassStrixHalo:   {ClassStrixHalo, "Ryzen AI Max Radeon 8050S/8060S: serious UMA class", []Backend{BackendVulkan, BackendROCm}},
	ClassRTX:         {ClassRTX, "NVIDIA RTX discrete GPU: main engine, not the sidecar", []Backend{BackendCUDA, BackendVulkan}},
	ClassNVIDIADC:    {ClassNVIDIADC, "NVIDIA datacenter GPU (A100, H100, H200, L40S class): the main model's engine with memory to spare; the guard goes beside it only if measured not to slow it", []Backend{BackendCUDA, BackendVulkan}},
	ClassNVIDIA:      {ClassNVIDIA, "NVIDIA discrete GPU not in the table: a main engine; measure before putting the guard on it", []Backend{BackendCUDA, BackendVulkan}},
	ClassAMDInstinct: {ClassAMDInstinct, "AMD Instinct datacenter GPU: the main model's engine (ROCm)", []Backend{BackendROCm, BackendVulkan}},
	ClassIntelDC:     {ClassIntelDC, "Intel datacenter GPU (Max, Flex): a main engine (SYCL)", []Backend{BackendSYCL, BackendVulkan}},
	ClassApple:       {ClassApple, "Apple GPU: unified memory, shares the main model's GPU", []Backend{BackendMetal}},
	ClassSoftware:    {ClassSoftware, "not a real GPU: software rasterizer on the CPU, slower than the CPU backend", []Backend{BackendVulkan}},
	ClassUnknownIGPU: {ClassUnknownIGPU, "integrated GPU not in the table: measure before use", []Backend{BackendVulkan}},
	ClassUnknownDGPU: {ClassUnknownDGPU, "discrete GPU not in the table: measure before use", []Backend{BackendVulkan}},
	ClassUnknown:     {ClassUnknown, "unknown device: measure before use", nil},
}

// ClassByLabel returns the class with label, or the unknown class.
func ClassByLabel(label string) Class {
	if c, ok := classes[label]; ok {
		return c
	}
	return classes[ClassUnknown]
}

// PCI vendor ids.
const (
	VendorIntel  = 0x8086
	VendorAMD    = 0x1002
	VendorNVIDIA = 0x10de
)

// pciName is one entry of the built-in table: public PCI ids of the GPU
// classes the hardware table names. pci.ids (via jaypipes/pcidb) is the
// fallback for names; the class comes only from this table.
type pciName struct {
	name       string
	class      string
	integrated bool
}

var pciTable = map[[2]uint16]pciName{
	// Intel UHD 730/770 (Rocket Lake, Alder Lake-S, Raptor Lake-S).
	{VendorIntel, 0x4c8b}: {"Intel UHD Graphics 730 (Rocket Lake)", ClassUHD, true},
	{VendorIntel, 0x4692}: {"Intel UHD Graphics 730 (Alder Lake-S)", ClassUHD, true},
	{VendorIntel, 0x4680}: {"Intel UHD Graphics 770 (Alder Lake-S)", ClassUHD, true},
	{VendorIntel, 0xa780}: {"Intel UHD Graphics 770 (Raptor Lake-S)", ClassUHD, true},
	{VendorIntel, 0xa782}: {"Intel UHD Graphics 730 (Raptor Lake-S)", ClassUHD, true},
	// Iris Xe (Tiger Lake, Alder Lake-P, Raptor Lake-P).
	{VendorIntel, 0x9a49}: {"Intel Iris Xe Graphics (Tiger Lake)", ClassIrisXe, true},
	{VendorIntel, 0x9a40}: {"Intel Iris Xe Graphics (Tiger Lake)", ClassIrisXe, true},
	{VendorIntel, 0x46a6}: {"Intel Iris Xe Graphics (Alder Lake-P)", ClassIrisXe, true},
	{VendorIntel, 0xa7a0}: {"Intel Iris Xe Graphics (Raptor Lake-P)", ClassIrisXe, true},
	// Core Ultra Arc iGPUs: Meteor Lake, Arrow Lake, Lunar Lake.
	{VendorIntel, 0x7d55}: {"Intel Arc Graphics (Meteor Lake)", ClassArcIGPU, true},
	{VendorIntel, 0x7dd5}: {"Intel Arc Graphics (Meteor Lake)", ClassArcIGPU, true},
	{VendorIntel, 0x7d45}: {"Intel Graphics (Meteor Lake-U)", ClassArcIGPU, true},
	{VendorIntel, 0x7d51}: {"Intel Arc Graphics (Arrow Lake-H)", ClassArcIGPU, true},
	{VendorIntel, 0x7dd1}: {"Intel Arc Graphics (Arrow Lake-H)", ClassArcIGPU, true},
	{VendorIntel, 0x7d67}: {"Intel Graphics (Arrow Lake-S)", ClassArcIGPU, true},
	{VendorIntel, 0x64a0}: {"Intel Arc 130V/140V (Lunar Lake)", ClassArcIGPU, true},
	{VendorIntel, 0x6420}: {"Intel Graphics (Lunar Lake)", ClassArcIGPU, true},
	// Intel Arc discrete.
	{VendorIntel, 0x56a0}: {"Intel Arc A770", ClassArcDGPU, false},
	{VendorIntel, 0x56a1}: {"Intel Arc A750", ClassArcDGPU, false},
	{VendorIntel, 0xe20b}: {"Intel Arc B580", ClassArcDGPU, false},
	// AMD APUs. Phoenix/Hawk Point share 0x15bf for 760M and 780M; the
	// runtime description (llama-server) tells them apart.
	{VendorAMD, 0x15bf}: {"AMD Radeon 760M/780M (Phoenix/Hawk Point)", ClassRadeon780M, true},
	{VendorAMD, 0x15c8}: {"AMD Radeon 740M (Phoenix2)", ClassRadeon760M, true},
	{VendorAMD, 0x1114}: {"AMD Radeon 840M/860M (Krackan)", ClassRadeon760M, true},
	{VendorAMD, 0x150e}: {"AMD Radeon 880M/890M (Strix Point)", ClassRadeon890M, true},
	{VendorAMD, 0x1586}: {"AMD Radeon 8050S/8060S (Strix Halo)", ClassStrixHalo, true},
	// NVIDIA RTX 30/40/50.
	{VendorNVIDIA, 0x2204}: {"NVIDIA GeForce RTX 3090", ClassRTX, false},
	{VendorNVIDIA, 0x2206}: {"NVIDIA GeForce RTX 3080", ClassRTX, false},
	{VendorNVIDIA, 0x2484}: {"NVIDIA GeForce RTX 3070", ClassRTX, false},
	{VendorNVIDIA, 0x2504}: {"NVIDIA GeForce RTX 3060", ClassRTX, false},
	{VendorNVIDIA, 0x2684}: {"NVIDIA GeForce RTX 4090", ClassRTX, false},
	{VendorNVIDIA, 0x2704}: {"NVIDIA GeForce RTX 4080", ClassRTX, false},
	{VendorNVIDIA, 0x2786}: {"NVIDIA GeForce RTX 4070", ClassRTX, false},
	{VendorNVIDIA, 0x2882}: {"NVIDIA GeForce RTX 4060", ClassRTX, false},
	{VendorNVIDIA, 0x2b85}: {"NVIDIA GeForce RTX 5090", ClassRTX, false},
	{VendorNVIDIA, 0x2c02}: {"NVIDIA GeForce RTX 5080", ClassRTX, false},
	{VendorNVIDIA, 0x2c05}: {"NVIDIA GeForce RTX 5070 Ti", ClassRTX, false},
	{VendorNVIDIA, 0x2f04}: {"NVIDIA GeForce RTX 5070", ClassRTX, false},
	// NVIDIA datacenter cards (3D controllers, class 0x0302).
	{VendorNVIDIA, 0x1db1}: {"NVIDIA Tesla V100 SXM2", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x1db4}: {"NVIDIA Tesla V100 PCIe", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x1eb8}: {"NVIDIA Tesla T4", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x20b0}: {"NVIDIA A100 SXM4 40GB", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x20b2}: {"NVIDIA A100 SXM4 80GB", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x20b5}: {"NVIDIA A100 PCIe 80GB", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x20b7}: {"NVIDIA A30", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x20f1}: {"NVIDIA A100 PCIe 40GB", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2235}: {"NVIDIA A40", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2236}: {"NVIDIA A10", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2321}: {"NVIDIA H100 NVL", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2330}: {"NVIDIA H100 SXM5 80GB", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2331}: {"NVIDIA H100 PCIe", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2335}: {"NVIDIA H200", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x2342}: {"NVIDIA GH200", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x26b5}: {"NVIDIA L40", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x26b9}: {"NVIDIA L40S", ClassNVIDIADC, false},
	{VendorNVIDIA, 0x27b8}: {"NVIDIA L4", ClassNVIDIADC, false},
	// AMD Instinct.
	{VendorAMD, 0x738c}: {"AMD Instinct MI100", ClassAMDInstinct, false},
	{VendorAMD, 0x740c}: {"AMD Instinct MI250X/MI250", ClassAMDInstinct, false},
	{VendorAMD, 0x740f}: {"AMD Instinct MI210", ClassAMDInstinct, false},
	{VendorAMD, 0x74a1}: {"AMD Instinct MI300X", ClassAMDInstinct, false},
	// Intel datacenter.
	{VendorIntel, 0x0bd5}: {"Intel Data Center GPU Max 1550", ClassIntelDC, false},
	{VendorIntel, 0x56c0}: {"Intel Data Center GPU Flex 170", ClassIntelDC, false},
}

// lookupPCI returns the built-in entry for a vendor/device pair.
func lookupPCI(vendor, device uint16) (pciName, bool) {
	n, ok := pciTable[[2]uint16{vendor, device}]
	return n, ok
}

// classifyPCI classifies a PCI display device. integrated is the sysfs
// guess, used when the id is not in the table.
func classifyPCI(vendor, device uint16, integrated bool) string {
	if n, ok := lookupPCI(vendor, device); ok {
		return n.class
	}
	if vendor == VendorNVIDIA {
		return ClassNVIDIA
	}
	if integrated {
		return ClassUnknownIGPU
	}
	return ClassUnknownDGPU
}

// descRule maps a runtime device description (as llama-server prints it)
// to a class. Order matters: the first match wins.
type descRule struct {
	re    *regexp.Regexp
	class string
}

var descRules = []descRule{
	{regexp.MustCompile(`(?i)llvmpipe|lavapipe|swiftshader|softpipe`), ClassSoftware},
	{regexp.MustCompile(`(?i)\buhd graphics\b|\buhd 7[37]0\b`), ClassUHD},
	{regexp.MustCompile(`(?i)iris\s*\(?r?\)?\s*xe`), ClassIrisXe},
	{regexp.MustCompile(`(?i)arc\b.*\b(a[357][0-9]{2}m?|b[0-9]{3})\b`), ClassArcDGPU},
	{regexp.MustCompile(`(?i)\barc\b|meteor\s*lake|arrow\s*lake|lunar\s*lake|\bmtl\b|\blnl\b|\barl\b|1[34]0v`), ClassArcIGPU},
	{regexp.MustCompile(`(?i)80[56]0s|strix\s*halo|gfx1151`), ClassStrixHalo},
	{regexp.MustCompile(`(?i)8[89]0m|strix|gfx1150`), ClassRadeon890M},
	{regexp.MustCompile(`(?i)780m|gfx1103`), ClassRadeon780M},
	{regexp.MustCompile(`(?i)7[46]0m`), ClassRadeon760M},
	{regexp.MustCompile(`(?i)instinct|\bmi[123]\d\d[a-z]*\b|gfx90a|gfx94[02]`), ClassAMDInstinct},
	{regexp.MustCompile(`(?i)data\s*center\s*gpu|ponte\s*vecchio`), ClassIntelDC},
	{regexp.MustCompile(`(?i)\b(gh200|gb200|[hb]100|[hb]200|h800|h20|a100|a800|a40|a30|a10g?|l40s?|l4|l20|t4|v100|p100)\b|tesla`), ClassNVIDIADC},
	{regexp.MustCompile(`(?i)\brtx\b|geforce|quadro`), ClassRTX},
	{regexp.MustCompile(`(?i)nvidia`), ClassNVIDIA},
	{regexp.MustCompile(`(?i)apple|\bm[1-5]\b`), ClassApple},
}

// classifyDescription classifies a device by its human-readable name.
// It returns ClassUnknown when no rule matches.
func classifyDescription(desc string) string {
	for _, r := range descRules {
		if r.re.MatchString(desc) {
			return r.class
		}
	}
	return ClassUnknown
}

// BackendOf returns the backend a llama.cpp device name belongs to:
// "CUDA0" → CUDA, "ROCm1" → ROCm, "Vulkan0" → Vulkan, "SYCL0" → SYCL,
// "Metal"/"MTL0" → Metal.
func BackendOf(name string) Backend {
	n := strings.ToLower(name)
	switch {
	case strings.HasPrefix(n, "cuda"):
		return BackendCUDA
	case strings.HasPrefix(n, "rocm"), strings.HasPrefix(n, "hip"):
		return BackendROCm
	case strings.HasPrefix(n, "vulkan"):
		return BackendVulkan
	case strings.HasPrefix(n, "sycl"):
		return BackendSYCL
	case strings.HasPrefix(n, "metal"), strings.HasPrefix(n, "mtl"):
		return BackendMetal
	case n == "cpu" || n == "none":
		return BackendCPU
	}
	return Backend(strings.TrimRightFunc(name, func(r rune) bool { return r >= '0' && r <= '9' }))
}
